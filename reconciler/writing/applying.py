"""Applies a plan: row updates, payload writes, indexes — each audited.

Order: table changes (rows, re-ingest requests, their audit entries) in one transaction; then
payloads in batches of point ids through ``batch_update_points``; then payload indexes.

Which points: those the check's scan already saw. A document whose row stays as it is needs
only its chunks that differed from the row, and the scan kept their ids (``Located``); they
are re-read by id and written. A document whose row changes needs every chunk that does not
carry the new payload: its points are selected through the ``doc_id`` payload filter (an
index lookup on a server). Only when the scan could not keep every id (more than
``Options.keep_ids`` mismatching chunks) are documents without a doc_id found by scrolling the
collection again. Each payload batch holds whole documents and goes out as one
``batch_update_points`` call, its audit entries as one append.

Audit before write: each payload batch's entries (point ids, exact before, after) are
committed as *intents* before the batch is sent, and *confirmed* by an entry committed with
the next batch's intents (or at the end). So a process killed anywhere leaves every changed
value covered by an entry; the next run that takes the lease resolves the unconfirmed intents
by re-reading those points (``recovery``). A failed batch stops the run and records exactly
which points were written (re-read by id); every write is idempotent, so the next run
converges. Before each batch the lease is checked: a runner that lost it stops writing.
Never deletes a point, never writes a vector or chunk text, never ``overwrite_payload``/upsert,
but in a split store (``[index] archive_collection``), where a plan's moves then take whole
points from one collection to the other, vectors as they are (``moving``): after the payload
writes, so a point moves with the payload it keeps (a point is never written in the
collection it has just been copied into: qdrant-client local mode would store again the
vector it normalised in memory).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import IndexWriteError
from reconciler.model import (
    MANAGED_KEYS,
    AuditEntry,
    AuditKind,
    PayloadWrite,
    RowChange,
    jsonable,
    page_entry,
)
from reconciler.planning import PayloadTarget, Plan, needs_write
from reconciler.ports import ChunkIndex, DocumentTable, split_of
from reconciler.writing.differs import (
    Differs,
    Located,
    Scanned,
    WriteGroup,
    expected_of,
    still_differs,
)
from reconciler.writing.intents import IntentLog
from reconciler.writing.moving import Mover

log = logging.getLogger(__name__)

#: A values tuple not judged yet (``_write_by_id``).
_UNSEEN: Any = object()


@dataclass
class ApplyResult:
    """What was actually written."""

    rows: int = 0
    reingests: int = 0
    payload_writes: int = 0
    points: int = 0
    indexes: int = 0
    audit_head: str = ""
    error: str | None = None
    #: Points moved between the collections of a split store (``split``: the store is one).
    moves: int = 0
    split: bool = False

    def counts(self) -> dict[str, Any]:
        """For the run record."""
        counts: dict[str, Any] = {
            "table": self.rows,
            "reingest": self.reingests,
            "payload": self.payload_writes,
            "points": self.points,
            "index": self.indexes,
            "audit_head": self.audit_head,
        }
        if self.split:
            counts["moves"] = self.moves
        return counts


class Applier:
    """Executes a plan against the document table and the chunk index."""

    def __init__(
        self,
        *,
        table: DocumentTable,
        index: ChunkIndex,
        run_id: str,
        actor: str,
        batch_points: int = 256,
        scroll_batch: int = 1000,
        progress: Callable[[int], None] | None = None,
        max_pending: int = 100_000,
        keep_writing: Callable[[], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.table = table
        #: What stamps each audit entry: the instant it is appended, on the clock (never a
        #: run's ``--now``), so the log's times are when each write happened.
        self.clock = clock
        #: Raises (``LeaseLost``) when this runner may no longer write; called before a batch.
        self.keep_writing = keep_writing
        #: The payload intents, and the points of those not yet confirmed.
        self.intents = IntentLog(self._audited, run_id=run_id, actor=actor, now=clock.now)
        self._unconfirmed_points = 0
        #: True when a batch was sent but whether it was written is not known (its intents
        #: stay unconfirmed: the next runner of the shard re-reads those points).
        self.in_doubt = False
        self.max_pending = max_pending
        self.index = index
        self.run_id = run_id
        self.actor = actor
        self.batch_points = batch_points
        self.scroll_batch = scroll_batch
        self.progress = progress
        split = split_of(index)
        self.result = ApplyResult(split=split is not None)
        #: A split store's mover (``None``: one collection).
        self.mover = (
            None
            if split is None
            else Mover(
                table=table,
                split=split,
                run_id=run_id,
                actor=actor,
                batch_points=scroll_batch,
                scroll_batch=scroll_batch,
                keep_writing=keep_writing,
                clock=clock,
            )
        )

    def audit_first(self, entries: Sequence[AuditEntry]) -> None:
        """Audit ``entries`` before the plan (a forced run's override): the run's audit head
        until the plan writes."""
        self.result.audit_head = self.table.append_audit(entries)

    def apply(self, plan: Plan, *, located: Located | None = None) -> ApplyResult:
        """Execute ``plan``; raise IndexWriteError (after recording) if a batch fails.

        ``located``: what the scan kept, so points are written by id (see the module's doc);
        without it every document's points are selected through the doc_id filter."""
        changes = [
            RowChange(
                doc_id=u.doc_id,
                reason=", ".join(u.reasons),
                before={k: b for k, (b, _a) in u.fields().items()},
                after={k: a for k, (_b, a) in u.fields().items()},
            )
            for u in plan.row_updates
        ]
        reingests = [(r, r.reason) for r in plan.reingests]
        if self.keep_writing is not None and (changes or reingests):
            self.keep_writing()  # the scan may have been long: still ours to write?
        head, queued = self.table.write_rows_and_outbox(
            run_id=self.run_id,
            actor=self.actor,
            changes=changes,
            reingests=reingests,
            at=self.clock.now(),
        )
        self.result.rows, self.result.reingests = len(changes), queued
        self.result.audit_head = head or self.result.audit_head
        if plan.payload_targets:
            try:
                self._payloads(plan.payload_targets, located=located)
            except IndexWriteError:
                raise  # the failed batch was confirmed as far as it went
            except Exception:
                # A failure after a batch was written (a scroll that broke): say so first.
                with contextlib.suppress(Exception):
                    self.confirm()
                raise
            self.confirm()
        for to_archive in (True, False):
            self._moves(plan, to_archive=to_archive)
        for key, schema in plan.indexes:
            if self.keep_writing is not None:
                self.keep_writing()
            self._audit(
                [
                    AuditEntry(
                        self.run_id,
                        self.clock.now(),
                        self.actor,
                        "index/payload_index_missing",
                        AuditKind.INDEX,
                        key,
                        None,
                        {"schema": schema},
                    )
                ]
            )
            self.index.create_payload_index(key=key, schema=schema)
            self.result.indexes += 1
        log.debug("applied run %s: %s", self.run_id, self.result.counts())
        return self.result

    def _moves(self, plan: Plan, *, to_archive: bool) -> None:
        """A split store's moves one way, audited by the mover (its last ``move_done``
        committed before this returns)."""
        if self.mover is None or not plan.moves:
            return
        try:
            self.mover.move_targets(plan.moves, to_archive=to_archive)
            self.mover.finish()
        finally:
            self.result.moves = self.mover.moved
            self.result.audit_head = self.mover.audit_head or self.result.audit_head

    def write_groups(
        self,
        groups: Iterable[tuple[str | None, list[str | int], Mapping[str, Any], str]],
    ) -> None:
        """Set ``payload`` on the given points of each (doc_id, point ids, payload, reason)
        group (rollback): each point is re-read by id, written only if it differs, and audited
        with its exact value before."""
        batch: list[WriteGroup] = []
        size = 0
        for doc_id, ids, payload, reason in groups:
            partial = set(payload) != set(MANAGED_KEYS)
            target = PayloadTarget(doc_id, None, payload, len(ids), (reason,), partial=partial)
            expected = expected_of(target)
            for start in range(0, len(ids), max(self.batch_points, 1)):
                variants: dict[Any, WriteGroup] = {}
                for state in self.index.retrieve(ids[start : start + self.batch_points]):
                    differs = still_differs(state.payload, target, expected)
                    if differs is None:
                        continue
                    before, key = differs
                    group = variants.setdefault(key, WriteGroup(target, before))
                    group.point_ids.append(state.point_id)
                    size += 1
                batch += variants.values()
                if size >= self.batch_points:
                    self._flush(batch)
                    batch, size = [], 0
        if batch:
            self._flush(batch)
        self.confirm()

    def confirm(self) -> None:
        """Commit the confirmation of the last batch sent (the others are confirmed by the
        entries committed with the batch after them); never for a batch in doubt."""
        if self.intents.open is not None and not self.in_doubt:
            self._audit([self._confirmation()])

    @property
    def pending_intent(self) -> str | None:
        """The last intent not confirmed (a batch in doubt, or one not yet confirmed; or a
        move not yet copied and deleted)."""
        if self.mover is not None and self.mover.open_intent is not None:
            return self.mover.open_intent
        return self.intents.open

    def _confirmation(self, written: list[str | int] | None = None) -> AuditEntry:
        """ "Every intent of this run up to ``through`` was written" (or only ``written``)."""
        points, self._unconfirmed_points = self._unconfirmed_points, 0
        if written is not None:
            return self.intents.confirmation(points=len(written), written=written)
        return self.intents.confirmation(points=points)

    # -- payloads --------------------------------------------------------------------------

    def _payloads(self, targets: Sequence[PayloadTarget], *, located: Located | None) -> None:
        """Write each target's differing points: by the ids the scan kept where they are all
        that can differ, else through the doc_id filter (else, for chunks without a doc_id
        whose ids were not kept, one more scroll)."""
        by_id: list[tuple[Differs, Scanned]] = []
        by_filter: list[PayloadTarget] = []
        by_scroll: list[PayloadTarget] = []
        for target in targets:
            compare = Differs(target)  # (the target normalised once, here)
            scanned = self._kept_ids(compare, located)
            if scanned is not None:
                by_id.append((compare, scanned))
            elif target.doc_id is not None:
                by_filter.append(target)
            else:
                by_scroll.append(target)
        self._write_by_id(by_id)
        step = max(self.scroll_batch, 1)
        for start in range(0, len(by_filter), step):
            part = by_filter[start : start + step]
            self._write_scrolled(part, [t.doc_id for t in part if t.doc_id])
        if by_scroll:
            self._write_scrolled(by_scroll, None)

    @staticmethod
    def _kept_ids(compare: Differs, located: Located | None) -> Scanned | None:
        """The ids that are all the target can need written, with the values the scan read
        there, if the scan kept them."""
        if located is None:
            return None
        target = compare.target
        scanned = located.scanned(target.doc_id)
        if scanned is None:
            return None
        if target.partial or located.holds(target.doc_id, compare.values):
            # The row stays: chunks that matched it carry the payload already. (A partial
            # target is an orphan's: no row, so every chunk of it was kept.)
            return scanned
        expected = compare.expected  # (spelt otherwise than the scan's row? then normalised)
        if expected is not None and located.matches(target.doc_id, expected):
            return scanned
        return None  # the row changes: chunks that matched the old row need it too

    def _write_by_id(self, targets: list[tuple[Differs, Scanned]]) -> None:
        """Write the kept ids, document by document, judged on the values the scan read
        there (no re-read: docs/engine.md, "Why no re-read"), in batches of whole documents
        of about ``batch_points`` points."""
        pending: list[WriteGroup] = []
        size = done = 0
        for compare, (ids, scanned) in targets:
            # The scan kept one values tuple for the chunks that spell them alike: a group
            # is found by that tuple's identity, judged once (``None``: nothing to write).
            groups: dict[int, WriteGroup | None] = {}
            for pid, values in zip(ids, scanned, strict=True):
                group = groups.get(id(values), _UNSEEN)
                if group is _UNSEEN:
                    group = groups[id(values)] = compare.group(values)
                if group is not None:  # (None: an orphan's chunk holding what is written)
                    group.point_ids.append(pid)
                    size += 1
            pending += [g for g in groups.values() if g is not None and g.point_ids]
            if size >= self.batch_points:
                done += size
                self._flush(pending)
                if self.progress is not None:
                    self.progress(done)
                pending, size = [], 0
        if pending:
            self._flush(pending)

    def _write_scrolled(self, targets: list[PayloadTarget], doc_ids: list[str] | None) -> None:
        """Scroll the targets' points (``doc_ids``: through the doc_id filter; ``None``: the
        whole collection) and write each document's differing points, grouped per document.

        Points come in id order, not document order, so groups are held until a document's
        expected count is reached (then they are *ready*); ready groups go out in batches of
        ``batch_points``. Held points are capped at ``max_pending`` to bound memory.
        """
        by_doc = {t.doc_id: t for t in targets}
        compare_by_doc = {t.doc_id: Differs(t) for t in targets}
        remaining = {t.doc_id: t.points for t in targets}
        held: dict[str | None, dict[Any, WriteGroup]] = {}
        held_size = 0
        ready: list[WriteGroup] = []
        ready_size = 0
        scanned = 0
        for chunk in self.index.scroll(batch_size=self.scroll_batch, doc_ids=doc_ids):
            scanned += 1
            if self.progress is not None and scanned % self.scroll_batch == 0:
                self.progress(scanned)
            target = by_doc.get(chunk.doc_id)
            if target is None:
                continue
            differs = compare_by_doc[chunk.doc_id](chunk.payload)
            if differs is None:
                continue
            before, key, keys = differs
            groups = held.setdefault(chunk.doc_id, {})
            group = groups.get(key)
            if group is None:
                group = groups[key] = WriteGroup(target=target, before=before)
            group.add(chunk.point_id, keys)
            held_size += 1
            remaining[chunk.doc_id] -= 1
            if remaining[chunk.doc_id] <= 0:  # all of this document's points are here
                done = list(held.pop(chunk.doc_id).values())
                size = sum(len(g.point_ids) for g in done)
                held_size -= size
                ready += done
                ready_size += size
            if ready_size >= self.batch_points:
                self._flush(ready)
                ready, ready_size = [], 0
            if held_size >= self.max_pending:
                self._flush([g for groups in held.values() for g in groups.values()])
                held, held_size = {}, 0
        rest = ready + [g for groups in held.values() for g in groups.values()]
        for start in range(0, len(rest), max(self.batch_points, 1)):
            self._flush(rest[start : start + self.batch_points])

    def _flush(self, groups: list[WriteGroup]) -> None:
        if not groups:
            return
        if self.keep_writing is not None:
            try:
                self.keep_writing()
            except Exception:
                with contextlib.suppress(Exception):
                    self.confirm()  # the batch before was written: say so, then stop
                raise
        # (each group sends only the keys some point of it does not hold: the same points
        # after, fewer payload index updates; the intent records the whole target payload)
        writes = [
            PayloadWrite(point_ids=tuple(g.point_ids), payload=g.payload(), doc_id=g.target.doc_id)
            for g in groups
        ]
        # The intents (and the confirmation of the batch before) go first, in one commit.
        intents = [page_entry(self._entries(groups))]  # (one entry the page: docs/auditing.md)
        previous = [self._confirmation()] if self.intents.open is not None else []
        self.intents.intend(intents, closing=previous)
        self._unconfirmed_points = sum(len(g.point_ids) for g in groups)
        try:
            # One call for the whole batch: it holds whole documents, so a document is never
            # split across calls (unless it alone is larger than ``batch_points``, when the
            # batch is that one document).
            self.index.set_payloads(
                writes, batch_size=max(self.batch_points, self._unconfirmed_points, 1)
            )
        except IndexWriteError as exc:
            self.result.error = str(exc)
            try:
                done = self._written(groups)
            except Exception as again:  # the index is gone too: which points, nobody knows
                self.in_doubt = True
                raise IndexWriteError(
                    f"payload write failed in run {self.run_id}: {exc}; the points of that "
                    f"batch could not be re-read ({again}): the next run resolves them",
                    points_written=self.result.points,
                ) from exc
            written = [pid for g in done for pid in g.point_ids]
            self._audit([self._confirmation([jsonable(p) for p in written])])
            self.result.payload_writes += len(done)
            self.result.points += len(written)
            raise IndexWriteError(
                f"payload write failed in run {self.run_id}: {exc}",
                points_written=self.result.points,
            ) from exc
        except Exception:
            self.in_doubt = True  # sent, perhaps written: the next run re-reads them
            raise
        self.result.payload_writes += len(groups)
        self.result.points += sum(len(g.point_ids) for g in groups)

    def _written(self, groups: list[WriteGroup]) -> list[WriteGroup]:
        """After a failed batch: which points now carry the target payload (re-read by id)."""
        confirmed = []
        for group in groups:
            states = {s.point_id: s for s in self.index.retrieve(group.point_ids)}
            written = [
                pid
                for pid in group.point_ids
                if pid in states and not needs_write(states[pid].payload, group.target)
            ]
            if written:
                confirmed.append(WriteGroup(group.target, group.before, written))
        return confirmed

    def _entries(self, groups: list[WriteGroup]) -> list[AuditEntry]:
        now = self.clock.now()
        return [
            AuditEntry(
                run_id=self.run_id,
                at=now,
                actor=self.actor,
                reason=", ".join(g.target.reasons),
                target_type=AuditKind.PAYLOAD,
                target=g.target.doc_id or "(no doc_id)",
                before={"points": [jsonable(p) for p in g.point_ids], "payload": g.before},
                after={"payload": dict(g.target.payload)},
            )
            for g in groups
        ]

    def _audit(self, entries: list[AuditEntry]) -> None:
        self._audited(entries)

    def _audited(self, entries: list[AuditEntry]) -> str:
        """Append ``entries`` in one commit; the run's audit head after them."""
        head = self.table.append_audit(entries)
        if head:
            self.result.audit_head = head
        return self.result.audit_head
