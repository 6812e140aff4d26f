"""The document table over SQLAlchemy: SQLite (embedded default) and PostgreSQL.

``SqlDocumentTable`` implements the ``DocumentTable`` port (``reconciler.ports``) as one class
made of small repositories (it inherits their methods: none is declared twice), each over the
same SQLAlchemy engine and each owning its own transactions:

==============================  ==========================================================
``sql.connection``              ``make_engine`` (SQLite pragmas) and driver faults mapped to
                                ``StoreFault``, once, at the edge
``sql.migrating``               ``SqlSchema``: the Alembic revision check on start, ``init``
``sql.documents``               ``SqlDocuments``: document rows, identity map, source status
``sql.runlog``                  ``SqlRunLog``: runs from start to end, and their findings
``sql.outbox``                  ``SqlOutbox``: re-ingest requests, and the applier's one
                                transaction of row updates + requests + audit entries
``stores.audit``                ``SqlAuditLog``: the hash-chained audit log
``sql.metrics``                 ``SqlMetrics``: the Prometheus snapshot and status counts
``sql.declarations``            ``SqlDeclarations``: a person's declarations, recorded and
                                revoked with their audit entries
``sql.rekeys``                  ``SqlRekeys``: documents given new ids in place (a re-keying)
``sql.plans``                   ``SqlPlans``: saved plans, waiting for approval or being
                                applied under an authorization
==============================  ==========================================================

The ORM models are in ``reconciler.stores.sql.schema``, the migrations in ``stores/sql/migrations``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from reconciler.model import RowChange, fields_from_json
from reconciler.stores.sql.audit import SqlAuditLog
from reconciler.stores.sql.connection import TableBounds, connect_args, make_engine, now
from reconciler.stores.sql.declarations import SqlDeclarations
from reconciler.stores.sql.documents import SqlDocuments, document_from_row
from reconciler.stores.sql.metrics import SqlMetrics
from reconciler.stores.sql.migrating import SchemaStatus, SqlSchema, _alembic_config
from reconciler.stores.sql.outbox import SqlOutbox
from reconciler.stores.sql.plans import SqlPlans
from reconciler.stores.sql.rekeys import SqlRekeys
from reconciler.stores.sql.runlog import SqlRunLog

if TYPE_CHECKING:
    from reconciler.ports import DocumentTable

__all__ = [
    "RowChange",
    "SchemaStatus",
    "SqlAuditLog",
    "SqlDeclarations",
    "SqlDocumentTable",
    "SqlDocuments",
    "SqlMetrics",
    "SqlOutbox",
    "SqlPlans",
    "SqlRekeys",
    "SqlRunLog",
    "SqlSchema",
    "TableBounds",
    "_alembic_config",
    "document_from_row",
    "fields_from_json",
    "make_engine",
    "now",
]


class SqlDocumentTable(
    SqlDocuments,
    SqlRunLog,
    SqlOutbox,
    SqlAuditLog,
    SqlMetrics,
    SqlSchema,
    SqlDeclarations,
    SqlRekeys,
    SqlPlans,
):
    """The document table, identity map, run log, outbox, audit log, declarations and saved
    plans in one SQL database.

    It is made of the repositories: each method of the port is its repository's own, declared
    there once (``table.start_run`` is ``SqlRunLog.start_run``), and every repository works
    over the same engine, each owning its own transactions.
    """

    def __init__(self, engine: Engine, *, bounds: TableBounds | None = None) -> None:
        # (what each repository keeps: the engine, and a session factory over it)
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        #: ``psycopg.connect``'s bounds for a connection made outside the pool (the lease's).
        self.connect_args = connect_args(engine.url.drivername, bounds or TableBounds())

    @classmethod
    def from_url(cls, url: str, *, bounds: TableBounds | None = None) -> SqlDocumentTable:
        """Open the database at ``url``, every call bounded by ``bounds`` (no schema check;
        call ``ensure_schema``)."""
        return cls(make_engine(url, bounds=bounds), bounds=bounds)

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()


if TYPE_CHECKING:  # the table implements the port (checked by mypy, costs nothing at run time)
    _implements: type[DocumentTable] = SqlDocumentTable
