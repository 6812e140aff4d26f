"""Is this chunk's payload still different from what a plan writes? The comparisons the
``Applier`` makes before it writes a point (``Differs``, ``still_differs``), the keys a write
must send (``changed_keys``), the points of one write (``WriteGroup``) and what the check's
scan kept about where drift is (``Located``)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.model import MANAGED_KEYS
from reconciler.payload import Variant, normalize, same_variant
from reconciler.planning import PayloadTarget, needs_write
from reconciler.ports.index import ABSENT


def managed(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The managed keys present in a logical payload (absent keys stay absent)."""
    return {key: payload[key] for key in MANAGED_KEYS if key in payload}


def still_differs(
    payload: Mapping[str, Any], target: PayloadTarget, expected: Variant | None
) -> tuple[dict[str, Any], Variant] | None:
    """A point's managed payload and its canonical form (what its points are grouped by),
    when it does not carry what ``target`` writes yet (``planning.needs_write``); ``None``
    when it does. ``expected`` is ``normalize(target.payload)``, worked out once a target
    (``None`` for a partial target): a point is canonicalised once, not three times."""
    before = managed(payload)
    if target.partial:
        if not needs_write(payload, target):
            return None
        return before, normalize(before)
    key = normalize(before)  # (absent keys read as None, as in the whole payload)
    return None if expected is not None and same_variant(key, expected) else (before, key)


def expected_of(target: PayloadTarget) -> Variant | None:
    """``normalize(target.payload)`` for ``still_differs`` (``None`` for a partial target)."""
    return None if target.partial else normalize(target.payload)


class Differs:
    """``still_differs`` for the points of one target, remembered by a point's managed values,
    with the keys a write must send to such a point.

    A document's drifted chunks usually carry one same stale payload: the first is compared
    and canonicalised, the others reuse its answer. The memory is keyed by the values, their
    types and which keys are present, so a reused answer (and the ``before`` it carries) is
    exactly what the point would get. A point with an unhashable value (a list) is judged alone.
    """

    __slots__ = ("_expected", "_seen", "target")

    def __init__(self, target: PayloadTarget) -> None:
        self.target = target
        self._expected: Variant | bool | None = False  # (False: not worked out yet)
        self._seen: dict[tuple[Any, ...], Differing | None] = {}

    @property
    def expected(self) -> Variant | None:
        """``normalize(target.payload)``, worked out once, when first asked for (``None`` for a
        partial target): a document written by the ids its scan kept never asks."""
        if self._expected is False:
            self._expected = expected_of(self.target)
        return self._expected  # type: ignore[return-value]

    @property
    def values(self) -> tuple[Any, ...]:
        """The target's values in ``MANAGED_KEYS`` order, as written (``None`` where absent)."""
        return tuple(map(self.target.payload.get, MANAGED_KEYS))

    def raw(self, values: tuple[Any, ...]) -> Differing | None:
        """The same answer from a point's raw managed values in ``MANAGED_KEYS`` order, an
        absent key as ``ABSENT`` (``retrieve_managed``): no logical payload is built unless
        values of the same types were not met before (``ABSENT`` has a type of its own, so
        which keys are present is part of what is remembered, as in ``__call__``)."""
        if self.target.partial:
            return self(present(values))
        try:
            spelling = (values, tuple(map(type, values)))
            return self._seen[spelling]
        except KeyError:
            judged = self._seen[spelling] = self._judge(present(values))
            return judged
        except TypeError:  # an unhashable value
            return self._judge(present(values))

    def scanned(self, values: tuple[Any, ...]) -> Differing | None:
        """``raw`` for a point the check's scan kept as differing from its row, when the row is
        what this (whole) target writes (``Located.matches``): it differs (the scan compared
        its meaning with the row's), so only its before and the keys to send are worked out,
        once a spelling, with no ``normalize``; its points are grouped by that spelling."""
        if self.target.partial:
            return self.raw(values)
        spelling: Any
        found: Differing | None
        try:
            spelling = (values, tuple(map(type, values)))
            found = self._seen.get(spelling)
        except TypeError:  # an unhashable value: alone
            spelling, found = (object(),), None
        if found is None:
            before = present(values)
            found = (before, spelling, changed_keys(before, self.target.payload))
            with contextlib.suppress(TypeError):
                self._seen[spelling] = found
        return found

    def group(self, values: tuple[Any, ...], *, alone: bool = False) -> WriteGroup | None:
        """The (empty) group of the points the scan read as ``values`` (``scanned``), or
        ``None`` when they need no write. ``alone``: the only values of this target's points
        (a document read alike), so nothing is remembered for another: the same group."""
        if alone and not self.target.partial:
            before = present(values)
            differs: Differing | None = (before, (), changed_keys(before, self.target.payload))
        else:
            differs = self.scanned(values)
        if differs is None:
            return None
        before, _key, keys = differs
        group = WriteGroup(target=self.target, before=before)
        group.keys.update(self.target.payload if keys is None else keys)
        return group

    def __call__(self, payload: Mapping[str, Any]) -> Differing | None:
        """``still_differs(payload, target, expected)``, and the keys to send it
        (``changed_keys``; ``None`` for a partial target: all of its keys)."""
        if self.target.partial:
            found = still_differs(payload, self.target, None)
            return None if found is None else (*found, None)
        values = tuple(map(payload.get, MANAGED_KEYS))
        try:
            spelling = (
                values,
                tuple(map(type, values)),
                tuple(map(payload.__contains__, MANAGED_KEYS)),
            )
            return self._seen[spelling]
        except KeyError:
            judged = self._seen[spelling] = self._judge(payload)
            return judged
        except TypeError:  # an unhashable value
            return self._judge(payload)

    def _judge(self, payload: Mapping[str, Any]) -> Differing | None:
        found = still_differs(payload, self.target, self.expected)
        if found is None:
            return None
        return (*found, changed_keys(payload, self.target.payload))


def present(values: tuple[Any, ...]) -> dict[str, Any]:
    """Re-read values in ``MANAGED_KEYS`` order as a logical payload: the keys present."""
    return {
        key: value for key, value in zip(MANAGED_KEYS, values, strict=True) if value is not ABSENT
    }


#: What ``Differs`` says of a point that needs writing: its managed payload, its canonical
#: form, and the keys to send it (``None``: every key of the target).
Differing = tuple[dict[str, Any], Variant, frozenset[str] | None]


def changed_keys(payload: Mapping[str, Any], written: Mapping[str, Any]) -> frozenset[str]:
    """The keys of ``written`` a point (its logical ``payload``) does not hold exactly: the
    value itself, of the same type (``1.0`` is not ``1``), or, for ``None``, no key at all
    (``None`` removes a key). Sending only these leaves the point as sending all would; each
    key sent costs Edge and Qdrant a payload index update where the key is indexed.
    (``payload.holds`` of each key, spelt out here: it runs once a document repaired.)"""
    changed = []
    for key, value in written.items():
        if value is None:
            if key in payload:
                changed.append(key)
        elif key not in payload:
            changed.append(key)
        else:
            held = payload[key]
            if type(held) is not type(value) or held != value:
                changed.append(key)
    return frozenset(changed)


class Located(Protocol):
    """What the check's scan kept about where drift is (``chunk_tally.ChunkTally``)."""

    def matches(self, doc_id: str | None, expected: Variant) -> bool:
        """Whether ``expected`` (a payload, ``normalize``d) is what the scan compared
        ``doc_id``'s chunks with."""
        ...

    def holds(self, doc_id: str | None, values: tuple[Any, ...]) -> bool:
        """``matches`` of a payload's raw values in ``MANAGED_KEYS`` order, not normalised
        (``False`` may still be the same meaning spelt otherwise)."""
        ...

    def scanned(self, doc_id: str | None) -> Scanned | None:
        """Ids of the chunks that differed, and the managed values the scan read at each, in
        ``MANAGED_KEYS`` order, an absent key as ``ABSENT`` (``None``: not all kept)."""
        ...


#: The ids of a document's chunks the scan kept, and the values it read at each.
Scanned = tuple[list[str | int], list[tuple[Any, ...]]]


@dataclass
class WriteGroup:
    """The points of one document that one payload write sends, with what they held."""

    target: PayloadTarget
    before: dict[str, Any]
    point_ids: list[str | int] = field(default_factory=list)
    #: The target's keys some point of the group does not hold (empty: all, unknown).
    keys: set[str] = field(default_factory=set)

    def add(self, point_id: str | int, keys: frozenset[str] | None) -> None:
        """One more point, which needs ``keys`` sent (``None``: all of them)."""
        self.point_ids.append(point_id)
        self.keys.update(self.target.payload if keys is None else keys)

    def payload(self) -> dict[str, Any]:
        """What the write sends: the target's keys some point does not hold, in its order."""
        keys = self.keys
        if not keys:
            return dict(self.target.payload)
        return {key: value for key, value in self.target.payload.items() if key in keys}
