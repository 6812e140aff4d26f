"""SQLAlchemy models of the document table and its companions (one Alembic-managed schema).

Portable across SQLite (embedded default) and PostgreSQL: datetimes are stored as UTC and come
back timezone-aware on both; JSON is JSONB on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from reconciler.model import OPEN_END


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every dialect (SQLite stores them naive, in UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Callable[[Any], Any] | None:
        """On SQLite, parse the stored text and make it UTC in one step (the check reads
        hundreds of thousands of these); anything ``fromisoformat`` does not take goes the
        usual way, through SQLAlchemy's own parser."""
        usual = super().result_processor(dialect, coltype)
        if dialect.name != "sqlite" or usual is None:
            return usual

        # A table repeats its instants (every open end, a version's end that is its
        # successor's start, the rows one write stamped): each stored text is parsed once
        # while a few thousand others are remembered (datetimes are immutable, so one value
        # is shared safely).
        parsed_texts: dict[str, datetime] = {}

        def process(value: Any) -> Any:
            if value.__class__ is str:
                known = parsed_texts.get(value)
                if known is not None:
                    return known
                if len(parsed_texts) >= PARSED_KEPT:
                    parsed_texts.clear()
                known = parsed_texts[value] = parse(value)
                return known
            return usual(value)

        def parse(value: str) -> Any:
            if len(value) == 26 and value[10] == " " and value[19] == ".":
                # As SQLAlchemy writes it here ("2026-01-02 03:04:05.000006", naive, in UTC):
                # parsed with its offset, no replace() (eight times the parse).
                try:
                    return datetime.fromisoformat(value + "+00:00")
                except ValueError:
                    pass
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                return usual(value)
            if parsed.tzinfo is None:
                return parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC)

        return process


#: Stored instants whose parsed value the SQLite reader remembers (``UTCDateTime``), a column
#: at a time. What repeats is mostly near (a version's end and its successor's start, the open
#: end): at 1M chunks 1,024 parse 49 texts more than 4,096 did in 166,736 (0.03 %), and hold a
#: quarter of its 0.8 MiB (issue 38's heap, round 8).
PARSED_KEPT = 1024

JSONType = JSON().with_variant(JSONB(), "postgresql")
#: Autoincrementing 64-bit key (SQLite only autoincrements INTEGER PRIMARY KEY).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    """Declarative base of the reconciler's tables."""


class DocumentRow(Base):
    """One row per document version; the registry chunk payloads are derived from."""

    __tablename__ = "documents"
    __table_args__ = (
        UniqueConstraint("source", "source_key", name="uq_documents_source_key"),
        # The rows' read order (``iter_documents``, ``iter_expected``: family, version, id):
        # a whole stream of the table needs no sort (issue 38).
        Index("ix_documents_read_order", "doc_family_id", "doc_version", "doc_id"),
    )

    doc_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    source: Mapped[str] = mapped_column(String(128), index=True)
    source_key: Mapped[str] = mapped_column(String(512))
    doc_family_id: Mapped[str] = mapped_column(String(512))
    doc_version: Mapped[int] = mapped_column(Integer)
    version_state: Mapped[str] = mapped_column(String(16), index=True)
    superseded_by: Mapped[str | None] = mapped_column(String(512))
    # (indexed: serve plans a job at the next boundary after every run)
    effective_from: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    effective_to: Mapped[datetime] = mapped_column(UTCDateTime(), default=OPEN_END, index=True)
    doc_class: Mapped[str | None] = mapped_column(String(128))
    title: Mapped[str | None] = mapped_column(Text)
    source_hash: Mapped[str | None] = mapped_column(String(80))
    quarantined: Mapped[bool] = mapped_column(Boolean, default=False)
    quarantine_reason: Mapped[str | None] = mapped_column(String(64))
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    ingested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class IdentityRow(Base):
    """Source-native key -> stable family id; survives moves, renames and new versions."""

    __tablename__ = "identity_map"

    source: Mapped[str] = mapped_column(String(128), primary_key=True)
    source_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    doc_family_id: Mapped[str] = mapped_column(String(512), index=True)
    content_hash: Mapped[str | None] = mapped_column(String(80))
    #: Where the connector found it (a note's path); a file that no longer parses is matched
    #: back to its identity through this.
    path: Mapped[str | None] = mapped_column(String(1024))
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (Index("ix_identity_map_source_path", "source", "path"),)


class SourceStatusRow(Base):
    """Per-source reconciliation status (the TTL clock of polling sources)."""

    __tablename__ = "source_status"

    source: Mapped[str] = mapped_column(String(128), primary_key=True)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(Text)
    documents_seen: Mapped[int | None] = mapped_column(Integer)
    #: Failed reads, ever (the source_errors counter).
    failures: Mapped[int] = mapped_column(Integer, default=0)


class RunRow(Base):
    """One reconciliation (or ingestion) run."""

    __tablename__ = "runs"

    run_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16))
    actor: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    forced: Mapped[bool] = mapped_column(Boolean, default=False)
    shard: Mapped[str | None] = mapped_column(String(32))
    #: The scheduled job (full, ttl, dates) or the command (check, apply, repair, ...).
    job: Mapped[str | None] = mapped_column(String(32), index=True)
    #: Checks the run evaluated, comma-separated (metrics take each check's latest run).
    checks: Mapped[str | None] = mapped_column(String(128))
    duration_seconds: Mapped[float | None] = mapped_column(Float)
    chunks_scanned: Mapped[int] = mapped_column(Integer, default=0)
    rows_written: Mapped[int] = mapped_column(Integer, default=0)
    payload_writes: Mapped[int] = mapped_column(Integer, default=0)
    points_written: Mapped[int] = mapped_column(Integer, default=0)
    reingest_requests: Mapped[int] = mapped_column(Integer, default=0)
    counts: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)


class FindingRow(Base):
    """A finding recorded by a run."""

    __tablename__ = "findings"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), index=True)
    check: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(64))
    severity: Mapped[str] = mapped_column(String(16))
    family: Mapped[str | None] = mapped_column(String(512))
    doc_id: Mapped[str | None] = mapped_column(String(512), index=True)
    expected: Mapped[Any] = mapped_column(JSONType)
    actual: Mapped[Any] = mapped_column(JSONType)
    action: Mapped[str | None] = mapped_column(Text)
    #: Still true after the run (not repaired, or a condition a write cannot clear).
    outstanding: Mapped[bool] = mapped_column(Boolean, default=True)


class AuditRow(Base):
    """Append-only, hash-chained audit log of every write (table and payload)."""

    __tablename__ = "audit_log"

    seq: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    actor: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    target_type: Mapped[str] = mapped_column(String(16))
    target: Mapped[str] = mapped_column(String(512), index=True)
    before: Mapped[Any] = mapped_column(JSONType)
    after: Mapped[Any] = mapped_column(JSONType)
    #: Unique: two appenders that read the same head cannot both extend it (no fork).
    prev_hash: Mapped[str] = mapped_column(String(64), unique=True)
    entry_hash: Mapped[str] = mapped_column(String(64), unique=True)


class AuditDocumentRow(Base):
    """Which documents a ``payload_page`` entry (one batch's payload intents) is about: an
    entry found by its target, as an entry about one document is by ``audit_log.target``. An
    index, not a record: the entry's hashed body names the same documents."""

    __tablename__ = "audit_documents"

    target: Mapped[str] = mapped_column(String(512), primary_key=True)
    #: The entry's ``audit_log.seq``.
    seq: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)


class AuditHeadRow(Base):
    """The audit chain's head, one row: appends lock it (serialised across processes and
    shards) and move it; ``audit verify`` checks the log still ends there (nothing cut off)."""

    __tablename__ = "audit_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    entry_hash: Mapped[str] = mapped_column(String(64))
    entries: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class OutboxRow(Base):
    """Re-ingest requests the ingestion pipeline reads (the reconciler never embeds)."""

    __tablename__ = "reingest_outbox"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    doc_id: Mapped[str] = mapped_column(String(512), index=True)
    source: Mapped[str] = mapped_column(String(128))
    source_key: Mapped[str] = mapped_column(String(512))
    reason: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[str | None] = mapped_column(String(36))
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    consumed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(Text)


class DeclarationRow(Base):
    """A person's declaration (``reconciler declare``): a declared source of family and
    supersession every run reads; revoked only by the rollback of the run that recorded it."""

    __tablename__ = "declarations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: ``supersede`` (``doc_id`` superseded by the document ``target``) or ``family``
    #: (``doc_id`` in the family ``target``).
    kind: Mapped[str] = mapped_column(String(16))
    doc_id: Mapped[str] = mapped_column(String(512), index=True)
    target: Mapped[str] = mapped_column(String(512), index=True)
    declared_by: Mapped[str] = mapped_column(String(256))
    declared_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    evidence: Mapped[str | None] = mapped_column(Text)
    score: Mapped[float | None] = mapped_column(Float)
    proposal: Mapped[str | None] = mapped_column(String(64))
    run_id: Mapped[str | None] = mapped_column(String(36), index=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    revoked_by: Mapped[str | None] = mapped_column(String(36))


class LeaseRow(Base):
    """A single-runner lease per shard (SQLite; PostgreSQL uses advisory locks)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class WatchMarkRow(Base):
    """How far ``serve``'s watch of one source has been reconciled: the last commit (git) or
    the instant up to which the vault's changes were applied; written only after the apply
    that used it has committed, so a restart resumes from it without a full scan."""

    __tablename__ = "watch_marks"

    source: Mapped[str] = mapped_column(String(128), primary_key=True)
    #: The git commit reconciled, a polled source's probe token (``app.resuming.mark_of``),
    #: or ``None`` for a vault (its mark is ``changed_until``).
    mark: Mapped[str | None] = mapped_column(String(128))
    #: The source's own date of the newest change reconciled (mtime, commit time).
    changed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    reconciled_at: Mapped[datetime] = mapped_column(UTCDateTime())


class PlanRow(Base):
    """A saved plan: the writes a refused run held back (waiting for a person's approval,
    ``reconciler apply --plan ID``), or the writes a forced or approved run set out to make
    (so the runner that finds it dead finishes them under the same authorization)."""

    __tablename__ = "plans"

    plan_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    #: The run that computed it (a refused run; a forced one).
    run_id: Mapped[str] = mapped_column(String(36), index=True)
    shard: Mapped[str] = mapped_column(String(32))
    #: ``pending`` (waiting for approval), ``applying`` (its run writes it), ``applied``,
    #: ``stale`` (the stores moved past it), ``expired``.
    status: Mapped[str] = mapped_column(String(16), index=True)
    #: Who may write it: ``approval`` (a person's, pending until given) or ``force``.
    authorized_by: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    #: The run that applies (or applied) it: the approving run, or the forced run itself.
    applied_run: Mapped[str | None] = mapped_column(String(36), index=True)
    applied_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: The audit head when it was computed (what the stores were at).
    audit_head: Mapped[str] = mapped_column(String(64), default="")
    #: sha256 of the body: the same held writes over the same stores are saved once.
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    documents: Mapped[int] = mapped_column(Integer, default=0)
    hidden: Mapped[int] = mapped_column(Integer, default=0)
    #: The writes per document, with the rows' values before and the chunks' fingerprints.
    body: Mapped[dict[str, Any]] = mapped_column(JSONType)
