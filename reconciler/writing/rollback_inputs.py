"""What a rollback reads, as values: the runs it undoes (``RunHistory``), the rows, points and
declarations their entries name (``RollbackInputs``, read once by ``rollback.read_history``),
and what the steps planned so far would have written over them (``Overlay``), which
``rollback_plan`` folds into a plan.

A run that wrote a million points names a million points, but its documents' chunks carry a
few payloads each: ``Shared`` hands out one object for equal payloads and points, so the
points a rollback reads (and those its plan writes) hold one small entry each, not a payload
each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from reconciler.model import AuditEntry, Document

#: An empty mapping no one can change (an overlay's start).
EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class RunHistory:
    """One run as a rollback reads it: its status, its audit entries (in order) and the later
    runs that changed the same documents and still stand (newest first)."""

    run_id: str
    status: str
    entries: tuple[AuditEntry, ...]
    later: tuple[str, ...] = ()


@dataclass(frozen=True)
class Point:
    """A point as planned: its managed payload, its collection (``None``: there is one)."""

    payload: Mapping[str, Any]
    where: str | None = None


@dataclass(frozen=True)
class RollbackInputs:
    """Everything a rollback reads, read once (``read_history``)."""

    run_id: str
    #: The runs read, the rolled-back one and (with ``cascade``) every later one to undo.
    runs: Mapping[str, RunHistory]
    #: The rows of every document the runs' entries name (absent: no row).
    rows: Mapping[str, Document]
    #: Point id (as text) -> the point; absent: in no collection.
    points: Mapping[str, Point]
    #: Declaration id -> whether it is active now (absent: no such declaration).
    declarations: Mapping[str, bool]
    #: A split store's (main, archive) collection names (``None``: one collection).
    collections: tuple[str, str] | None = None
    cascade: bool = False


@dataclass(frozen=True)
class Overlay:
    """What the steps planned so far would have written, over the inputs (a value)."""

    rows: Mapping[str, Document] = field(default_factory=lambda: EMPTY)
    points: Mapping[str, Point | None] = field(default_factory=lambda: EMPTY)
    declarations: Mapping[str, bool] = field(default_factory=lambda: EMPTY)

    def row(self, inputs: RollbackInputs, doc_id: str) -> Document | None:
        """The row as the steps before left it."""
        return self.rows.get(doc_id, inputs.rows.get(doc_id))

    def point(self, inputs: RollbackInputs, point_id: Any) -> Point | None:
        """The point as the steps before left it (``None``: in no collection)."""
        key = str(point_id)
        return self.points[key] if key in self.points else inputs.points.get(key)

    def active(self, inputs: RollbackInputs, decl_id: str) -> bool | None:
        """Whether a declaration is active as the steps before left it (``None``: none)."""
        return self.declarations.get(decl_id, inputs.declarations.get(decl_id))

    def written(
        self,
        *,
        rows: Mapping[str, Document] = EMPTY,
        points: Mapping[str, Point | None] = EMPTY,
        declarations: Mapping[str, bool] = EMPTY,
    ) -> Overlay:
        """This overlay with more writes over it."""
        return Overlay(
            MappingProxyType({**self.rows, **rows}),
            MappingProxyType({**self.points, **points}),
            MappingProxyType({**self.declarations, **declarations}),
        )


class Shared:
    """One object for each distinct payload and point handed to it (a payload with a value
    that cannot be hashed, a list, is kept as it is). Equal means equal values of equal types
    under the same keys, so a shared payload is exactly what the point holds."""

    def __init__(self) -> None:
        self._payloads: dict[tuple[Any, ...], Mapping[str, Any]] = {}
        self._points: dict[tuple[int, str | None], Point] = {}
        self._derived: dict[tuple[int, int], tuple[Point, Mapping[str, Any], Point]] = {}

    def payload(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        """``payload``, or the equal one handed in before."""
        key = tuple((k, type(v), v) for k, v in sorted(payload.items()))
        try:
            return self._payloads.setdefault(key, payload)
        except TypeError:  # (a list among the values)
            return payload

    def point(self, payload: Mapping[str, Any], where: str | None = None) -> Point:
        """The point that holds ``payload`` in ``where``, one object for equal ones."""
        shared = self.payload(payload)
        key = (id(shared), where)
        point = self._points.get(key)
        if point is None or point.payload is not shared:
            point = self._points[key] = Point(shared, where)
        return point

    def written(self, point: Point, payload: Mapping[str, Any]) -> Point:
        """``point`` with ``payload`` set on it (the same object for the same two)."""
        key = (id(point), id(payload))
        held = self._derived.get(key)
        if held is None or held[0] is not point or held[1] is not payload:
            held = (point, payload, self.point({**point.payload, **payload}, point.where))
            self._derived[key] = held
        return held[2]

    def moved(self, point: Point, where: str | None) -> Point:
        """``point`` in the collection ``where``."""
        return self.point(point.payload, where) if point.where != where else point
