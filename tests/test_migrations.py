"""The Alembic migrations build exactly the schema the SQLAlchemy models describe."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from reconciler.stores.schema import Base
from reconciler.stores.sql import SqlDocumentTable


def test_migrations_match_the_models(table: SqlDocumentTable) -> None:
    with table.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert differences == []
