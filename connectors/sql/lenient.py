"""SQLite's date and time columns read leniently: a value its text does not parse is that
value, not the end of the read.

SQLite stores a ``DATETIME`` or ``DATE`` column's values as text (or as anything else: it
checks no type), and SQLAlchemy parses each as it fetches the row. One value it cannot parse
(``"yesterday"``, ``"2024-13-01"``, a number) raised ``ValueError`` out of the whole scan, and
of every probe of a watched ``updated_at``: the source was unreadable until someone fixed the
cell. Read through ``lenient``, such a value comes back as it is stored, and the record rules
take it as an invalid field of that row (absent, with a problem), as any other.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Date, DateTime, String, Time, type_coerce
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeDecorator


class _Lenient(TypeDecorator[Any]):
    """A date or time type whose value is parsed as the type parses it, or kept as stored
    when it does not parse."""

    impl = String
    cache_ok = True

    def __init__(self, original: Any) -> None:
        super().__init__()
        self.original = original

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if not isinstance(value, str):
            return value
        parse = self.original.result_processor(dialect, None)
        try:
            return parse(value) if parse is not None else value
        except (ValueError, TypeError):
            return value


def lenient(conn: Connection, column: Any) -> Any:
    """``column`` as a scan or a probe selects it: on SQLite, a date or time column read
    leniently (module docstring); anything else as it is."""
    if conn.dialect.name != "sqlite" or not isinstance(column.type, Date | DateTime | Time):
        return column
    return type_coerce(column, _Lenient(column.type))
