"""The outbox repository: re-ingest requests, and a run's row writes queued with them.

``write_rows_and_outbox`` is the applier's one table write: row updates, re-ingest requests
and their audit entries commit in ONE transaction, or none of them does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, bindparam, select, update
from sqlalchemy.orm import Session, sessionmaker

from reconciler.model import AuditEntry, AuditKind, ReingestRequest, RowChange
from reconciler.stores.sql import audit
from reconciler.stores.sql.bulk import update_through_driver
from reconciler.stores.sql.connection import now
from reconciler.stores.sql.schema import Base, DocumentRow, OutboxRow


class SqlOutbox:
    """Re-ingest requests (pending until the ingestor consumes them) and the combined write."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def request_reingest(
        self, *, doc_id: str, source: str, source_key: str, reason: str, run_id: str | None = None
    ) -> None:
        """Queue a re-ingest request (idempotent while one is pending for the document)."""
        with self._sessions.begin() as session:
            pending = session.scalar(
                select(OutboxRow.id).where(
                    OutboxRow.doc_id == doc_id, OutboxRow.status == "pending"
                )
            )
            if pending is None:
                session.add(
                    OutboxRow(
                        doc_id=doc_id,
                        source=source,
                        source_key=source_key,
                        reason=reason,
                        run_id=run_id,
                        requested_at=now(),
                        status="pending",
                        attempts=0,
                    )
                )

    def pending_reingest(self, limit: int = 1000) -> list[OutboxRow]:
        """Pending re-ingest requests, oldest first."""
        with Session(self.engine) as session:
            stmt = (
                select(OutboxRow)
                .where(OutboxRow.status == "pending")
                .order_by(OutboxRow.id)
                .limit(limit)
            )
            return list(session.scalars(stmt))

    def pending_reingest_for(self, doc_ids: Iterable[str], *, chunk: int = 500) -> set[str]:
        """Those of ``doc_ids`` that already have a pending re-ingest request."""
        wanted = sorted(set(doc_ids))
        found: set[str] = set()
        with Session(self.engine) as session:
            for start in range(0, len(wanted), chunk):
                stmt = select(OutboxRow.doc_id).where(
                    OutboxRow.status == "pending",
                    OutboxRow.doc_id.in_(wanted[start : start + chunk]),
                )
                found.update(session.scalars(stmt))
        return found

    def finish_reingest(self, request_id: int, *, ok: bool, error: str | None = None) -> None:
        """Mark a request done, or count a failed attempt (it stays pending)."""
        with self._sessions.begin() as session:
            row = session.get(OutboxRow, request_id)
            if row is None:
                return
            row.attempts += 1
            if ok:
                row.status, row.consumed_at, row.last_error = "done", now(), None
            else:
                row.last_error = error

    # -- writes of a reconciliation run (the applier is the only caller) --------------------

    def write_rows_and_outbox(
        self,
        *,
        run_id: str,
        actor: str,
        changes: Sequence[RowChange],
        reingests: Sequence[tuple[ReingestRequest, str]],
        at: datetime,
    ) -> tuple[str, int]:
        """Row updates, re-ingest requests and their audit entries in ONE transaction.

        Returns the new audit head hash ("" when nothing was written) and the number of
        re-ingest requests queued (one already pending for a document is not repeated).
        """
        entries = [
            AuditEntry(
                run_id=run_id,
                at=at,
                actor=actor,
                reason=change.reason,
                target_type=AuditKind.ROW,
                target=change.doc_id,
                before=dict(change.before),
                after=dict(change.after),
            )
            for change in changes
        ]
        with self._sessions.begin() as session:
            update_rows(session, changes, at)
            for request, reason in _not_pending(session, reingests):
                session.add(
                    OutboxRow(
                        doc_id=request.doc_id,
                        source=request.source,
                        source_key=request.source_key,
                        reason=request.reason,
                        run_id=run_id,
                        requested_at=at,
                        status="pending",
                        attempts=0,
                    )
                )
                entries.append(
                    AuditEntry(
                        run_id=run_id,
                        at=at,
                        actor=actor,
                        reason=reason,
                        target_type=AuditKind.REINGEST,
                        target=request.doc_id,
                        before=None,
                        after={
                            "source": request.source,
                            "source_key": request.source_key,
                            "reason": request.reason,
                        },
                    )
                )
            queued = sum(1 for e in entries if e.target_type == AuditKind.REINGEST)
            return (audit.append(session, entries) if entries else ""), queued


#: Row updates bound at once (one ``executemany`` of one statement a set of columns).
_PAGE = 1000
_DOCUMENTS = Base.metadata.tables[DocumentRow.__tablename__]
#: The bound name of the row's id (not a column's name: the columns set are bound by theirs).
_ROW_ID = "row_doc_id"


def update_rows(session: Session, changes: Sequence[RowChange], at: datetime) -> None:
    """Apply ``changes`` in order, set-based: the changes that set the same columns are one
    ``UPDATE … WHERE doc_id = ?`` executed with a page of parameter sets (``executemany``), not
    one statement a row. A row changed twice is updated in the order of its changes: what is
    queued is written before a second change of a row is queued."""
    pages: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    queued: dict[str, tuple[str, ...]] = {}
    for change in changes:
        values = {
            k: (str(v) if k == "version_state" and v is not None else v)
            for k, v in change.after.items()
        }
        columns = tuple(sorted(values))
        if queued.get(change.doc_id, columns) != columns:
            _flush(session, pages)
            queued.clear()
        queued[change.doc_id] = columns
        page = pages.setdefault(columns, [])
        page.append({**values, "updated_at": at, _ROW_ID: change.doc_id})
        if len(page) >= _PAGE:
            _flush(session, {columns: page})
            pages[columns] = []
    _flush(session, pages)


def _flush(session: Session, pages: dict[tuple[str, ...], list[dict[str, Any]]]) -> None:
    """Execute the queued pages (one ``executemany`` each) and empty them."""
    statement = update(_DOCUMENTS).where(_DOCUMENTS.c.doc_id == bindparam(_ROW_ID))
    for columns, page in pages.items():
        if page:
            # (on SQLite straight to the driver, the same values bound: Core's parameter
            # work a row was most of a declare's 200,000 row updates' CPU)
            if not update_through_driver(session, _DOCUMENTS, "doc_id", _ROW_ID, page):
                session.connection().execute(statement, page)
            pages[columns] = []


def _not_pending(
    session: Session, reingests: Sequence[tuple[ReingestRequest, str]]
) -> list[tuple[ReingestRequest, str]]:
    """Those of ``reingests`` to queue: the first of each document that has no request
    pending (looked up a page of ids at a time, not one query a request)."""
    wanted = sorted({request.doc_id for request, _reason in reingests})
    pending: set[str] = set()
    for start in range(0, len(wanted), 500):
        pending.update(
            session.scalars(
                select(OutboxRow.doc_id).where(
                    OutboxRow.status == "pending",
                    OutboxRow.doc_id.in_(wanted[start : start + 500]),
                )
            )
        )
    chosen = []
    for request, reason in reingests:
        if request.doc_id not in pending:
            pending.add(request.doc_id)
            chosen.append((request, reason))
    return chosen
