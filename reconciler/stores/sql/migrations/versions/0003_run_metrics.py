"""run metrics: job, checks, counts as columns; outstanding findings; source failures

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 13:05:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUN_COUNTS = (
    "chunks_scanned",
    "rows_written",
    "payload_writes",
    "points_written",
    "reingest_requests",
)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("job", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("checks", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("duration_seconds", sa.Float(), nullable=True))
        for name in _RUN_COUNTS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
        batch.create_index("ix_runs_job", ["job"], unique=False)
    with op.batch_alter_table("findings") as batch:
        batch.add_column(
            sa.Column("outstanding", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    with op.batch_alter_table("source_status") as batch:
        batch.add_column(sa.Column("failures", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("source_status") as batch:
        batch.drop_column("failures")
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("outstanding")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_job")
        for name in (*reversed(_RUN_COUNTS), "duration_seconds", "checks", "job"):
            batch.drop_column(name)
