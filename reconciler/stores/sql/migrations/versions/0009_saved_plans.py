"""plans: the saved plans of refused runs (approved by `reconciler apply --plan ID`) and of
forced runs (finished under the same authorization when their process died)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 23:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "plans",
        sa.Column("plan_id", sa.String(length=36), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("shard", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("authorized_by", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("applied_run", sa.String(length=36), nullable=True),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("audit_head", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("hidden", sa.Integer(), nullable=False),
        sa.Column("body", json_type, nullable=False),
        sa.PrimaryKeyConstraint("plan_id"),
    )
    op.create_index("ix_plans_run_id", "plans", ["run_id"], unique=False)
    op.create_index("ix_plans_status", "plans", ["status"], unique=False)
    op.create_index("ix_plans_applied_run", "plans", ["applied_run"], unique=False)
    op.create_index("ix_plans_fingerprint", "plans", ["fingerprint"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_plans_fingerprint", table_name="plans")
    op.drop_index("ix_plans_applied_run", table_name="plans")
    op.drop_index("ix_plans_status", table_name="plans")
    op.drop_index("ix_plans_run_id", table_name="plans")
    op.drop_table("plans")
