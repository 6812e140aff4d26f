"""identity map: the path (or record key) each identity was last seen at

A document whose file can no longer be parsed keeps its identity: the engine looks up the
identity last seen at that path instead of guessing one from the path.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 12:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("identity_map") as batch:
        batch.add_column(sa.Column("path", sa.String(length=1024), nullable=True))
        batch.create_index("ix_identity_map_source_path", ["source", "path"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("identity_map") as batch:
        batch.drop_index("ix_identity_map_source_path")
        batch.drop_column("path")
