"""audit chain: a head row that serialises appends, and no two entries after one predecessor

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 14:30:00
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from reconciler.errors import SchemaError

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS = "0" * 64


def upgrade() -> None:
    bind = op.get_bind()
    forks = bind.execute(
        sa.text("SELECT prev_hash, COUNT(*) FROM audit_log GROUP BY prev_hash HAVING COUNT(*) > 1")
    ).fetchall()
    if forks:
        prev, count = forks[0]
        raise SchemaError(
            f"the audit log has forked: {count} entries follow {prev[:12]} ({len(forks)} fork(s) "
            "in all), written by runners that appended at once, which this version prevents. "
            "`reconciler audit verify` with the previous version lists them. Keep the log as "
            "evidence (e.g. CREATE TABLE audit_log_forked AS SELECT * FROM audit_log), then "
            "DELETE FROM audit_log and run `reconciler init` again: a new chain starts."
        )
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("entry_hash", sa.String(length=64), nullable=False),
        sa.Column("entries", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    last = bind.execute(
        sa.text("SELECT entry_hash FROM audit_log ORDER BY seq DESC LIMIT 1")
    ).scalar()
    total = bind.execute(sa.text("SELECT COUNT(*) FROM audit_log")).scalar() or 0
    now = datetime.now(UTC)
    op.bulk_insert(
        head,
        [
            {
                "id": 1,
                "entry_hash": last or GENESIS,
                "entries": total,
                "updated_at": now.replace(tzinfo=None) if bind.dialect.name == "sqlite" else now,
            }
        ],
    )
    with op.batch_alter_table("audit_log") as batch:
        batch.create_unique_constraint("uq_audit_log_prev_hash", ["prev_hash"])


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_constraint("uq_audit_log_prev_hash", type_="unique")
    op.drop_table("audit_head")
