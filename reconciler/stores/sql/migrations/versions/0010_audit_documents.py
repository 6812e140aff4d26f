"""audit_documents: the documents of each payload_page entry (one batch's payload intents in
one entry), so an entry is still found by its target

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05 01:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_documents",
        sa.Column("target", sa.String(length=512), nullable=False),
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.PrimaryKeyConstraint("target", "seq"),
    )


def downgrade() -> None:
    op.drop_table("audit_documents")
