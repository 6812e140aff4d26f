"""Runs whose process died: found by the next runner that takes their lease, resolved, marked.

A writing run holds its shard's lease for its whole life, so when another runner holds that
lease, a run of the shard still recorded as ``running`` is dead (killed, out of memory, the
machine lost). Its table writes were atomic with their audit entries; its payload batches
were audited as intents before they were sent (``applying``). Resolution re-reads the points
of its unconfirmed intents, records which of them carry the new payload (a ``resolve`` audit
entry), and marks the run ``interrupted`` (a failed run for metrics and alerts). Rollback of
an interrupted run then restores exactly the points that were written.

A split store's moves (``moving``) left without their ``move_done`` are finished: what the
collection they leave still holds is copied again, read back and deleted there, so every
point ends in exactly one collection, with its vectors as they were.

An ingestion (``reconciler.ingesting``) audits an intent before each document's writes: its
unconfirmed intents are resolved by reading the document's points back by id; a document
whose chunks are not all there with its text is queued for re-ingestion (the outbox), so the
next ingestion finishes it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.model import MANAGED_KEYS, AuditEntry, AuditKind, RunStatus, jsonable
from reconciler.payload import chunk_id_for, point_id_for
from reconciler.planning import PayloadTarget, needs_write
from reconciler.ports import ChunkIndex, DocumentTable, split_of
from reconciler.ports.index import StoredPoint
from reconciler.writing.applying import Applier
from reconciler.writing.approving import finish_authorized_plans
from reconciler.writing.executing import execute
from reconciler.writing.moving import copy_into, unfinished
from reconciler.writing.rekeying import Rekeying

log = logging.getLogger(__name__)

INTERRUPTED = RunStatus.INTERRUPTED
#: The re-ingest reason of a document an interrupted ingestion left incomplete.
INTERRUPTED_INGEST = "interrupted_ingest"


@dataclass(frozen=True)
class Resolved:
    """One interrupted run, resolved."""

    run_id: str
    written: int
    not_written: int


def unconfirmed(
    entries: list[AuditEntry], hashes: list[str], kind: str = AuditKind.PAYLOAD
) -> list[AuditEntry]:
    """The intents (payload intents, or ``kind``) of one run after its last confirmation, in
    order.

    ``hashes`` are the entries' own hashes, in the same order.
    """
    confirmed_through = None
    for entry in entries:
        if entry.target_type == AuditKind.CONFIRM and isinstance(entry.after, dict):
            confirmed_through = entry.after.get("through")
    if confirmed_through is None:
        return [e for e in entries if e.target_type == kind]
    # (the last entry of that hash: a page of intents is one entry a document, one hash)
    last = {entry_hash: at for at, entry_hash in enumerate(hashes)}
    position = last.get(confirmed_through, -1)
    return [e for e in entries[position + 1 :] if e.target_type == kind]


@dataclass(frozen=True)
class MoveToFinish:
    """One ``move`` intent a dead run left without its ``move_done``: the collection it
    leaves and the one it goes to, the points the first still holds (to copy again and delete
    there), and how many of the others are in the destination already."""

    source: str
    dest: str
    held: tuple[StoredPoint, ...]
    moved: int
    missing: int


@dataclass(frozen=True)
class ResolutionPlan:
    """How one dead run's writes ended, read from the stores; ``apply_resolution`` records it
    (and finishes its moves, queues its incomplete documents)."""

    run_id: str
    status: str
    head: str
    written: tuple[Any, ...] = ()
    missed: tuple[Any, ...] = ()
    complete: tuple[str, ...] = ()
    #: The intents of the documents to queue for re-ingestion.
    requeue: tuple[AuditEntry, ...] = ()
    moves: tuple[MoveToFinish, ...] = ()
    #: A re-keying's intents left unconfirmed, each with its hash: finished from them
    #: (``Rekeying.audited``, executed by the same applier).
    rekeys: tuple[tuple[AuditEntry, str], ...] = ()

    @property
    def move_counts(self) -> dict[str, int]:
        """Points ``finished`` by the resolution, ``moved`` before, ``missing`` in both."""
        return {
            "finished": sum(len(m.held) for m in self.moves),
            "moved": sum(m.moved for m in self.moves),
            "missing": sum(m.missing for m in self.moves),
        }

    def execute(self, applier: Applier) -> None:
        """Finish the run's re-keyings, then record how its writes ended
        (``apply_resolution``), as ``applier.actor``."""
        for intent, through in self.rekeys:
            Rekeying.audited(intent, through).execute(applier)
        apply_resolution(
            applier.table,
            applier.index,
            self,
            actor=applier.actor,
            head=applier.result.audit_head or self.head,
        )

    @property
    def outcome(self) -> str:
        """What the run log says of how the run's writes ended."""
        see = f"(see `reconciler audit show --run {self.run_id}`)"
        if self.rekeys:
            pairs = sum(len(intent.after["pairs"]) for intent, _hash in self.rekeys)
            return f"its re-keying of {pairs} document(s) was finished now {see}"
        if self.complete or self.requeue:
            return (
                f"of the documents it was writing {len(self.complete)} were complete and "
                f"{len(self.requeue)} were queued for re-ingestion {see}"
            )
        moves = self.move_counts
        if any(moves.values()):
            return (
                f"of the points it was moving {moves['finished']} were moved now, "
                f"{moves['moved']} had been and {moves['missing']} were in neither collection "
                f"{see}"
            )
        return (
            f"of its last payload batch {len(self.written)} point(s) were written and "
            f"{len(self.missed)} were not {see}"
        )


def resolve_interrupted(
    *,
    table: DocumentTable,
    index: ChunkIndex,
    shard: str,
    actor: str = "recovery",
    undoing: str | None = None,
) -> list[Resolved]:
    """Resolve every run of ``shard`` still recorded as running (the caller holds the shard's
    lease, so none of them is alive: they are marked ``interrupted``), and every failed run
    that left a payload batch unconfirmed (it stays ``failed``); then finish the plan of every
    forced or approved run of the shard that is no longer running, under the same
    authorization (``approving.finish_authorized_plans``), but that of the run ``undoing``
    (a rollback's: what it undoes is not finished first)."""
    done = []
    for plan in plan_resolutions(table=table, index=index, shard=shard):
        execute(plan, Applier(table=table, index=index, run_id=plan.run_id, actor=actor))
        log.warning(
            "run %s of shard %s resolved (%s): %s", plan.run_id, shard, plan.status, plan.outcome
        )
        done.append(Resolved(plan.run_id, len(plan.written), len(plan.missed)))
    # (then a dead forced or approved run's plan is finished under the same authorization)
    finish_authorized_plans(table, index, shard=shard, actor=actor, undoing=undoing)
    return done


def plan_resolutions(
    *, table: DocumentTable, index: ChunkIndex, shard: str
) -> list[ResolutionPlan]:
    """How each run of ``shard`` to resolve ended (reads only)."""
    return [
        plan_resolution(table=table, index=index, run_id=run_id, status=status)
        for run_id, status in table.runs_to_resolve(shard=shard)
    ]


def plan_resolution(
    *, table: DocumentTable, index: ChunkIndex, run_id: str, status: str
) -> ResolutionPlan:
    """How one dead run's writes ended: which points of its unconfirmed payload intents carry
    the new payload, which documents of its ingestion are whole, which moves are left."""
    entries, hashes = table.run_entries_with_hashes(run_id)
    written: list[Any] = []
    missed: list[Any] = []
    for intent in unconfirmed(entries, hashes):
        payload = dict(intent.after["payload"])
        partial = set(payload) != set(MANAGED_KEYS)  # orphans: the quarantine keys only
        target = PayloadTarget(intent.target, None, payload, 0, ("resolve",), partial)
        ids = list(intent.before["points"])
        current = {state.point_id: state for state in index.retrieve(ids)}
        for pid in ids:
            key = _point_id(pid, current)
            if key is not None and not needs_write(current[key].payload, target):
                written.append(pid)
            else:
                missed.append(pid)
    complete, requeue = _ingest_ended(table, index, unconfirmed(entries, hashes, AuditKind.INGEST))
    return ResolutionPlan(
        run_id=run_id,
        status=status,
        head=hashes[-1] if hashes else "",
        written=tuple(written),
        missed=tuple(missed),
        complete=tuple(complete),
        requeue=tuple(requeue),
        moves=tuple(_moves_left(index, list(unfinished(entries, hashes)))),
        rekeys=tuple(
            (intent, hashes[entries.index(intent)])
            for intent in unconfirmed(entries, hashes, AuditKind.REKEY)
        ),
    )


def apply_resolution(
    table: DocumentTable,
    index: ChunkIndex,
    plan: ResolutionPlan,
    *,
    actor: str = "recovery",
    head: str | None = None,
) -> None:
    """Record how a dead run's writes ended: its incomplete documents queued, its moves
    finished, a ``move_resolve`` / ``resolve`` entry each, the run marked (``interrupted``
    when it was still recorded as running; ``head``: the audit head after what was written
    for it, its re-keyings finished, when not ``plan.head``)."""
    run_id, head = plan.run_id, head or plan.head
    for intent in plan.requeue:
        after = intent.after
        table.request_reingest(
            doc_id=intent.target,
            source=after["source"],
            source_key=after["source_key"],
            reason=INTERRUPTED_INGEST,
            run_id=run_id,
        )
    _finish_moves(index, plan.moves)
    moves = plan.move_counts
    if any(moves.values()):
        head = _resolution(
            table,
            run_id,
            actor,
            "the run stopped while moving points between collections",
            moves,
            kind=AuditKind.MOVE_RESOLVE,
        )
    if plan.complete or plan.requeue:
        head = _resolution(
            table,
            run_id,
            actor,
            "the ingestion stopped while writing documents",
            {"complete": list(plan.complete), "requeued": [i.target for i in plan.requeue]},
        )
    if plan.written or plan.missed:
        head = _resolution(
            table,
            run_id,
            actor,
            "the run stopped during a payload batch",
            {"written": jsonable(list(plan.written)), "not_written": jsonable(list(plan.missed))},
        )
    if plan.status == RunStatus.RUNNING:
        table.finish_run(
            run_id,
            status=INTERRUPTED,
            counts={"audit_head": head} if head else {},
            error="its process stopped before the run ended (killed, or the machine was "
            f"lost); {plan.outcome}",
        )
    else:
        run = table.get_run(run_id)
        recorded = dict(run.counts or {}) if run is not None else {}
        counts = {k: v for k, v in recorded.items() if k != "unconfirmed"}
        table.set_run_counts(run_id, {**counts, "audit_head": head, "resolved": plan.outcome})


def _resolution(
    table: DocumentTable,
    run_id: str,
    actor: str,
    reason: str,
    after: dict[str, Any],
    *,
    kind: str = AuditKind.RESOLVE,
) -> str:
    """Append the entry (``resolve``, or a split store's ``move_resolve``) that says how a
    dead run's writes ended; its hash."""
    entry = AuditEntry(run_id, datetime.now(UTC), actor, reason, kind, run_id, None, after)
    return table.append_audit([entry])


def _moves_left(index: ChunkIndex, intents: list[AuditEntry]) -> list[MoveToFinish]:
    """A split store's moves that have no ``move_done``: what the collection each leaves
    still holds, and how many of its other points are in the destination (or in neither)."""
    split = split_of(index)
    if not intents:
        return []
    if split is None:
        log.warning(
            "%d move(s) between the collections of a split store were left unfinished, and "
            "index.archive_collection is not set: set it back to finish them",
            len(intents),
        )
        return []
    main, archive = split.collections
    parts = {main: split.main, archive: split.archive}
    left = []
    for intent in intents:
        leaves, goes = intent.before.get("from"), intent.after.get("to")
        source, dest = parts.get(leaves), parts.get(goes)
        if source is None or dest is None:
            log.warning(
                "a move from %s to %s names another collection", intent.before, intent.after
            )
            continue
        ids = list(intent.before["points"])
        held = source.read_points(ids) if source.exists() else []
        gone = {str(p.point_id) for p in held}
        rest = [i for i in ids if str(i) not in gone]
        there = len(dest.retrieve(rest)) if rest and dest.exists() else 0
        left.append(
            MoveToFinish(str(leaves), str(goes), tuple(held), there, len(ids) - len(held) - there)
        )
    return left


def _finish_moves(index: ChunkIndex, moves: Sequence[MoveToFinish]) -> None:
    """Copy what each move's source still held again, read it back, delete it there."""
    split = split_of(index)
    if split is None or not moves:
        return
    main, archive = split.collections
    parts = {main: split.main, archive: split.archive}
    for move in moves:
        if move.held:
            copy_into(split, parts[move.dest], move.held)
            parts[move.source].delete_points([p.point_id for p in move.held])


def _ingest_ended(
    table: DocumentTable, index: ChunkIndex, intents: list[AuditEntry]
) -> tuple[list[str], list[AuditEntry]]:
    """An ingestion's unconfirmed intents: which documents were written whole (every chunk
    there, with the text the intent names), and the intents of those to queue for
    re-ingestion. A document whose row was never written is left to the next ingestion,
    which sees it as new."""
    complete: list[str] = []
    requeue: list[AuditEntry] = []
    if not intents:
        return complete, requeue
    rows = table.get_documents({intent.target for intent in intents})
    exists = index.exists()  # (killed before its first chunk: no collection yet)
    for intent in intents:
        doc_id, after = intent.target, intent.after
        if doc_id in complete or doc_id in {i.target for i in requeue}:
            continue
        ids = [point_id_for(chunk_id_for(doc_id, n)) for n in range(int(after["chunks"]))]
        found = index.retrieve(ids) if exists and ids else []
        whole = len(found) == len(ids) and all(
            state.payload.get("content_hash") == after["source_hash"] for state in found
        )
        row = rows.get(doc_id)
        if whole and row is not None and row.source_hash == after["source_hash"]:
            complete.append(doc_id)
        elif row is not None:
            requeue.append(intent)
    return complete, requeue


def _point_id(pid: Any, current: dict[Any, Any]) -> Any:
    """The id as the index returns it (audit entries store ids as JSON: str or int)."""
    if pid in current:
        return pid
    text = str(pid)
    return next((k for k in current if str(k) == text), None)
