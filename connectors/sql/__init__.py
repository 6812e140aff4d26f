"""The system of record for a document-control table in any SQLAlchemy database
(docs/connectors/sql.md): ``SqlTableSource`` (``source.py``) reads the table, ``options``
declares the ``[[sources]]`` entry."""

from connectors.sql.options import LOGICAL_FIELDS, SqlOptions, SqlSettings
from connectors.sql.source import SqlTableSource

__all__ = ["LOGICAL_FIELDS", "SqlOptions", "SqlSettings", "SqlTableSource"]
