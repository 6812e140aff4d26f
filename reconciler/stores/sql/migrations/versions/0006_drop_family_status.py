"""drop family_status: a table no code ever read or wrote

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("family_status") as batch:
        batch.drop_index("ix_family_status_source")
    op.drop_table("family_status")


def downgrade() -> None:
    op.create_table(
        "family_status",
        sa.Column("doc_family_id", sa.String(length=512), nullable=False),
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("last_reconciled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_quarantined", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("doc_family_id"),
    )
    with op.batch_alter_table("family_status") as batch:
        batch.create_index("ix_family_status_source", ["source"], unique=False)
