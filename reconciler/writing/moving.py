"""Moves of whole points between the two collections of a split store (``[index]
archive_collection``): the main one holds the servable versions' chunks, the archive every
other one (``rules.time_rule.kept_in_main``).

A move never embeds: a point is read whole from the collection it leaves (its vectors and
payload as stored) and written as it is into the other. A document's points are found and
read in one pass (``ChunkReader.scan_points``: the doc_id filter, whole points a page at a
time), so each point is read once from the collection it leaves (a rollback's points, named
by id, are read by id); they go a batch of ``batch_points`` at a time, in four steps, each
audited before the next:

1. **intent**: one ``move`` entry per document of the batch (its point ids, the collection
   they leave, the one they go to), committed with the ``move_done`` of the batch before;
2. **copy**: the points, read whole from the source, are written into the destination (the
   archive is created first, with the main collection's layout and payload indexes);
3. **confirm**: the destination is read back; once every point there is its source's
   (payload exactly, but a float within ``FLOAT_ULPS`` where Qdrant Edge rounds it; vectors
   exactly, or the same direction where the engine normalises a cosine vector again as it
   stores it: qdrant-client local mode), ``move_copied`` is committed;
4. **delete**: the points are deleted from the source; ``move_done`` says so, committed with
   the next batch's intents (or at the end).

So a process killed between any two steps leaves every point in at least one collection (in
the source until 4, in both between 3 and 4), and a ``move`` intent without its ``move_done``:
the next runner of the shard (``recovery``) finishes it, copying again what the source still
holds, checking it and deleting it there; each step is idempotent. A failed batch stops the
run and leaves the same record. Before each batch the lease is checked (``keep_writing``).
"""

from __future__ import annotations

import itertools
import logging
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import IndexWriteError
from reconciler.model import AuditEntry, AuditKind, jsonable
from reconciler.payload import doc_id_of
from reconciler.planning import MoveTarget
from reconciler.ports import AuditWriter, ChunkIndex, SplitIndex
from reconciler.ports.index import PointCopy, PointPage, StoredPoint
from reconciler.writing.intents import IntentLog

log = logging.getLogger(__name__)

#: Relative tolerance of a vector copied into an engine that normalises it again.
DIRECTION_TOLERANCE = 1e-6
#: How far a float of a copied payload may read back from the float read, in units in the last
#: place: Qdrant Edge's JSON reader rounds some 17-digit doubles to a neighbour, up to 2 units a
#: write (measured: 28 % of doubles of random bits on a first write, 9 % again on a copy), so a
#: payload holding such a float never reads back exactly as it was written.
FLOAT_ULPS = 4


class Mover:
    """Moves points between the collections of one split store, audited (module docstring)."""

    def __init__(
        self,
        *,
        table: AuditWriter,
        split: SplitIndex,
        run_id: str,
        actor: str,
        batch_points: int = 1000,
        scroll_batch: int = 1000,
        keep_writing: Callable[[], None] | None = None,
        progress: Callable[[int], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.table = table
        #: What stamps each audit entry: the instant it is appended.
        self.clock = clock
        self.split = split
        self.run_id = run_id
        self.actor = actor
        self.batch_points = max(batch_points, 1)
        self.scroll_batch = max(scroll_batch, 1)
        self.keep_writing = keep_writing
        self.progress = progress
        #: Points moved, and the audit head after the last entry this mover committed.
        self.moved = 0
        self.audit_head = ""
        #: The last intent whose points are copied and deleted, its ``move_done`` not yet
        #: committed; the intents (``open``: the last not yet copied and deleted).
        self._done: str | None = None
        self.intents = IntentLog(self._audited, run_id=run_id, actor=actor, now=clock.now)
        #: Whether the archive was made ready (created, its payload indexes given).
        self._prepared = False

    def parts(self, *, to_archive: bool) -> tuple[ChunkIndex, ChunkIndex]:
        """(the collection a move leaves, the one it goes to)."""
        split = self.split
        return (split.main, split.archive) if to_archive else (split.archive, split.main)

    # -- what to move ---------------------------------------------------------------------------

    def move_targets(self, targets: Sequence[MoveTarget], *, to_archive: bool) -> int:
        """Move the chunks of the targets going one way (read whole through the doc_id filter
        in the collection they leave, ``scroll_batch`` documents a pass); return points moved."""
        chosen = [t for t in targets if t.to_archive == to_archive]
        reasons = {t.doc_id: ", ".join(t.reasons) or "placement" for t in chosen}
        source, _dest = self.parts(to_archive=to_archive)
        if not chosen or not source.exists():
            return 0
        before = self.moved
        for start in range(0, len(chosen), self.scroll_batch):
            doc_ids = [t.doc_id for t in chosen[start : start + self.scroll_batch]]
            found = source.scan_points(batch_size=self.scroll_batch, doc_ids=doc_ids)
            self._move(found, to_archive, reasons.get)
        return self.moved - before

    def move_all(self, *, to_archive: bool, reason: str) -> int:
        """Move every point of one collection into the other (``reconciler split --merge``)."""
        source, _dest = self.parts(to_archive=to_archive)
        if not source.exists():
            return 0
        before = self.moved
        found = source.scan_points(batch_size=self.scroll_batch)
        self._move(found, to_archive, lambda _d: reason)
        return self.moved - before

    def move_points(
        self,
        groups: Iterable[tuple[str, Sequence[str | int]]],
        *,
        to_archive: bool,
        reason: str,
    ) -> list[str | int]:
        """Move the given points (doc id, point ids) where the source still holds them (a
        rollback's); return the ids moved."""
        moved: list[str | int] = []
        source, _dest = self.parts(to_archive=to_archive)
        if not source.exists():
            return moved
        pairs = ((doc_id, pid) for doc_id, ids in groups for pid in ids)
        self._move(held(source, pairs, self.batch_points), to_archive, lambda _d: reason, moved)
        return moved

    def _move(
        self,
        pages: Iterable[PointPage],
        to_archive: bool,
        reason: Callable[[str], str | None],
        moved: list[str | int] | None = None,
    ) -> None:
        """Move the pages' points, ``batch_points`` a batch (the points as the pages read
        them: each read once, whole)."""
        size = self.batch_points
        points: list[StoredPoint] = []
        doc_ids: list[Any] = []
        for page in pages:
            points += page.points
            doc_ids += page.doc_ids
            while len(points) >= size:
                self._batch(PointPage(points[:size], doc_ids[:size]), to_archive, reason, moved)
                del points[:size], doc_ids[:size]
        if points:
            self._batch(PointPage(points, doc_ids), to_archive, reason, moved)

    # -- one batch --------------------------------------------------------------------------

    def _batch(
        self,
        batch: PointPage,
        to_archive: bool,
        reason: Callable[[str], str | None],
        moved: list[str | int] | None,
    ) -> None:
        points = batch.points
        source, dest = self.parts(to_archive=to_archive)
        if self.keep_writing is not None:
            try:
                self.keep_writing()
            except Exception:
                self.finish()  # the batch before is done: say so, then stop
                raise
        by_doc: dict[Any, list[str | int]] = {}
        for doc_id, point in zip(map(doc_id_of, batch.doc_ids), points, strict=True):
            by_doc.setdefault(doc_id, []).append(point.point_id)
        names = {"from": _name(source), "to": _name(dest)}
        intents = [
            AuditEntry(
                run_id=self.run_id,
                at=self.clock.now(),
                actor=self.actor,
                reason=reason(doc_id) if doc_id is not None else "placement",
                target_type=AuditKind.MOVE,
                target=doc_id or "(no doc_id)",
                before={"points": jsonable(ids), "from": names["from"]},
                after={"to": names["to"]},
            )
            for doc_id, ids in by_doc.items()
        ]
        opened = self.intents.intend(intents, closing=self._done_entries())
        copy_into(self.split, dest, points, prepare=not self._prepared)
        self._prepared = self._prepared or dest is self.split.archive
        self._audit([self.intents.entry(AuditKind.MOVE_COPIED, opened, points=len(points))])
        source.delete_stored(points)
        self._done, self.intents.open = opened, None
        self.moved += len(points)
        if moved is not None:
            moved.extend(p.point_id for p in points)
        if self.progress is not None:
            self.progress(self.moved)
        log.debug("moved %d point(s) %s -> %s", len(points), names["from"], names["to"])

    def finish(self) -> None:
        """Commit the ``move_done`` of the last batch (the others went with the batch after)."""
        entries = self._done_entries()
        if entries:
            self._audit(entries)

    def _done_entries(self) -> list[AuditEntry]:
        if self._done is None:
            return []
        entry = self.intents.entry(AuditKind.MOVE_DONE, self._done)
        self._done = None
        return [entry]

    @property
    def open_intent(self) -> str | None:
        """The last intent not yet copied and deleted (a batch in doubt)."""
        return self.intents.open

    def _audit(self, entries: list[AuditEntry]) -> None:
        self._audited(entries)

    def _audited(self, entries: list[AuditEntry]) -> str:
        """Append ``entries`` in one commit; the audit head after them."""
        head = self.table.append_audit(entries)
        if head:
            self.audit_head = head
        return self.audit_head


def held(
    source: ChunkIndex, pairs: Iterable[tuple[str | None, str | int]], size: int
) -> Iterator[PointPage]:
    """The given (doc id, point id)s' points that ``source`` still holds, read whole by id,
    ``size`` ids a page (each with the doc id it was given)."""
    pairs = iter(pairs)
    while part := list(itertools.islice(pairs, size)):
        points = source.read_points([pid for _doc, pid in part])
        owner = {str(pid): doc_id for doc_id, pid in part}
        yield PointPage(points, [owner.get(str(p.point_id)) for p in points])


def copy_into(
    split: SplitIndex, dest: ChunkIndex, points: Sequence[StoredPoint], *, prepare: bool = True
) -> None:
    """Write whole points into ``dest`` (with ``prepare``, the archive first made ready:
    created with the main collection's layout, given the main collection's payload indexes
    it lacks) and read them back: ``IndexWriteError`` unless each is there as it was read
    (nothing is deleted from the source then)."""
    if prepare and dest is split.archive:
        dest.ensure_layout(split.main.vector_layout(), indexes=split.main.payload_indexes())
    dest.copy_points(points)
    back = dest.read_back(points)
    wrong = [p.point_id for p, copy in zip(points, back, strict=True) if not same_point(p, copy)]
    if wrong:
        raise IndexWriteError(
            f"{len(wrong)} point(s) copied into {_name(dest)} do not read back as they were "
            f"read (first: {wrong[0]}); nothing was deleted from the collection they leave, "
            "and the next run finishes the move",
            points_written=0,
        )


def same_point(read: StoredPoint, copied: PointCopy | None) -> bool:
    """Whether a copied point is the point read: the same payload (a float within
    ``FLOAT_ULPS`` of the one read), the same vectors (or, on an engine that normalises a cosine
    vector as it stores it, the same direction). (Each of ``copied``'s two is asked for once:
    an engine's record may convert it again each time.)"""
    if copied is None:
        return False
    payload, back = read.payload, copied.payload or {}
    vector, vector_back = read.vector, copied.vector
    if payload == back and vector == vector_back:  # (the usual copy: equal as they are)
        return True
    payload, back = _plain(payload), _plain(back)
    return (payload == back or _close(payload, back)) and _same_vector(vector, vector_back)


def _plain(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A payload as a dict to compare (one already is: not copied)."""
    return payload if isinstance(payload, dict) else dict(payload)


def _close(a: Any, b: Any) -> bool:
    """Whether two payload values are equal, all the way down, a float within ``FLOAT_ULPS``
    of another float (as ``==`` has it otherwise: ``3 == 3.0``)."""
    if type(a) is float and type(b) is float and math.isfinite(a) and math.isfinite(b):
        # (one sign, the bits a few apart: never infinity beside the largest double)
        same_sign = math.copysign(1, a) == math.copysign(1, b)
        return a == b or (same_sign and abs(_bits(a) - _bits(b)) <= FLOAT_ULPS)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(_close, a, b))
    return bool(a == b)


def _bits(value: float) -> int:
    """A double's bits as an integer: neighbours of one sign are one apart."""
    return int.from_bytes(struct.pack("<d", value), "little", signed=True)


def _same_vector(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same_vector(a[k], b[k]) for k in a)
    if not (isinstance(a, list | tuple) and isinstance(b, list | tuple)) or len(a) != len(b):
        return False
    if a and all(isinstance(x, list | tuple) for x in (*a, *b)):  # a multivector
        return all(_same_vector(x, y) for x, y in zip(a, b, strict=True))
    if not all(isinstance(x, float | int) for x in (*a, *b)):
        return False
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))
    return norms > 0 and dot / norms >= 1 - DIRECTION_TOLERANCE


def _name(part: ChunkIndex) -> str:
    """A collection's name as the audit records it."""
    return str(getattr(part, "collection", None) or part)


def unfinished(entries: Sequence[AuditEntry], hashes: Sequence[str]) -> Iterator[AuditEntry]:
    """The ``move`` intents of one run after its last ``move_done`` (in order)."""
    done_through = None
    for entry in entries:
        if entry.target_type == AuditKind.MOVE_DONE and isinstance(entry.after, dict):
            done_through = entry.after.get("through")
    position = hashes.index(done_through) if done_through in hashes else -1
    return (e for e in entries[position + 1 :] if e.target_type == AuditKind.MOVE)
