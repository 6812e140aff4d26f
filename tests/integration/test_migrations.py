"""The Alembic migrations build exactly the schema the SQLAlchemy models describe."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from reconciler.stores.sql import SqlDocumentTable, _alembic_config
from reconciler.stores.sql.migrating import plain_head
from reconciler.stores.sql.schema import Base


def test_migrations_match_the_models(table: SqlDocumentTable) -> None:
    with table.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert differences == []


def test_the_head_read_without_alembic_is_alembic_s() -> None:
    """Opening the table skips Alembic when the database is at the head (start-up time):
    the head read from the version files must be the one Alembic computes."""
    assert plain_head() == ScriptDirectory.from_config(_alembic_config()).get_current_head()
