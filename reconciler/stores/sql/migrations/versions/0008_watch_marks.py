"""watch_marks: how far serve's watch of each source has been reconciled; documents'
effective_from and effective_to indexed (serve plans a job at the next boundary)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 20:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "watch_marks",
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("mark", sa.String(length=128), nullable=True),
        sa.Column("changed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reconciled_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source"),
    )
    with op.batch_alter_table("documents") as batch:
        batch.create_index("ix_documents_effective_from", ["effective_from"], unique=False)
        batch.create_index("ix_documents_effective_to", ["effective_to"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_index("ix_documents_effective_to")
        batch.drop_index("ix_documents_effective_from")
    op.drop_table("watch_marks")
