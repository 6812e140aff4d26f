"""The document table over SQLAlchemy: SQLite (embedded default) and PostgreSQL.

``SqlDocumentTable`` implements the ``DocumentTable`` port (``reconciler.ports``) as a thin
facade over small repositories, each over the same SQLAlchemy engine and each owning its own
transactions:

==============================  ==========================================================
``sql.connection``              ``make_engine`` (SQLite pragmas) and driver faults mapped to
                                ``StoreFault``, once, at the edge
``sql.migrating``               ``SqlSchema``: the Alembic revision check on start, ``init``
``sql.documents``               ``SqlDocuments``: document rows, identity map, source status
``sql.runlog``                  ``SqlRunLog``: runs from start to end, and their findings
``sql.outbox``                  ``SqlOutbox``: re-ingest requests, and the applier's one
                                transaction of row updates + requests + audit entries
``stores.audit``                ``SqlAuditLog``: the hash-chained audit log
``sql.metrics``                 ``SqlMetrics``: the Prometheus snapshot and status counts
==============================  ==========================================================

The ORM models are in ``reconciler.stores.schema``, the migrations in ``stores/migrations``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from reconciler.model import (
    AuditEntry,
    Document,
    ReingestRequest,
    RowChange,
    Verification,
    fields_from_json,
)
from reconciler.stores.audit import SqlAuditLog
from reconciler.stores.schema import OutboxRow, RunRow, SourceStatusRow
from reconciler.stores.sql.connection import make_engine, now
from reconciler.stores.sql.documents import SqlDocuments, document_from_row
from reconciler.stores.sql.metrics import SqlMetrics
from reconciler.stores.sql.migrating import SchemaStatus, SqlSchema, _alembic_config
from reconciler.stores.sql.outbox import SqlOutbox
from reconciler.stores.sql.runlog import SqlRunLog

if TYPE_CHECKING:
    from reconciler.ports import DocumentTable

__all__ = [
    "RowChange",
    "SchemaStatus",
    "SqlAuditLog",
    "SqlDocumentTable",
    "SqlDocuments",
    "SqlMetrics",
    "SqlOutbox",
    "SqlRunLog",
    "SqlSchema",
    "_alembic_config",
    "document_from_row",
    "fields_from_json",
    "make_engine",
    "now",
]


class SqlDocumentTable:
    """The document table, identity map, run log, outbox and audit log in one SQL database.

    Each method delegates to the repository that holds its rows; the repositories are
    attributes (``documents``, ``runs``, ``outbox``, ``audit``, ``metrics``, ``schema``).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.schema = SqlSchema(engine)
        self.documents = SqlDocuments(engine)
        self.runs = SqlRunLog(engine)
        self.outbox = SqlOutbox(engine)
        self.audit = SqlAuditLog(engine)
        self.metrics = SqlMetrics(engine)

    @classmethod
    def from_url(cls, url: str) -> SqlDocumentTable:
        """Open the database at ``url`` (no schema check; call ``ensure_schema``)."""
        return cls(make_engine(url))

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()

    # -- schema -----------------------------------------------------------------------------

    def schema_status(self) -> SchemaStatus:
        """Compare the database's Alembic revision with this build's head."""
        return self.schema.schema_status()

    def ensure_schema(self, *, create: bool = False) -> SchemaStatus:
        """Check the schema on start: upgrade an older revision, refuse an unknown one."""
        return self.schema.ensure_schema(create=create)

    # -- documents --------------------------------------------------------------------------

    def iter_documents(
        self,
        *,
        batch_size: int = 1000,
        source: str | None = None,
        families: Sequence[str] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> Iterator[Document]:
        """Stream documents ordered by family, version and id (never all at once)."""
        return self.documents.iter_documents(
            batch_size=batch_size, source=source, families=families, doc_ids=doc_ids
        )

    def known_families(self, families: Iterable[str]) -> set[str]:
        """Those of ``families`` that at least one document row belongs to."""
        return self.documents.known_families(families)

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """Documents by id (missing ids are absent)."""
        return self.documents.get_documents(doc_ids)

    def upsert_documents(
        self, documents: Iterable[Document], *, chunk_counts: Mapping[str, int] | None = None
    ) -> int:
        """Insert or update document rows in bulk; return the number written."""
        return self.documents.upsert_documents(documents, chunk_counts=chunk_counts)

    # -- identity map -----------------------------------------------------------------------

    def identities(self, source: str) -> tuple[dict[str, str], dict[str, str]]:
        """The identity map of one source: (source_key -> family, content_hash -> family)."""
        return self.documents.identities(source)

    def record_identities(
        self, source: str, entries: Iterable[tuple[str, str, str | None, str | None]]
    ) -> int:
        """Record (source_key, family, content_hash, path) seen now; first_seen is kept."""
        return self.documents.record_identities(source, entries)

    def identities_at(self, source: str, paths: Iterable[str]) -> dict[str, str]:
        """The identity last seen at each of ``paths`` (path -> source_key), where known."""
        return self.documents.identities_at(source, paths)

    def touch_identities(self, source: str, keys: Iterable[str]) -> None:
        """Mark identities as seen now without changing them."""
        self.documents.touch_identities(source, keys)

    def identity_last_seen(self, source: str) -> dict[str, datetime]:
        """When each source key of a source was last seen (source_key -> instant)."""
        return self.documents.identity_last_seen(source)

    # -- source status ----------------------------------------------------------------------

    def record_source_attempt(
        self,
        source: str,
        *,
        ok: bool,
        at: datetime | None = None,
        error: str | None = None,
        documents_seen: int | None = None,
    ) -> None:
        """Record a scan of a source; success moves its TTL clock, failure keeps it."""
        self.documents.record_source_attempt(
            source, ok=ok, at=at, error=error, documents_seen=documents_seen
        )

    def source_status(self) -> dict[str, SourceStatusRow]:
        """Every source's status row."""
        return self.documents.source_status()

    # -- runs and findings ------------------------------------------------------------------

    def start_run(
        self,
        *,
        mode: str,
        actor: str,
        forced: bool = False,
        shard: str | None = None,
        status: str = "running",
        run_id: str | None = None,
        job: str | None = None,
        checks: str | None = None,
    ) -> str:
        """Record a run as started (or refused); return its id."""
        return self.runs.start_run(
            mode=mode,
            actor=actor,
            forced=forced,
            shard=shard,
            status=status,
            run_id=run_id,
            job=job,
            checks=checks,
        )

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        counts: Mapping[str, Any] | None = None,
        error: str | None = None,
        **stats: float,
    ) -> None:
        """Record a run's end; ``stats`` fill the metric columns (``chunks_scanned``...)."""
        self.runs.finish_run(run_id, status=status, counts=counts, error=error, **stats)

    def set_run_counts(self, run_id: str, counts: Mapping[str, Any]) -> None:
        """Replace a finished run's counts (recovery clears what it resolved)."""
        self.runs.set_run_counts(run_id, counts)

    def rollbacks(self) -> dict[str, str]:
        """Succeeded rollback runs and the run each rolled back."""
        return self.runs.rollbacks()

    def runs_to_resolve(self, *, shard: str) -> list[tuple[str, str]]:
        """Runs of ``shard`` left running, and failed runs with a batch unconfirmed."""
        return self.runs.runs_to_resolve(shard=shard)

    def last_runs(self, limit: int = 5) -> list[RunRow]:
        """The most recent runs, newest first."""
        return self.runs.last_runs(limit)

    def run_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """Ids of runs that start with ``prefix`` (at most ``limit``, newest first)."""
        return self.runs.run_ids_starting(prefix, limit)

    def get_run(self, run_id: str) -> RunRow | None:
        """One run's record."""
        return self.runs.get_run(run_id)

    def record_findings(
        self, run_id: str, findings: Sequence[Any], *, outstanding: Sequence[bool] | None = None
    ) -> None:
        """Store a run's findings (``Finding`` values) and whether each still holds."""
        self.runs.record_findings(run_id, findings, outstanding=outstanding)

    def findings_of(self, run_id: str) -> list[dict[str, Any]]:
        """The findings a run recorded."""
        return self.runs.findings_of(run_id)

    # -- re-ingest outbox -------------------------------------------------------------------

    def request_reingest(
        self, *, doc_id: str, source: str, source_key: str, reason: str, run_id: str | None = None
    ) -> None:
        """Queue a re-ingest request (idempotent while one is pending for the document)."""
        self.outbox.request_reingest(
            doc_id=doc_id, source=source, source_key=source_key, reason=reason, run_id=run_id
        )

    def pending_reingest(self, limit: int = 1000) -> list[OutboxRow]:
        """Pending re-ingest requests, oldest first."""
        return self.outbox.pending_reingest(limit)

    def pending_reingest_for(self, doc_ids: Iterable[str], *, chunk: int = 500) -> set[str]:
        """Those of ``doc_ids`` that already have a pending re-ingest request."""
        return self.outbox.pending_reingest_for(doc_ids, chunk=chunk)

    def finish_reingest(self, request_id: int, *, ok: bool, error: str | None = None) -> None:
        """Mark a request done, or count a failed attempt (it stays pending)."""
        self.outbox.finish_reingest(request_id, ok=ok, error=error)

    def write_rows_and_outbox(
        self,
        *,
        run_id: str,
        actor: str,
        changes: Sequence[RowChange],
        reingests: Sequence[tuple[ReingestRequest, str]],
        at: datetime,
    ) -> tuple[str, int]:
        """Row updates, re-ingest requests and their audit entries in ONE transaction;
        returns the new audit head ("" when nothing was written) and the requests queued."""
        return self.outbox.write_rows_and_outbox(
            run_id=run_id, actor=actor, changes=changes, reingests=reingests, at=at
        )

    # -- audit ------------------------------------------------------------------------------

    def append_audit(self, entries: Sequence[AuditEntry]) -> str:
        """Append audit entries in their own transaction; return the new head hash."""
        return self.audit.append(entries)

    def audit_entries(
        self, *, run_id: str | None = None, target: str | None = None, limit: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """Audit entries for display, oldest first, optionally for one run or one target."""
        return self.audit.show(run_id=run_id, target=target, limit=limit)

    def verify_audit(self) -> Verification:
        """Walk the audit chain and report every break."""
        return self.audit.verify()

    def run_entries_with_hashes(self, run_id: str) -> tuple[list[AuditEntry], list[str]]:
        """Every audit entry of one run, in order, with each entry's own hash."""
        return self.audit.run_entries_with_hashes(run_id)

    def runs_touching_after(self, entry_hash: str, targets: set[str], *, exclude: str) -> list[str]:
        """Runs other than ``exclude`` that wrote one of ``targets`` after ``entry_hash``,
        newest first."""
        return self.audit.runs_touching_after(entry_hash, targets, exclude=exclude)

    # -- metrics and status -----------------------------------------------------------------

    def metrics_snapshot(self, *, recent_runs: int = 500) -> dict[str, Any]:
        """Everything the Prometheus collector exposes that lives in the database."""
        return self.metrics.snapshot(recent_runs=recent_runs)

    def stats(self) -> dict[str, Any]:
        """Counts for ``reconciler status``: documents by state, families, chunks, quarantine."""
        return self.metrics.stats()


if TYPE_CHECKING:  # the facade implements the port (checked by mypy, costs nothing at run time)
    _implements: type[DocumentTable] = SqlDocumentTable
