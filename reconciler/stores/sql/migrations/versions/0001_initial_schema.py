"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 12:31:54.697588
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "audit_log",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("target_type", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=512), nullable=False),
        sa.Column(
            "before",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "after",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("entry_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("entry_hash"),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_log_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_log_target"), ["target"], unique=False)

    op.create_table(
        "documents",
        sa.Column("doc_id", sa.String(length=512), nullable=False),
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("source_key", sa.String(length=512), nullable=False),
        sa.Column("doc_family_id", sa.String(length=512), nullable=False),
        sa.Column("doc_version", sa.Integer(), nullable=False),
        sa.Column("version_state", sa.String(length=16), nullable=False),
        sa.Column("superseded_by", sa.String(length=512), nullable=True),
        sa.Column("effective_from", sa.DateTime(timezone=True), nullable=True),
        sa.Column("effective_to", sa.DateTime(timezone=True), nullable=False),
        sa.Column("doc_class", sa.String(length=128), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("source_hash", sa.String(length=80), nullable=True),
        sa.Column("quarantined", sa.Boolean(), nullable=False),
        sa.Column("quarantine_reason", sa.String(length=64), nullable=True),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("doc_id"),
        sa.UniqueConstraint("source", "source_key", name="uq_documents_source_key"),
    )
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.create_index(
            "ix_documents_family_version", ["doc_family_id", "doc_version"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_documents_source"), ["source"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_documents_version_state"), ["version_state"], unique=False
        )

    op.create_table(
        "family_status",
        sa.Column("doc_family_id", sa.String(length=512), nullable=False),
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("last_reconciled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_quarantined", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("doc_family_id"),
    )
    with op.batch_alter_table("family_status", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_family_status_source"), ["source"], unique=False)

    op.create_table(
        "identity_map",
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("source_key", sa.String(length=512), nullable=False),
        sa.Column("doc_family_id", sa.String(length=512), nullable=False),
        sa.Column("content_hash", sa.String(length=80), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", "source_key"),
    )
    with op.batch_alter_table("identity_map", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_identity_map_doc_family_id"), ["doc_family_id"], unique=False
        )

    op.create_table(
        "reingest_outbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("doc_id", sa.String(length=512), nullable=False),
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("source_key", sa.String(length=512), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("consumed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reingest_outbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reingest_outbox_doc_id"), ["doc_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_reingest_outbox_status"), ["status"], unique=False)

    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("shard", sa.String(length=32), nullable=True),
        sa.Column(
            "counts",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_started_at"), ["started_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_status"), ["status"], unique=False)

    op.create_table(
        "source_status",
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("documents_seen", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("source"),
    )
    op.create_table(
        "findings",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("check", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("family", sa.String(length=512), nullable=True),
        sa.Column("doc_id", sa.String(length=512), nullable=True),
        sa.Column(
            "expected",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "actual",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("action", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.run_id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_findings_doc_id"), ["doc_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_findings_run_id"), ["run_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_findings_run_id"))
        batch_op.drop_index(batch_op.f("ix_findings_doc_id"))

    op.drop_table("findings")
    op.drop_table("source_status")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_status"))
        batch_op.drop_index(batch_op.f("ix_runs_started_at"))

    op.drop_table("runs")
    with op.batch_alter_table("reingest_outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reingest_outbox_status"))
        batch_op.drop_index(batch_op.f("ix_reingest_outbox_doc_id"))

    op.drop_table("reingest_outbox")
    with op.batch_alter_table("identity_map", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_identity_map_doc_family_id"))

    op.drop_table("identity_map")
    with op.batch_alter_table("family_status", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_family_status_source"))

    op.drop_table("family_status")
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_documents_version_state"))
        batch_op.drop_index(batch_op.f("ix_documents_source"))
        batch_op.drop_index("ix_documents_family_version")

    op.drop_table("documents")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_log_target"))
        batch_op.drop_index(batch_op.f("ix_audit_log_run_id"))

    op.drop_table("audit_log")
