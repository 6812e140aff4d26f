"""The audit trail read by run and by target: ``audit show``, the runs that touched documents
after a run (rollback's later-runs check), one run's entries (rollback and recovery), and a
run's documents page by page with their entries (a rollback's pages: ``run_documents``,
``run_entries_of``, memory flat however many documents the run wrote).

A page of payload intents is read as its documents' intents, under the page's seq and hash
(``audit_pages.parts``); the chain itself is walked and verified in ``audit``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from sqlalchemy import Engine, func, select, union
from sqlalchemy.orm import Session

from reconciler.model import AuditEntry, AuditKind, rfc3339
from reconciler.stores.sql.audit_body import DOCUMENTS
from reconciler.stores.sql.audit_pages import PAGE, about, parts
from reconciler.stores.sql.schema import AuditRow


def entry_of(row: AuditRow) -> AuditEntry:
    """The entry a row of the log holds (a page: one entry, split by ``parts``)."""
    return AuditEntry(
        run_id=row.run_id,
        at=row.at,
        actor=row.actor,
        reason=row.reason,
        target_type=row.target_type,
        target=row.target,
        before=row.before,
        after=row.after,
    )


def show(
    engine: Engine, *, run_id: str | None = None, target: str | None = None, limit: int = 1000
) -> Iterator[dict[str, Any]]:
    """Audit entries, oldest first, optionally for one run or one target (doc id)."""
    stmt = select(AuditRow).order_by(AuditRow.seq)
    if run_id is not None:
        stmt = stmt.where(AuditRow.run_id == run_id)
    if target is not None:
        stmt = stmt.where(about([target]))
    shown = 0
    with Session(engine) as session:
        for row in session.scalars(stmt.limit(limit)):
            # (a page of intents shown as its documents' intents, under its seq and hash)
            for entry in parts(entry_of(row), row.seq, None if target is None else {target}):
                if shown >= limit:
                    return
                shown += 1
                yield {
                    "seq": row.seq,
                    "run_id": entry.run_id,
                    "at": rfc3339(entry.at),
                    "actor": entry.actor,
                    "reason": entry.reason,
                    "target_type": entry.target_type,
                    "target": entry.target,
                    "before": entry.before,
                    "after": entry.after,
                    "entry_hash": row.entry_hash,
                }


def runs_touching_after(
    engine: Engine, entry_hash: str, targets: set[str], *, exclude: str
) -> list[str]:
    """Runs other than ``exclude`` with a row or payload entry about one of ``targets``
    after the entry ``entry_hash``, newest first."""
    latest: dict[str, int] = {}
    wanted = sorted(targets)
    with Session(engine) as session:
        start = session.scalar(select(AuditRow.seq).where(AuditRow.entry_hash == entry_hash))
        if start is None:
            return []
        for first in range(0, len(wanted), 500):
            rows = session.execute(
                select(AuditRow.run_id, AuditRow.seq).where(
                    AuditRow.seq > start,
                    AuditRow.run_id != exclude,
                    AuditRow.target_type.in_((AuditKind.ROW, AuditKind.PAYLOAD)),
                    AuditRow.target.in_(wanted[first : first + 500]),
                )
            )
            paged = session.execute(
                select(AuditRow.run_id, AuditRow.seq)
                .join(DOCUMENTS, DOCUMENTS.c.seq == AuditRow.seq)
                .where(
                    AuditRow.seq > start,
                    AuditRow.run_id != exclude,
                    DOCUMENTS.c.target.in_(wanted[first : first + 500]),
                )
            )
            for run_id, seq in [*rows, *paged]:
                latest[run_id] = max(seq, latest.get(run_id, seq))
        for run_id, seq, old_id in _renamed_after(session, start, exclude):
            if old_id in targets:
                latest[run_id] = max(seq, latest.get(run_id, seq))
    return sorted(latest, key=lambda run_id: latest[run_id], reverse=True)


def _renamed_after(session: Session, start: int, exclude: str) -> list[tuple[str, int, str]]:
    """The re-keyings after entry ``start`` (of runs other than ``exclude``): ``(run, seq,
    old id)`` of each document renamed. A ``rekey_row`` entry is stored under the new id, so a
    run that wrote the old one finds the re-keying only by the id it had (re-keyings are rare
    and name only the documents they renamed: read here, not joined)."""
    found = session.execute(
        select(AuditRow.run_id, AuditRow.seq, AuditRow.before).where(
            AuditRow.seq > start,
            AuditRow.run_id != exclude,
            AuditRow.target_type == AuditKind.REKEY_ROW,
        )
    )
    return [
        (run_id, seq, before["doc_id"])
        for run_id, seq, before in found
        if isinstance(before, dict) and isinstance(before.get("doc_id"), str)
    ]


def run_entries_with_hashes(engine: Engine, run_id: str) -> tuple[list[AuditEntry], list[str]]:
    """Every entry of one run, in order, with each entry's own hash."""
    with Session(engine) as session:
        rows = list(
            session.scalars(
                select(AuditRow).where(AuditRow.run_id == run_id).order_by(AuditRow.seq)
            )
        )
        entries: list[AuditEntry] = []
        hashes: list[str] = []
        for row in rows:  # (a page: each document's intent, under the page's hash)
            found = parts(entry_of(row), row.seq)
            entries += found
            hashes += [row.entry_hash] * len(found)
        return entries, hashes


def run_entries(engine: Engine, run_id: str) -> list[AuditEntry]:
    """Every entry of one run, in order (for rollback)."""
    with Session(engine) as session:
        rows = session.scalars(
            select(AuditRow).where(AuditRow.run_id == run_id).order_by(AuditRow.seq)
        )
        return [part for row in rows for part in parts(entry_of(row), row.seq)]


#: The entries whose targets are the documents a run wrote or moved (a rollback's).
WRITTEN = (AuditKind.ROW, AuditKind.PAYLOAD, AuditKind.MOVE)


def _documents_of_runs(run_ids: Collection[str]) -> Any:
    """The documents ``run_ids`` wrote or moved, each once (a subquery, column ``target``)."""
    direct = select(AuditRow.target.label("target")).where(
        AuditRow.run_id.in_(sorted(run_ids)), AuditRow.target_type.in_(WRITTEN)
    )
    paged = (
        select(DOCUMENTS.c.target.label("target"))
        .join(AuditRow, AuditRow.seq == DOCUMENTS.c.seq)
        .where(AuditRow.run_id.in_(sorted(run_ids)))
    )
    return union(direct, paged).subquery()


def run_documents(
    engine: Engine, run_ids: Collection[str], *, after: str | None, limit: int
) -> list[str]:
    """The documents ``run_ids`` wrote or moved, in order, after ``after``, at most ``limit``."""
    found = _documents_of_runs(run_ids)
    stmt = select(found.c.target)
    if after is not None:
        stmt = stmt.where(found.c.target > after)
    with Session(engine) as session:
        return list(session.scalars(stmt.order_by(found.c.target).limit(max(limit, 1))))


def run_entries_of(
    engine: Engine, run_id: str, *, kinds: Collection[str], targets: Collection[str] | None
) -> list[AuditEntry]:
    """One run's entries of ``kinds`` (a page: its documents' intents), in order; with
    ``targets``, those about them."""
    kinds = set(kinds)
    stored = [*sorted(kinds), *([PAGE] if AuditKind.PAYLOAD in kinds else [])]
    stmt = select(AuditRow).where(AuditRow.run_id == run_id, AuditRow.target_type.in_(stored))
    wanted = None if targets is None else set(targets)
    if wanted is not None:
        stmt = stmt.where(about(sorted(wanted)))
    with Session(engine) as session:
        rows = session.scalars(stmt.order_by(AuditRow.seq).execution_options(yield_per=100))
        return [
            part
            for row in rows
            for part in parts(entry_of(row), row.seq, wanted)
            if part.target_type in kinds
        ]


def runs_touching_run(engine: Engine, run_id: str) -> list[str]:
    """``runs_touching_after`` the first entry of ``run_id``, of the documents it wrote or
    moved, in one query (joined in the store: nothing held here)."""
    found = _documents_of_runs([run_id])
    targets = select(found.c.target)
    latest = func.max(AuditRow.seq).label("latest")
    with Session(engine) as session:
        start = session.scalar(select(func.min(AuditRow.seq)).where(AuditRow.run_id == run_id))
        if start is None:
            return []
        later = select(AuditRow.run_id, latest).where(
            AuditRow.seq > start, AuditRow.run_id != run_id
        )
        direct = later.where(
            AuditRow.target_type.in_((AuditKind.ROW, AuditKind.PAYLOAD)),
            AuditRow.target.in_(targets),
        )
        paged = later.join(DOCUMENTS, DOCUMENTS.c.seq == AuditRow.seq).where(
            DOCUMENTS.c.target.in_(targets)
        )
        seqs: dict[str, int] = {}
        for query in (direct, paged):
            for other, seq in session.execute(query.group_by(AuditRow.run_id)):
                seqs[other] = max(seq, seqs.get(other, seq))
        renamed = _renamed_after(session, start, run_id)
        olds = sorted({old_id for _, _, old_id in renamed})
        ours: set[str] = set()
        for first in range(0, len(olds), 500):
            ours.update(
                session.scalars(
                    select(found.c.target).where(found.c.target.in_(olds[first : first + 500]))
                )
            )
        for other, seq, old_id in renamed:
            if old_id in ours:
                seqs[other] = max(seq, seqs.get(other, seq))
    return sorted(seqs, key=lambda other: seqs[other], reverse=True)
