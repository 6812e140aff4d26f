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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.model import MANAGED_KEYS, AuditEntry, AuditKind, RunStatus, jsonable
from reconciler.payload import chunk_id_for, point_id_for
from reconciler.planning import PayloadTarget, needs_write
from reconciler.ports import ChunkIndex, DocumentTable, split_of
from reconciler.writing.applying import CONFIRM, INTENT
from reconciler.writing.dry import is_dry
from reconciler.writing.moving import MOVE_RESOLVE, copy_into, unfinished

log = logging.getLogger(__name__)

#: The audit entry type that records how an interrupted run's last batch ended.
RESOLVE = AuditKind.RESOLVE
INTERRUPTED = RunStatus.INTERRUPTED
#: The audit entry type of an ingestion's intent to (re-)write one document.
INGEST_INTENT = AuditKind.INGEST
#: The re-ingest reason of a document an interrupted ingestion left incomplete.
INTERRUPTED_INGEST = "interrupted_ingest"


@dataclass(frozen=True)
class Resolved:
    """One interrupted run, resolved."""

    run_id: str
    written: int
    not_written: int


def unconfirmed(
    entries: list[AuditEntry], hashes: list[str], kind: str = INTENT
) -> list[AuditEntry]:
    """The intents (payload intents, or ``kind``) of one run after its last confirmation, in
    order.

    ``hashes`` are the entries' own hashes, in the same order.
    """
    confirmed_through = None
    for entry in entries:
        if entry.target_type == CONFIRM and isinstance(entry.after, dict):
            confirmed_through = entry.after.get("through")
    if confirmed_through is None:
        return [e for e in entries if e.target_type == kind]
    position = hashes.index(confirmed_through) if confirmed_through in hashes else -1
    return [e for e in entries[position + 1 :] if e.target_type == kind]


def resolve_interrupted(
    *, table: DocumentTable, index: ChunkIndex, shard: str, actor: str = "recovery"
) -> list[Resolved]:
    """Resolve every run of ``shard`` still recorded as running (the caller holds the shard's
    lease, so none of them is alive: they are marked ``interrupted``), and every failed run
    that left a payload batch unconfirmed (it stays ``failed``)."""
    done = []
    for run_id, status in table.runs_to_resolve(shard=shard):
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
        complete, requeued = _resolve_ingest(
            table, index, run_id, unconfirmed(entries, hashes, INGEST_INTENT)
        )
        moves = _finish_moves(index, list(unfinished(entries, hashes)))
        head = hashes[-1] if hashes else ""
        if any(moves.values()):
            head = _resolution(
                table,
                run_id,
                actor,
                "the run stopped while moving points between collections",
                moves,
                kind=MOVE_RESOLVE,
            )
        if complete or requeued:
            head = _resolution(
                table,
                run_id,
                actor,
                "the ingestion stopped while writing documents",
                {"complete": complete, "requeued": requeued},
            )
        if written or missed:
            head = _resolution(
                table,
                run_id,
                actor,
                "the run stopped during a payload batch",
                {"written": jsonable(written), "not_written": jsonable(missed)},
            )
        outcome = (
            f"of its last payload batch {len(written)} point(s) were written and "
            f"{len(missed)} were not (see `reconciler audit show --run {run_id}`)"
        )
        if any(moves.values()):
            outcome = (
                f"of the points it was moving {moves['finished']} were moved now, "
                f"{moves['moved']} had been and {moves['missing']} were in neither collection "
                f"(see `reconciler audit show --run {run_id}`)"
            )
        if complete or requeued:
            outcome = (
                f"of the documents it was writing {len(complete)} were complete and "
                f"{len(requeued)} were queued for re-ingestion (see `reconciler audit show "
                f"--run {run_id}`)"
            )
        if status == RunStatus.RUNNING:
            table.finish_run(
                run_id,
                status=INTERRUPTED,
                counts={"audit_head": head} if head else {},
                error="its process stopped before the run ended (killed, or the machine was "
                f"lost); {outcome}",
            )
        else:
            run = table.get_run(run_id)
            recorded = dict(run.counts or {}) if run is not None else {}
            counts = {k: v for k, v in recorded.items() if k != "unconfirmed"}
            table.set_run_counts(run_id, {**counts, "audit_head": head, "resolved": outcome})
        if is_dry(table):
            log.info("dry run: run %s of shard %s would be resolved (%s)", run_id, shard, status)
        else:
            log.warning("run %s of shard %s resolved (%s): %s", run_id, shard, status, outcome)
        done.append(Resolved(run_id, len(written), len(missed)))
    return done


def _resolution(
    table: DocumentTable,
    run_id: str,
    actor: str,
    reason: str,
    after: dict[str, Any],
    *,
    kind: str = RESOLVE,
) -> str:
    """Append the entry (``resolve``, or a split store's ``move_resolve``) that says how a
    dead run's writes ended; its hash."""
    entry = AuditEntry(run_id, datetime.now(UTC), actor, reason, kind, run_id, None, after)
    return table.append_audit([entry])


def _finish_moves(index: ChunkIndex, intents: list[AuditEntry]) -> dict[str, int]:
    """Finish a split store's moves that have no ``move_done``: copy what the collection they
    leave still holds again, read it back, delete it there. Counts the points ``finished``
    now, ``moved`` before (in the destination only) and ``missing`` (in neither)."""
    counts = {"finished": 0, "moved": 0, "missing": 0}
    split = split_of(index)
    if not intents:
        return counts
    if split is None:
        log.warning(
            "%d move(s) between the collections of a split store were left unfinished, and "
            "index.archive_collection is not set: set it back to finish them",
            len(intents),
        )
        return counts
    main, archive = split.collections
    parts = {main: split.main, archive: split.archive}
    for intent in intents:
        source, dest = parts.get(intent.before.get("from")), parts.get(intent.after.get("to"))
        if source is None or dest is None:
            log.warning(
                "a move from %s to %s names another collection", intent.before, intent.after
            )
            continue
        ids = list(intent.before["points"])
        held = source.read_points(ids) if source.exists() else []
        if held:
            copy_into(split, dest, held)
            source.delete_points([p.point_id for p in held])
        gone = {str(p.point_id) for p in held}
        rest = [i for i in ids if str(i) not in gone]
        there = len(dest.retrieve(rest)) if rest and dest.exists() else 0
        counts["finished"] += len(held)
        counts["moved"] += there
        counts["missing"] += len(ids) - len(held) - there
    return counts


def _resolve_ingest(
    table: DocumentTable, index: ChunkIndex, run_id: str, intents: list[AuditEntry]
) -> tuple[list[str], list[str]]:
    """An ingestion's unconfirmed intents: which documents were written whole (every chunk
    there, with the text the intent names), and which were queued for re-ingestion. A
    document whose row was never written is left to the next ingestion, which sees it as
    new."""
    complete: list[str] = []
    requeued: list[str] = []
    if not intents:
        return complete, requeued
    rows = table.get_documents({intent.target for intent in intents})
    exists = index.exists()  # (killed before its first chunk: no collection yet)
    for intent in intents:
        doc_id, after = intent.target, intent.after
        if doc_id in complete or doc_id in requeued:
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
            table.request_reingest(
                doc_id=doc_id,
                source=after["source"],
                source_key=after["source_key"],
                reason=INTERRUPTED_INGEST,
                run_id=run_id,
            )
            requeued.append(doc_id)
    return complete, requeued


def _point_id(pid: Any, current: dict[Any, Any]) -> Any:
    """The id as the index returns it (audit entries store ids as JSON: str or int)."""
    if pid in current:
        return pid
    text = str(pid)
    return next((k for k in current if str(k) == text), None)
