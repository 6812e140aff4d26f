"""declarations: a person's decisions of family and supersession (``reconciler declare``)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "declarations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("doc_id", sa.String(length=512), nullable=False),
        sa.Column("target", sa.String(length=512), nullable=False),
        sa.Column("declared_by", sa.String(length=256), nullable=False),
        sa.Column("declared_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("proposal", sa.String(length=64), nullable=True),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(length=36), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("declarations") as batch:
        batch.create_index("ix_declarations_doc_id", ["doc_id"], unique=False)
        batch.create_index("ix_declarations_target", ["target"], unique=False)
        batch.create_index("ix_declarations_declared_at", ["declared_at"], unique=False)
        batch.create_index("ix_declarations_run_id", ["run_id"], unique=False)
        batch.create_index("ix_declarations_revoked_at", ["revoked_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("declarations") as batch:
        batch.drop_index("ix_declarations_revoked_at")
        batch.drop_index("ix_declarations_run_id")
        batch.drop_index("ix_declarations_declared_at")
        batch.drop_index("ix_declarations_target")
        batch.drop_index("ix_declarations_doc_id")
    op.drop_table("declarations")
