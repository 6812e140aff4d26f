"""The audit trail read by run and by target: ``audit show``, the runs that touched documents
after a run (rollback's later-runs check), and one run's entries (rollback and recovery).

A page of payload intents is read as its documents' intents, under the page's seq and hash
(``audit_pages.parts``); the chain itself is walked and verified in ``audit``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from reconciler.model import AuditEntry, AuditKind, rfc3339
from reconciler.stores.sql.audit_body import DOCUMENTS
from reconciler.stores.sql.audit_pages import about, parts
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
    return sorted(latest, key=lambda run_id: latest[run_id], reverse=True)


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
