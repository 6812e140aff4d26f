"""The document table over SQLAlchemy: SQLite (embedded default) and PostgreSQL.

Owns the engine, the schema revision check (Alembic), streaming reads and dialect-aware bulk
upserts. Driver errors are mapped once, here, to ``TableUnavailable`` / ``SchemaError``.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, func, inspect, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from reconciler.errors import SchemaError, StoreFault, TableUnavailable
from reconciler.model import (
    OPEN_END,
    Document,
    ReingestRequest,
    VersionState,
    parse_instant,
    storable,
)
from reconciler.stores import audit
from reconciler.stores.schema import (
    Base,
    DocumentRow,
    FindingRow,
    IdentityRow,
    OutboxRow,
    RunRow,
    SourceStatusRow,
)

log = logging.getLogger(__name__)

_DOC_FIELDS = (
    "doc_id",
    "source",
    "source_key",
    "doc_family_id",
    "doc_version",
    "version_state",
    "superseded_by",
    "effective_from",
    "effective_to",
    "doc_class",
    "title",
    "source_hash",
    "quarantined",
    "quarantine_reason",
    "ingested_at",
    "updated_at",
)


def now() -> datetime:
    """The current instant, UTC."""
    return datetime.now(UTC)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    """Create an engine; on SQLite turn on WAL, a busy timeout and foreign keys."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    engine = create_engine(url, pool_pre_ping=True, future=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "handle_error", _store_faults)
    return engine


#: What a driver's error code says about the machine: SQLite result codes (by name, extended
#: codes by prefix) and PostgreSQL SQLSTATEs. Codes, not messages: a message can quote data.
_SQLITE_FAULTS = (
    ("SQLITE_FULL", "disk full"),
    ("SQLITE_IOERR", "disk I/O error"),
    ("SQLITE_CORRUPT", "database is corrupt"),
    ("SQLITE_NOTADB", "database is corrupt"),
    ("SQLITE_READONLY", "read-only storage"),
)
_PG_FAULTS = {
    "53100": "disk full",
    "58030": "disk I/O error",
    "XX001": "database is corrupt",
    "XX002": "database is corrupt",
}
#: For a driver error without a code (one raised by hand): its message, as SQLite words it.
_SQLITE_MESSAGES = (
    ("database or disk is full", "disk full"),
    ("disk i/o error", "disk I/O error"),
    ("database disk image is malformed", "database is corrupt"),
    ("file is not a database", "database is corrupt"),
    ("attempt to write a readonly database", "read-only storage"),
)


def _fault_of(original: BaseException) -> str | None:
    """What a driver error says about the storage, if anything."""
    name = getattr(original, "sqlite_errorname", None)
    if isinstance(name, str):
        return next((meaning for code, meaning in _SQLITE_FAULTS if name.startswith(code)), None)
    state = getattr(original, "sqlstate", None)
    if isinstance(state, str):
        return _PG_FAULTS.get(state.upper())
    text = str(original).lower()
    if type(original).__module__.startswith("sqlite3"):
        return next((meaning for needle, meaning in _SQLITE_MESSAGES if text == needle), None)
    return None


def _no_space(engine: Engine | None) -> bool:
    """Whether a SQLite database's folder has (almost) no space left."""
    database = engine.url.database if engine is not None else None
    if engine is None or engine.dialect.name != "sqlite" or not database:
        return False
    try:
        return shutil.disk_usage(Path(database).parent).free < 1 << 20
    except OSError:
        return False


def _store_faults(context: Any) -> None:
    """Map a driver error that is about the machine (disk full, I/O, corruption) to
    ``StoreFault`` once, at the edge, so it never reads as an unreachable server."""
    original = context.original_exception
    meaning = _fault_of(original)
    if meaning is None:
        return
    engine = context.engine
    if meaning == "disk I/O error" and _no_space(engine):
        meaning = "disk full"  # SQLite reports a full disk under its WAL as an I/O error
    where = (
        f"at {engine.url.database}"
        if engine is not None and engine.dialect.name == "sqlite"
        else f"on {engine.url.render_as_string(hide_password=True)}"
        if engine is not None
        else ""
    )
    raise StoreFault(
        f"document table {where}: {meaning} ({' '.join(str(original).split())}); the failed "
        "transaction was rolled back. Fix the storage (free space, check the disk, or restore "
        "the database), then run again"
    ) from original


def _alembic_config() -> Config:
    config = Config()
    location = resources.files("reconciler.stores") / "migrations"
    config.set_main_option("script_location", str(location))
    return config


def document_from_row(row: Any) -> Document:
    """Convert a table row (ORM object or Core row) to a ``Document`` value."""
    try:
        state = VersionState(row.version_state)
    except ValueError:
        state = VersionState.UNKNOWN
    return Document(
        doc_id=row.doc_id,
        source=row.source,
        source_key=row.source_key,
        doc_family_id=row.doc_family_id,
        doc_version=row.doc_version,
        version_state=state,
        superseded_by=row.superseded_by,
        effective_from=row.effective_from,
        effective_to=row.effective_to or OPEN_END,
        doc_class=row.doc_class,
        title=row.title,
        source_hash=row.source_hash,
        quarantined=row.quarantined,
        quarantine_reason=row.quarantine_reason,
        ingested_at=row.ingested_at,
        updated_at=row.updated_at,
    )


def _document_values(doc: Document, at: datetime) -> dict[str, Any]:
    values = {name: getattr(doc, name) for name in _DOC_FIELDS}
    values["version_state"] = str(doc.version_state)
    values["effective_to"] = doc.effective_to or OPEN_END
    values["updated_at"] = doc.updated_at or at
    return values


_DATETIME_FIELDS = {"effective_from", "effective_to", "ingested_at", "updated_at"}


def _without_nul(value: Any) -> Any:
    """NUL characters and lone surrogates spelled out (``storable``), recursively."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def fields_from_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn audited JSON field values back into row values (datetimes parsed)."""
    restored: dict[str, Any] = {}
    for name, value in values.items():
        if name in _DATETIME_FIELDS and isinstance(value, str):
            restored[name] = parse_instant(value)
        else:
            restored[name] = value
    return restored


@dataclass(frozen=True)
class RowChange:
    """Set ``after`` fields on one document row (``before`` is what the scan saw)."""

    doc_id: str
    reason: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]


@dataclass(frozen=True)
class SchemaStatus:
    """Where the database stands against this build's migrations."""

    current: str | None
    head: str
    known: bool

    @property
    def up_to_date(self) -> bool:
        """Whether the database is at this build's head revision."""
        return self.current == self.head


class SqlDocumentTable:
    """The document table, identity map, run log and re-ingest outbox in one SQL database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

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
        script = ScriptDirectory.from_config(_alembic_config())
        head = script.get_current_head()
        assert head is not None
        try:
            with self.engine.connect() as conn:
                current = MigrationContext.configure(conn).get_current_revision()
        except OperationalError as exc:
            raise TableUnavailable(f"cannot reach the document table: {exc.orig}") from None
        try:
            known = current is None or script.get_revision(current) is not None
        except Exception:  # alembic raises ResolutionError/CommandError for unknown ids
            known = False
        return SchemaStatus(current=current, head=head, known=known)

    def ensure_schema(self, *, create: bool = False) -> SchemaStatus:
        """Check the schema on start: upgrade an older revision, refuse an unknown one.

        A database with no reconciler schema is created only when ``create`` (``reconciler
        init``); otherwise the caller is told to run ``init``.
        """
        database = self.engine.url.database
        if (
            not create
            and self.dialect == "sqlite"
            and database not in (None, "", ":memory:")
            and not Path(database).exists()
        ):
            raise SchemaError(
                f"no document table at {database}; run `reconciler init` first "
                "(the table is not initialised)"
            )
        status = self.schema_status()
        if not status.known:
            raise SchemaError(
                f"the document table is at schema revision {status.current!r}, which this build "
                f"of corpus-reconciler does not know (head {status.head!r}); it was migrated by a "
                "newer build: run that build, or restore a backup"
            )
        if status.current is None:
            existing = set(inspect(self.engine).get_table_names())
            ours = set(Base.metadata.tables)
            if existing & ours:
                raise SchemaError(
                    "the database holds reconciler tables but no Alembic revision; refusing to "
                    "guess its schema (was it created by hand?)"
                )
            if not create:
                raise SchemaError(
                    "the document table is not initialised; run `reconciler init` first"
                )
        if status.up_to_date:
            return status
        log.info("upgrading document table schema %s -> %s", status.current, status.head)
        config = _alembic_config()
        with self.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        return self.schema_status()

    # -- documents --------------------------------------------------------------------------

    def iter_documents(
        self,
        *,
        batch_size: int = 1000,
        source: str | None = None,
        families: Sequence[str] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> Iterator[Document]:
        """Stream documents ordered by family and version (``yield_per``; never all at once)."""
        columns = DocumentRow.__table__.c
        stmt = select(DocumentRow.__table__).order_by(columns.doc_family_id, columns.doc_version)
        if source is not None:
            stmt = stmt.where(columns.source == source)
        if families is not None:
            stmt = stmt.where(columns.doc_family_id.in_(list(families)))
        if doc_ids is not None:
            stmt = stmt.where(columns.doc_id.in_(list(doc_ids)))
        # Core rows, server-side cursor where the driver has one: no ORM identity map grows.
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=batch_size).execute(stmt)
            for row in result:
                yield document_from_row(row)

    def has_family(self, family: str) -> bool:
        """Whether any document row belongs to ``family``."""
        columns = DocumentRow.__table__.c
        stmt = select(columns.doc_id).where(columns.doc_family_id == family).limit(1)
        with self.engine.connect() as conn:
            return conn.execute(stmt).first() is not None

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """Documents by id (missing ids are absent)."""
        ids = list(dict.fromkeys(doc_ids))
        found: dict[str, Document] = {}
        with Session(self.engine) as session:
            for start in range(0, len(ids), 500):
                rows = session.scalars(
                    select(DocumentRow).where(DocumentRow.doc_id.in_(ids[start : start + 500]))
                )
                found.update({row.doc_id: document_from_row(row) for row in rows})
        return found

    def _upsert(
        self, session: Session, table: Any, rows: list[dict[str, Any]], keys: list[str]
    ) -> None:
        if not rows:
            return
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            stmt = insert(table).values(chunk)
            updates = {c: getattr(stmt.excluded, c) for c in chunk[0] if c not in keys}
            session.execute(stmt.on_conflict_do_update(index_elements=keys, set_=updates))

    def upsert_documents(
        self, documents: Iterable[Document], *, chunk_counts: Mapping[str, int] | None = None
    ) -> int:
        """Insert or update document rows in bulk (both dialects); return the number written."""
        at = now()
        rows = []
        for doc in documents:
            values = _document_values(doc, at)
            if chunk_counts is not None and doc.doc_id in chunk_counts:
                values["chunk_count"] = chunk_counts[doc.doc_id]
            rows.append(values)
        # Rows in one statement must share their columns.
        with_counts = [r for r in rows if "chunk_count" in r]
        without = [r for r in rows if "chunk_count" not in r]
        try:
            with self._sessions.begin() as session:
                self._upsert(session, DocumentRow.__table__, with_counts, ["doc_id"])
                self._upsert(session, DocumentRow.__table__, without, ["doc_id"])
        except OperationalError as exc:
            raise TableUnavailable(f"document table write failed: {exc.orig}") from None
        return len(rows)

    # -- identity map -----------------------------------------------------------------------

    def identities(self, source: str) -> tuple[dict[str, str], dict[str, str]]:
        """The identity map of one source: (source_key -> family, content_hash -> family)."""
        by_key: dict[str, str] = {}
        by_hash: dict[str, str] = {}
        stmt = select(IdentityRow.source_key, IdentityRow.doc_family_id, IdentityRow.content_hash)
        with Session(self.engine) as session:
            rows = session.execute(
                stmt.where(IdentityRow.source == source).execution_options(yield_per=5000)
            )
            for key, family, content_hash in rows:
                by_key[key] = family
                if content_hash:
                    by_hash.setdefault(content_hash, family)
        return by_key, by_hash

    def record_identities(
        self, source: str, entries: Iterable[tuple[str, str, str | None, str | None]]
    ) -> int:
        """Record (source_key, family, content_hash, path) seen now; first_seen is kept."""
        at = now()
        rows = [
            {
                "source": source,
                "source_key": key,
                "doc_family_id": family,
                "content_hash": content_hash,
                "path": path,
                "first_seen": at,
                "last_seen": at,
            }
            for key, family, content_hash, path in entries
        ]
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        with self._sessions.begin() as session:
            for start in range(0, len(rows), 500):
                stmt = insert(IdentityRow).values(rows[start : start + 500])
                session.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["source", "source_key"],
                        set_={
                            "doc_family_id": stmt.excluded.doc_family_id,
                            "content_hash": stmt.excluded.content_hash,
                            "path": stmt.excluded.path,
                            "last_seen": stmt.excluded.last_seen,
                        },
                    )
                )
        return len(rows)

    def identities_at(self, source: str, paths: Iterable[str]) -> dict[str, str]:
        """The identity last seen at each of ``paths`` (path -> source_key), where known."""
        wanted = sorted(set(paths))
        found: dict[str, tuple[datetime, str]] = {}
        stmt = select(IdentityRow.path, IdentityRow.source_key, IdentityRow.last_seen)
        with Session(self.engine) as session:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                rows = session.execute(
                    stmt.where(IdentityRow.source == source, IdentityRow.path.in_(chunk))
                )
                for path, key, seen in rows:
                    if path is not None and (path not in found or (seen, key) > found[path]):
                        found[path] = (seen, key)
        return {path: key for path, (_seen, key) in found.items()}

    def touch_identities(self, source: str, keys: Iterable[str]) -> None:
        """Mark identities as seen now without changing them (a document that is present but
        cannot be parsed: the grace period of ``missing_in_source`` does not start)."""
        chosen = sorted(set(keys))
        at = now()
        with self._sessions.begin() as session:
            for start in range(0, len(chosen), 500):
                session.execute(
                    update(IdentityRow)
                    .where(
                        IdentityRow.source == source,
                        IdentityRow.source_key.in_(chosen[start : start + 500]),
                    )
                    .values(last_seen=at)
                )

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
        at = at or now()
        values: dict[str, Any] = {"source": source, "last_attempt_at": at, "last_error": error}
        if ok:
            values["last_success_at"] = at
            values["documents_seen"] = documents_seen
        with self._sessions.begin() as session:
            self._upsert(session, SourceStatusRow.__table__, [values], ["source"])
            if not ok:
                session.execute(
                    update(SourceStatusRow)
                    .where(SourceStatusRow.source == source)
                    .values(failures=SourceStatusRow.failures + 1)
                )

    def source_status(self) -> dict[str, SourceStatusRow]:
        """Every source's status row."""
        with Session(self.engine) as session:
            return {row.source: row for row in session.scalars(select(SourceStatusRow))}

    # -- runs -------------------------------------------------------------------------------

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
        run_id = run_id or str(uuid.uuid4())
        with self._sessions.begin() as session:
            session.add(
                RunRow(
                    run_id=run_id,
                    mode=mode,
                    actor=actor,
                    status=status,
                    started_at=now(),
                    forced=forced,
                    shard=shard,
                    job=job or mode,
                    checks=checks,
                )
            )
        return run_id

    _RUN_STATS = frozenset(
        {
            "duration_seconds",
            "chunks_scanned",
            "rows_written",
            "payload_writes",
            "points_written",
            "reingest_requests",
        }
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
        unknown = set(stats) - self._RUN_STATS
        if unknown:
            raise TypeError(f"unknown run statistics: {', '.join(sorted(unknown))}")
        with self._sessions.begin() as session:
            session.execute(
                update(RunRow)
                # An interrupted run was declared dead by the next lease holder: final.
                .where(RunRow.run_id == run_id, RunRow.status != "interrupted")
                .values(
                    status=status,
                    finished_at=now(),
                    counts=dict(counts or {}),
                    error=error,
                    **stats,
                )
            )

    def set_run_counts(self, run_id: str, counts: Mapping[str, Any]) -> None:
        """Replace a finished run's counts (recovery clears what it resolved)."""
        with self._sessions.begin() as session:
            session.execute(
                update(RunRow).where(RunRow.run_id == run_id).values(counts=dict(counts))
            )

    def rollbacks(self) -> dict[str, str]:
        """Succeeded rollback runs and the run each rolled back."""
        with Session(self.engine) as session:
            rows = session.execute(
                select(RunRow.run_id, RunRow.counts).where(
                    RunRow.mode == "rollback", RunRow.status == "succeeded"
                )
            )
            return {
                run_id: counts["rolled_back"]
                for run_id, counts in rows
                if isinstance(counts, dict) and counts.get("rolled_back")
            }

    def runs_to_resolve(self, *, shard: str) -> list[tuple[str, str]]:
        """Runs of ``shard`` recorded as running, and failed runs that left a payload batch
        unconfirmed: (run_id, status), oldest first."""
        with Session(self.engine) as session:
            rows = session.execute(
                select(RunRow.run_id, RunRow.status, RunRow.counts)
                .where(RunRow.shard == shard, RunRow.status.in_(("running", "failed")))
                .order_by(RunRow.started_at)
            )
            return [
                (run_id, status)
                for run_id, status, counts in rows
                if status == "running" or (isinstance(counts, dict) and counts.get("unconfirmed"))
            ]

    def last_runs(self, limit: int = 5) -> list[RunRow]:
        """The most recent runs, newest first."""
        with Session(self.engine) as session:
            return list(
                session.scalars(select(RunRow).order_by(RunRow.started_at.desc()).limit(limit))
            )

    # -- re-ingest outbox -------------------------------------------------------------------

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
        entries: list[audit.AuditEntry] = []
        with self._sessions.begin() as session:
            for change in changes:
                values = {
                    k: (str(v) if k == "version_state" and v is not None else v)
                    for k, v in change.after.items()
                }
                session.execute(
                    update(DocumentRow)
                    .where(DocumentRow.doc_id == change.doc_id)
                    .values(**values, updated_at=at)
                )
                entries.append(
                    audit.AuditEntry(
                        run_id=run_id,
                        at=at,
                        actor=actor,
                        reason=change.reason,
                        target_type="row",
                        target=change.doc_id,
                        before=dict(change.before),
                        after=dict(change.after),
                    )
                )
            for request, reason in reingests:
                pending = session.scalar(
                    select(OutboxRow.id).where(
                        OutboxRow.doc_id == request.doc_id, OutboxRow.status == "pending"
                    )
                )
                if pending is not None:
                    continue
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
                    audit.AuditEntry(
                        run_id=run_id,
                        at=at,
                        actor=actor,
                        reason=reason,
                        target_type="reingest",
                        target=request.doc_id,
                        before=None,
                        after={
                            "source": request.source,
                            "source_key": request.source_key,
                            "reason": request.reason,
                        },
                    )
                )
            queued = sum(1 for e in entries if e.target_type == "reingest")
            return (audit.append(session, entries) if entries else ""), queued

    def append_audit(self, entries: Sequence[audit.AuditEntry]) -> str:
        """Append audit entries in their own transaction; return the new head hash."""
        if not entries:
            return ""
        with self._sessions.begin() as session:
            return audit.append(session, entries)

    def record_findings(
        self, run_id: str, findings: Sequence[Any], *, outstanding: Sequence[bool] | None = None
    ) -> None:
        """Store a run's findings (``Finding`` values) and whether each still holds."""
        flags = list(outstanding) if outstanding is not None else [True] * len(findings)
        rows = [
            FindingRow(run_id=run_id, outstanding=flag, **_without_nul(f.to_json()))
            for f, flag in zip(findings, flags, strict=True)
        ]
        with self._sessions.begin() as session:
            session.add_all(rows)

    def findings_of(self, run_id: str) -> list[dict[str, Any]]:
        """The findings a run recorded."""
        with Session(self.engine) as session:
            rows = session.scalars(
                select(FindingRow).where(FindingRow.run_id == run_id).order_by(FindingRow.id)
            )
            return [
                {
                    "check": r.check,
                    "kind": r.kind,
                    "severity": r.severity,
                    "family": r.family,
                    "doc_id": r.doc_id,
                    "expected": r.expected,
                    "actual": r.actual,
                    "action": r.action,
                }
                for r in rows
            ]

    def get_run(self, run_id: str) -> RunRow | None:
        """One run's record."""
        with Session(self.engine) as session:
            return session.get(RunRow, run_id)

    def identity_last_seen(self, source: str) -> dict[str, datetime]:
        """When each source key of a source was last seen (source_key -> instant)."""
        stmt = select(IdentityRow.source_key, IdentityRow.last_seen).where(
            IdentityRow.source == source
        )
        with Session(self.engine) as session:
            rows = session.execute(stmt.execution_options(yield_per=5000))
            return {key: seen for key, seen in rows}

    # -- metrics ----------------------------------------------------------------------------

    def metrics_snapshot(self, *, recent_runs: int = 500) -> dict[str, Any]:
        """Everything the Prometheus collector exposes that lives in the database.

        Timestamps and totals per job come from the run log (so a failed run never moves the
        last success, and counters survive restarts); findings come from each check's latest
        recorded run, outstanding ones only.
        """
        with Session(self.engine) as session:
            jobs: dict[str, dict[str, Any]] = {}
            stmt = select(
                RunRow.job,
                RunRow.status,
                func.max(RunRow.started_at),
                func.max(RunRow.finished_at),
                func.count(),
            ).group_by(RunRow.job, RunRow.status)
            for job, status, started, finished, count in session.execute(stmt):
                if job is None or job == "ingest":
                    continue
                entry = jobs.setdefault(
                    job, {"last_run": None, "last_success": None, "failures": 0, "last_ok": None}
                )
                if status != "running" and (
                    entry["last_run"] is None or started > entry["last_run"]
                ):
                    entry["last_run"] = started
                    entry["last_ok"] = status == "succeeded"
                if status == "succeeded" and finished is not None:
                    entry["last_success"] = finished
                if status in ("failed", "interrupted"):
                    entry["failures"] += int(count)
            totals = session.execute(
                select(
                    func.coalesce(func.sum(RunRow.rows_written), 0),
                    func.coalesce(func.sum(RunRow.payload_writes), 0),
                    func.coalesce(func.sum(RunRow.points_written), 0),
                    func.coalesce(func.sum(RunRow.reingest_requests), 0),
                    func.coalesce(func.sum(RunRow.chunks_scanned), 0),
                ).where(RunRow.job != "ingest")
            ).one()
            refusals = session.scalar(select(func.count()).where(RunRow.status == "refused"))
            repairs = session.execute(
                select(FindingRow.check, FindingRow.kind, func.count())
                .join(RunRow, RunRow.run_id == FindingRow.run_id)
                .where(FindingRow.outstanding.is_(False), RunRow.status == "succeeded")
                .group_by(FindingRow.check, FindingRow.kind)
            ).all()
            latest: dict[str, str] = {}
            recent = session.execute(
                select(RunRow.run_id, RunRow.checks)
                .where(RunRow.status.in_(["succeeded", "failed", "refused"]))
                .where(RunRow.checks.is_not(None))
                .order_by(RunRow.started_at.desc())
                .limit(recent_runs)
            )
            for run_id, checks in recent:
                for check in (checks or "").split(","):
                    latest.setdefault(check, run_id)
            findings: list[tuple[str, str, str, str | None, str | None]] = []
            for check, run_id in latest.items():
                rows = session.execute(
                    select(
                        FindingRow.check,
                        FindingRow.kind,
                        FindingRow.severity,
                        FindingRow.family,
                        FindingRow.doc_id,
                    ).where(
                        FindingRow.run_id == run_id,
                        FindingRow.check == check,
                        FindingRow.outstanding.is_(True),
                    )
                )
                findings += [tuple(r) for r in rows]  # type: ignore[misc]
            # Guard findings belong to no check: take them from the latest run of all.
            if latest:
                newest = session.scalar(
                    select(RunRow.run_id)
                    .where(RunRow.status.in_(["succeeded", "failed", "refused"]))
                    .where(RunRow.checks.is_not(None))
                    .order_by(RunRow.started_at.desc())
                    .limit(1)
                )
                rows = session.execute(
                    select(
                        FindingRow.check,
                        FindingRow.kind,
                        FindingRow.severity,
                        FindingRow.family,
                        FindingRow.doc_id,
                    ).where(FindingRow.run_id == newest, FindingRow.check == "guard")
                )
                findings += [tuple(r) for r in rows]  # type: ignore[misc]
            quarantined = session.execute(
                select(
                    DocumentRow.quarantine_reason,
                    func.count(func.distinct(DocumentRow.doc_family_id)),
                )
                .where(DocumentRow.quarantined.is_(True))
                .group_by(DocumentRow.quarantine_reason)
            ).all()
            sources = {
                row.source: {
                    "up": row.last_success_at is not None
                    and (row.last_attempt_at is None or row.last_success_at >= row.last_attempt_at),
                    "failures": int(row.failures or 0),
                }
                for row in session.scalars(select(SourceStatusRow))
            }
        return {
            "jobs": jobs,
            "totals": {
                "table_writes": int(totals[0]),
                "payload_writes": int(totals[1]),
                "points_written": int(totals[2]),
                "reingest_requests": int(totals[3]),
                "points_scanned": int(totals[4]),
            },
            "guard_refusals": int(refusals or 0),
            "repairs": [(c, k, int(n)) for c, k, n in repairs],
            "findings": findings,
            "quarantined_families": {str(r or "none"): int(n) for r, n in quarantined},
            "sources": sources,
        }

    # -- status -----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts for ``reconciler status``: documents by state, families, chunks, quarantine."""
        try:
            with Session(self.engine) as session:
                by_state = dict(
                    session.execute(
                        select(DocumentRow.version_state, func.count()).group_by(
                            DocumentRow.version_state
                        )
                    ).all()
                )
                families = session.scalar(
                    select(func.count(func.distinct(DocumentRow.doc_family_id)))
                )
                chunks = session.scalar(select(func.coalesce(func.sum(DocumentRow.chunk_count), 0)))
                quarantined = session.scalar(
                    select(func.count()).where(DocumentRow.quarantined.is_(True))
                )
                pending = session.scalar(select(func.count()).where(OutboxRow.status == "pending"))
        except SQLAlchemyError as exc:
            raise TableUnavailable(f"cannot read the document table: {exc}") from None
        return {
            "documents": sum(by_state.values()),
            "by_state": {str(k): int(v) for k, v in sorted(by_state.items())},
            "families": int(families or 0),
            "chunks_registered": int(chunks or 0),
            "quarantined_documents": int(quarantined or 0),
            "reingest_pending": int(pending or 0),
        }
