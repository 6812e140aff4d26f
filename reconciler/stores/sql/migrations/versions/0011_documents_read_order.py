"""documents: the index of the rows' read order (family, version, id), so a stream of the
table in that order needs no sort (SQLite sorted each family's versions by id in a temporary
B-tree: 0.05 s of the check's table pass at 100,000 rows)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # (the new index first: the old one serves reads until the new one is there)
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.create_index(
            "ix_documents_read_order", ["doc_family_id", "doc_version", "doc_id"], unique=False
        )
        batch_op.drop_index("ix_documents_family_version")


def downgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.create_index(
            "ix_documents_family_version", ["doc_family_id", "doc_version"], unique=False
        )
        batch_op.drop_index("ix_documents_read_order")
