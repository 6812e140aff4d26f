"""The document table's contract (``reconciler.testing.table_contract``) on each adapter the
``table`` fixture yields (SQLite and PostgreSQL); a new document table adds itself there."""

from reconciler.testing.table_contract import *  # noqa: F403 (its tests, for pytest to collect)
