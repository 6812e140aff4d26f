"""The documents' part of a rollback, planned (pure): for one run and the documents its
entries at hand name, the row fields to restore, the payload writes (grouped as the applier
groups them), the points to move back and what is left undone (``DocumentsUndo``), over an
``Overlay`` of what the steps before would have written.

A rollback's effect on one document depends on that document's entries, row and points only,
so these are planned for any set of documents the same as for all of them: ``rollback_plan``
folds all of a run's at once, ``rollback_pages`` a page of documents at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from reconciler.model import (
    MANAGED_KEYS,
    AuditEntry,
    AuditKind,
    Document,
    RowChange,
    VersionState,
    fields_from_json,
    jsonable,
)
from reconciler.payload import payload_for
from reconciler.planning import PayloadTarget
from reconciler.writing.differs import expected_of, still_differs
from reconciler.writing.rollback_inputs import Overlay, Point, RollbackInputs, Shared

#: A document's points the run wrote (or meant to), with what to set on them.
PayloadTargets = tuple[tuple[str, tuple[Any, ...], Mapping[str, Any]], ...]


@dataclass(frozen=True)
class PayloadGroup:
    """One payload write: ``payload`` on a document's points that held ``before``."""

    doc_id: str
    point_ids: tuple[Any, ...]
    payload: Mapping[str, Any]
    before: Mapping[str, Any]


@dataclass(frozen=True)
class MoveBack:
    """The points of a run's ``move`` intent for one document, to take back to the
    collection they left (``to_archive``: back into the archive); ``moving`` of them are
    still where the run put them."""

    doc_id: str
    point_ids: tuple[Any, ...]
    to_archive: bool
    moving: tuple[Any, ...]


@dataclass(frozen=True)
class DocumentsUndo:
    """The rollback of one run for some of its documents: what the executor writes, in this
    order (rows, then payloads derived from them, then a split store's moves back)."""

    rows: tuple[RowChange, ...]
    #: Every document's points the run wrote (or meant to), with what to set on them.
    payload_targets: PayloadTargets
    #: The payload writes the targets come to, given the points as the plan sees them.
    payloads: tuple[PayloadGroup, ...]
    #: A split store's moves back (``None``: one collection).
    moves: tuple[MoveBack, ...] | None
    #: Row fields changed since (or rows gone), points moved since: left and listed.
    not_undone: tuple[Mapping[str, Any], ...]


def plan_documents(
    inputs: RollbackInputs,
    run_id: str,
    entries: Sequence[AuditEntry],
    overlay: Overlay,
    batch_points: int,
) -> tuple[DocumentsUndo, Overlay]:
    """The rollback of run ``run_id`` for the documents its ``entries`` name (its row,
    payload and move entries, in order), over the stores as ``overlay`` says they are; and
    the overlay it leaves."""
    reason = f"rollback of run {run_id}"
    changes, skipped = _row_changes(inputs, overlay, run_id, entries)
    overlay = overlay.written(rows=_rows_after(inputs, overlay, changes))
    targets = tuple(
        (doc_id, tuple(ids), _payload_of(overlay.row(inputs, doc_id), restored_keys))
        for doc_id, (ids, restored_keys) in _points_by_doc(
            e for e in entries if e.target_type == AuditKind.PAYLOAD
        ).items()
    )
    groups, written = _payload_groups(inputs, overlay, targets, reason, max(batch_points, 1))
    overlay = overlay.written(points=written)
    moves: tuple[MoveBack, ...] | None = None
    left: list[dict[str, Any]] = []
    if inputs.collections is not None:
        moves, left, moved = _moves_back(inputs, overlay, entries)
        overlay = overlay.written(points=moved)
    undo = DocumentsUndo(tuple(changes), targets, tuple(groups), moves, tuple(skipped + left))
    return undo, overlay


def _payload_of(row: Document | None, restored: Mapping[str, Any]) -> Mapping[str, Any]:
    """What a document's chunks get back: from its restored row, else the keys the run
    changed on them, with their before-values."""
    return MappingProxyType(payload_for(row) if row is not None else dict(restored))


def _payload_groups(
    inputs: RollbackInputs,
    overlay: Overlay,
    targets: Iterable[tuple[str, tuple[Any, ...], Mapping[str, Any]]],
    reason: str,
    batch_points: int,
) -> tuple[list[PayloadGroup], dict[str, Point | None]]:
    """The payload writes the applier makes for ``targets`` (``Applier.write_groups``: per
    document, ``batch_points`` ids at a time, the points that still differ grouped by what
    they hold), and the points as they leave them."""
    groups: list[PayloadGroup] = []
    written: dict[str, Point | None] = {}
    shared = Shared()  # (a document's points, written alike, share what they leave)
    for doc_id, ids, payload in targets:
        partial = set(payload) != set(MANAGED_KEYS)
        target = PayloadTarget(doc_id, None, payload, len(ids), (reason,), partial=partial)
        expected = expected_of(target)
        for start in range(0, len(ids), batch_points):
            variants: dict[Any, tuple[dict[str, Any], list[Any]]] = {}
            for pid in dict.fromkeys(ids[start : start + batch_points]):
                key = str(pid)
                point = written[key] if key in written else overlay.point(inputs, pid)
                if point is None:
                    continue
                differs = still_differs(point.payload, target, expected)
                if differs is None:
                    continue
                before, variant = differs
                variants.setdefault(variant, (before, []))[1].append(pid)
                written[key] = shared.written(point, payload)
            groups += [
                PayloadGroup(doc_id, tuple(pids), payload, before)
                for before, pids in variants.values()
            ]
    return groups, written


def _moves_back(
    inputs: RollbackInputs, overlay: Overlay, entries: Sequence[AuditEntry]
) -> tuple[tuple[MoveBack, ...], list[dict[str, Any]], dict[str, Point | None]]:
    """The points of a run's ``move`` intents to take back to the collection they left, where
    they are still in the one it put them in (what the run served stops first); the others,
    listed; the points as the moves leave them."""
    assert inputs.collections is not None
    main, archive = inputs.collections
    moves: list[MoveBack] = []
    left: list[dict[str, Any]] = []
    moved: dict[str, Point | None] = {}
    shared = Shared()
    for back_to_archive in (True, False):  # (what the run served stops first)
        leave, went = (archive, main) if back_to_archive else (main, archive)
        going = [
            e
            for e in entries
            if e.target_type == AuditKind.MOVE
            and (e.before.get("from"), e.after.get("to")) == (leave, went)
        ]
        for entry in going:
            ids = tuple(entry.before["points"])
            moving = []
            for pid in ids:
                key = str(pid)
                point = moved[key] if key in moved else overlay.point(inputs, pid)
                if point is not None and point.where == went:
                    moving.append(pid)
                    moved[key] = shared.moved(point, leave)
            moves.append(MoveBack(entry.target, ids, back_to_archive, tuple(moving)))
        back = {str(p) for m in moves[len(moves) - len(going) :] for p in m.moving}
        for entry in going:
            stayed = [p for p in entry.before["points"] if str(p) not in back]
            if stayed:
                left.append(
                    {
                        "target_type": AuditKind.MOVE,
                        "target": entry.target,
                        "after": {"moved_since": stayed},
                    }
                )
    return tuple(moves), left, moved


def _row_changes(
    inputs: RollbackInputs, overlay: Overlay, run_id: str, entries: Sequence[AuditEntry]
) -> tuple[list[RowChange], list[dict[str, Any]]]:
    """Each row field the run changed, back to its before-value, when the row still holds
    what the run wrote; a field changed since outside any rolled-back run (by hand, by an
    ingestion) is left as it is and listed. ``before`` is what the row holds now."""
    changes: list[RowChange] = []
    skipped: list[dict[str, Any]] = []
    restored: dict[str, dict[str, Any]] = {}
    for entry in reversed(entries):
        if entry.target_type != AuditKind.ROW:
            continue
        row = overlay.row(inputs, entry.target)
        if row is None:
            skipped.append(
                {"target_type": AuditKind.ROW, "target": entry.target, "after": "no row now"}
            )
            continue
        written, back = fields_from_json(entry.after), fields_from_json(entry.before)
        now = {**{f: getattr(row, f) for f in written}, **restored.get(entry.target, {})}
        ours = {f for f in written if jsonable(now[f]) == jsonable(written[f])}
        for field_name in sorted(set(written) - ours):
            skipped.append(
                {
                    "target_type": AuditKind.ROW,
                    "target": entry.target,
                    "after": {field_name: jsonable(now[field_name]), "changed_since": True},
                }
            )
        if ours:
            changes.append(
                RowChange(
                    doc_id=entry.target,
                    reason=f"rollback of run {run_id}",
                    before={f: now[f] for f in ours},
                    after={f: back[f] for f in ours},
                )
            )
            restored.setdefault(entry.target, {}).update({f: back[f] for f in ours})
    return changes, skipped


def _rows_after(
    inputs: RollbackInputs, overlay: Overlay, changes: Sequence[RowChange]
) -> dict[str, Document]:
    """The rows as ``changes`` leave them (a row that does not exist stays absent)."""
    rows: dict[str, Document] = {}
    for change in changes:
        row = rows.get(change.doc_id) or overlay.row(inputs, change.doc_id)
        if row is None:
            continue
        values = dict(change.after)
        if values.get("version_state") is not None:
            values["version_state"] = VersionState(values["version_state"])
        rows[change.doc_id] = replace(row, **values)
    return rows


def _points_by_doc(
    intents: Iterable[AuditEntry],
) -> dict[str, tuple[list[Any], dict[str, Any]]]:
    """doc id -> (every point the run wrote or meant to write, each once, the keys it changed
    on them with their before-values: what a document without a row gets back). Each once:
    a batch retried names its points again, and the applier, which reads a slice of points
    before the batch holding the last slice's writes is sent, would write a point named in
    two slices twice (what the plan counts once)."""
    found: dict[str, tuple[list[Any], dict[str, Any]]] = defaultdict(lambda: ([], {}))
    for intent in intents:
        ids, restored = found[intent.target]
        ids.extend(intent.before["points"])
        before, after = intent.before["payload"], intent.after["payload"]
        for key in MANAGED_KEYS:
            if key in after and before.get(key) != after.get(key):
                restored[key] = before.get(key)
    return {doc_id: (list(dict.fromkeys(ids)), keys) for doc_id, (ids, keys) in found.items()}
