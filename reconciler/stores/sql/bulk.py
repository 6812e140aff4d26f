"""Many rows inserted at once on SQLite straight through the driver (``insert_through_driver``):
one ``executemany`` of tuples, each value through its column's bind processor as SQLAlchemy
would (the same text stored), without Core's compiled-parameter work a row (a declare of
100,000 proposals inserts 300,000 audit entries and 300,000 findings: a third of the
inserts' time was that work). Another dialect goes Core's way (the caller's statement).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.orm import Session

#: A column's bind processor (``None``: the value is bound as it is).
_Processor = Callable[[Any], Any] | None


def insert_through_driver(
    session: Session,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    as_is: Mapping[str, str] | None = None,
) -> bool:
    """Insert ``rows`` (each the same keys: column names, or ``as_is``'s keys, which name the
    column a value is bound to with no processor: a JSON column's canonical text, stored as
    it is) in one ``executemany`` in the session's transaction; ``False`` (nothing done) on a
    dialect other than SQLite."""
    connection = session.connection()
    dialect = connection.dialect
    if dialect.name != "sqlite" or dialect.paramstyle != "qmark":
        return False
    if not rows:
        return True
    as_is = as_is or {}
    keys = list(rows[0])
    columns = [table.c[as_is.get(key, key)] for key in keys]
    if any(c.default is not None for c in table.c if c not in columns):
        return False  # (a default Core would fill in a row: its way)
    processors: list[_Processor] = [
        None if key in as_is else column.type.dialect_impl(dialect).bind_processor(dialect)
        for key, column in zip(keys, columns, strict=True)
    ]
    quote = dialect.identifier_preparer.quote
    sql = (
        f"INSERT INTO {quote(table.name)} ({', '.join(quote(c.name) for c in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    # (a batch's rows share values, the instant above all: the last one processed is reused
    # when the next is the same object)
    last: list[list[Any]] = [[_NONE, None] for _ in keys]
    params = [
        tuple(
            _processed(row[key], processor, seen)
            for key, processor, seen in zip(keys, processors, last, strict=True)
        )
        for row in rows
    ]
    connection.exec_driver_sql(sql, params)
    return True


#: Nothing seen yet.
_NONE = object()


def _processed(value: Any, processor: _Processor, last: list[Any]) -> Any:
    if processor is None:
        return value
    if value is not last[0]:
        last[0], last[1] = value, processor(value)
    return last[1]
