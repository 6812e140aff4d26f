"""Applies a plan: row updates, payload writes, indexes — each audited.

Order: table changes (rows, re-ingest requests, their audit entries) in one transaction; then
payloads in batches of point ids through ``batch_update_points``; then payload indexes.

Which points: those the check's scan already saw, re-read by id where it kept them, else
through the ``doc_id`` filter, else by one more scroll (``selecting``). Each payload batch
holds whole documents and goes out as one ``batch_update_points`` call, its audit entries as
one append.

A re-keying (``rekeying``) writes through two primitives of its own: ``rename_rows`` (rows
given new ids in one audited table transaction) and ``write_covered`` (payload batches its
one intent covers).

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
import gc
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import IndexWriteError
from reconciler.model import (
    MANAGED_KEYS,
    PAGE_TARGET,
    AuditEntry,
    AuditKind,
    PayloadWrite,
    RowChange,
    jsonable,
)
from reconciler.planning import PayloadTarget, Plan, needs_write
from reconciler.ports import ChunkIndex, DocumentTable, split_of
from reconciler.ports.table import DocumentRename
from reconciler.writing.differs import Located, WriteGroup, expected_of, still_differs
from reconciler.writing.intents import IntentLog
from reconciler.writing.moving import Mover
from reconciler.writing.selecting import Selector

log = logging.getLogger(__name__)


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


@contextlib.contextmanager
def set_aside() -> Iterator[None]:
    """While a plan is applied, what was alive before it (the check's scan and state, the
    modules) is set aside from the cyclic collector (``gc.freeze``) and handed back after
    (``gc.unfreeze``: to the oldest generation), so a full collection that the writes' own
    survivors trigger walks what the repair allocated, not the whole heap: such a collection
    took 70-130 ms at 20k and 100k chunks, 3.5-12 µs a point written, and round 9's 20,000
    UUIDs kept from the scan made one land in the repair at 100k (issue 38, repair round 8).
    Young and middle collections run as before; a cycle that dies meanwhile is collected
    after. When something is frozen already (a caller's ``bulk_work``, a server that froze
    before it forked) nothing is done: the caller's freeze stays as it was, and nothing of
    the repair's is left frozen under it."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


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
        without it every document's points are selected through the doc_id filter. What was
        alive before is set aside from the collector meanwhile (``set_aside``)."""
        with set_aside():
            return self._apply(plan, located)

    def _apply(self, plan: Plan, located: Located | None) -> ApplyResult:
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
                Selector(
                    self.index,
                    flush=self._flush,
                    batch_points=self.batch_points,
                    scroll_batch=self.scroll_batch,
                    max_pending=self.max_pending,
                    progress=self.progress,
                ).write(plan.payload_targets, located=located)
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

    def rename_rows(self, renames: Sequence[DocumentRename]) -> None:
        """Give documents their new ids in ONE table transaction, the lease checked first
        (``DocumentTable.rekey_documents``: each row, its identity, the ``superseded_by``
        links, pending requests and declarations that name it, one ``rekey_row`` entry each;
        a rename done before is skipped)."""
        if self.keep_writing is not None:
            self.keep_writing()
        head = self.table.rekey_documents(
            run_id=self.run_id, actor=self.actor, at=self.clock.now(), renames=renames
        )
        self.result.rows += len(renames)
        self.result.audit_head = head or self.result.audit_head

    def write_covered(self, writes: Sequence[PayloadWrite]) -> None:
        """Send ``writes`` as one batch covered by the intent open in ``intents`` (one that
        names every point it writes, as a re-keying's does) rather than by intents of their
        own, the lease checked first; ``confirm`` closes it."""
        if self.keep_writing is not None:
            self.keep_writing()
        points = self.index.set_payloads(writes, batch_size=max(self.batch_points, len(writes)))
        self._unconfirmed_points += points
        self.result.payload_writes += len(writes)
        self.result.points += points

    def confirm(self, **after: Any) -> None:
        """Commit the confirmation of the last batch sent (the others are confirmed by the
        entries committed with the batch after them; ``after``: what else it says); never
        for a batch in doubt."""
        if self.intents.open is not None and not self.in_doubt:
            self._audit([self._confirmation(**after)])

    @property
    def pending_intent(self) -> str | None:
        """The last intent not confirmed (a batch in doubt, or one not yet confirmed; or a
        move not yet copied and deleted)."""
        if self.mover is not None and self.mover.open_intent is not None:
            return self.mover.open_intent
        return self.intents.open

    def _confirmation(self, written: list[str | int] | None = None, **after: Any) -> AuditEntry:
        """ "Every intent of this run up to ``through`` was written" (or only ``written``)."""
        points, self._unconfirmed_points = self._unconfirmed_points, 0
        if written is not None:
            return self.intents.confirmation(points=len(written), written=written)
        return self.intents.confirmation(**after, points=points)

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
        intents = [self._page(groups)]  # (one entry the page: docs/auditing.md)
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

    def _page(self, groups: list[WriteGroup]) -> AuditEntry:
        """The batch's intents, one a group, as one page (``page_entry`` of them: each
        document's target, reason, points and payload before, and its payload after), made
        at once rather than an entry a group first."""
        kind = AuditKind.PAYLOAD_PAGE
        return AuditEntry(
            run_id=self.run_id,
            at=self.clock.now(),
            actor=self.actor,
            reason=str(kind),
            target_type=kind,
            target=PAGE_TARGET,
            before={
                "documents": [
                    {
                        "target": g.target.doc_id or "(no doc_id)",
                        "reason": ", ".join(g.target.reasons),
                        "points": list(g.point_ids),
                        "payload": g.before,
                    }
                    for g in groups
                ]
            },
            after={"payloads": [dict(g.target.payload) for g in groups]},
        )

    def _audit(self, entries: list[AuditEntry]) -> None:
        self._audited(entries)

    def _audited(self, entries: list[AuditEntry]) -> str:
        """Append ``entries`` in one commit; the run's audit head after them."""
        head = self.table.append_audit(entries)
        if head:
            self.result.audit_head = head
        return self.result.audit_head
