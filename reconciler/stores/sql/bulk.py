"""Many rows inserted at once on SQLite straight through the driver (``insert_through_driver``):
one ``executemany`` of tuples, each value through its column's bind processor as SQLAlchemy
would (the same text stored), without Core's compiled-parameter work a row (a declare of
100,000 proposals inserts 300,000 audit entries and 300,000 findings: a third of the
inserts' time was that work). Another dialect goes Core's way (the caller's statement). The audit's append sends its few
statements the same way (``driver_connection``, ``bound``, ``insert_returning_through_driver``):
on SQLite, Core's compiling and parameter work was most of an append's CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from sqlalchemy import Column, Connection, Dialect, Table
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
    if not rows:
        return driver_connection(session) is not None
    prepared = _prepared(session, table, list(rows[0]), as_is or {}, "")
    if prepared is None:
        return False
    connection, sql, params = prepared
    with _page_cache(connection, len(rows)):
        connection.exec_driver_sql(sql, params(rows))
    return True


#: Rows from which an insert's page cache is widened (``_page_cache``), and to how much (KiB).
_MANY_ROWS = 10_000
_BULK_CACHE_KIB = 256 * 1024


@contextmanager
def _page_cache(connection: Connection, rows: int) -> Iterator[None]:
    """SQLite's page cache widened for one insert of many rows, then set back: a declare of
    100,000 proposals inserts 300,000 audit entries and 300,000 findings at random places in
    their indexes' b-trees (hashes, ids), which a 2 MB cache reads back from the file page by
    page (system time). Memory only; durability (journal, synchronous) is untouched."""
    if rows < _MANY_ROWS:
        yield
        return
    before = connection.exec_driver_sql("PRAGMA cache_size").scalar_one()
    connection.exec_driver_sql(f"PRAGMA cache_size=-{_BULK_CACHE_KIB:d}")
    try:
        yield
    finally:
        connection.exec_driver_sql(f"PRAGMA cache_size={int(before):d}")


def update_through_driver(
    session: Session, table: Table, by: str, key: str, rows: Sequence[Mapping[str, Any]]
) -> bool:
    """``UPDATE table SET … WHERE <by> = ?`` of ``rows`` (each the same keys: the columns
    set, and ``key``, the value of the column ``by`` that selects the row) in one
    ``executemany`` in the session's transaction, each value through its column's bind
    processor, as Core's ``update(table).where(table.c[by] == bindparam(key))`` executed with
    ``rows`` binds them; ``False`` (nothing done) on a dialect other than SQLite, or where Core
    would set a column of its own (``onupdate``)."""
    connection = driver_connection(session)
    if connection is None or not rows:
        return connection is not None
    keys = tuple(name for name in rows[0] if name != key)
    statement = _update_statement(connection.dialect, table, keys, by)
    if statement is None:
        return False
    sql, processors = statement
    connection.exec_driver_sql(sql, _bound(rows, itemgetter(*keys, key), processors))
    return True


@functools.lru_cache(maxsize=64)
def _update_statement(
    dialect: Dialect, table: Table, keys: tuple[str, ...], by: str
) -> tuple[str, list[_Processor]] | None:
    """``update_through_driver``'s SQL and bind processors (the columns set, then ``by``'s),
    made once a dialect, table and set of columns."""
    if any(c.onupdate is not None for c in table.c if c.key not in keys):
        return None  # (a column Core would set too: its way)
    columns = [*(table.c[name] for name in keys), table.c[by]]
    processors: list[_Processor] = [
        column.type.dialect_impl(dialect).bind_processor(dialect) for column in columns
    ]
    quote = dialect.identifier_preparer.quote
    sets = ", ".join(f"{quote(c.name)}=?" for c in columns[:-1])
    sql = f"UPDATE {quote(table.name)} SET {sets} WHERE {quote(columns[-1].name)}=?"
    return sql, processors


def insert_returning_through_driver(
    session: Session,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    returning: str,
    *,
    as_is: Mapping[str, str] | None = None,
) -> list[Any] | None:
    """``insert_through_driver``, a statement a row (SQLite returns no rows from an
    ``executemany``), and each row's value of the column ``returning`` as the database gave
    it, in the order of ``rows``; ``None`` (nothing done) on another dialect or no rows."""
    if not rows:
        return None
    prepared = _prepared(session, table, list(rows[0]), as_is or {}, returning)
    if prepared is None:
        return None
    connection, sql, params = prepared
    return [connection.exec_driver_sql(sql, row).scalar_one() for row in params(rows)]


def driver_connection(session: Session) -> Connection | None:
    """The session's connection when it is SQLite's driver with ``?`` parameters, where this
    module's statements go straight to it (``None`` on any other)."""
    connection = session.connection()
    dialect = connection.dialect
    if dialect.name != "sqlite" or dialect.paramstyle != "qmark":
        return None
    return connection


def bound(connection: Connection, column: Column[Any], value: Any) -> Any:
    """``value`` as the column's type binds it on the connection's dialect (the text Core
    would store)."""
    dialect = connection.dialect
    processor = column.type.dialect_impl(dialect).bind_processor(dialect)
    return value if processor is None else processor(value)


def _prepared(
    session: Session, table: Table, keys: list[str], as_is: Mapping[str, str], returning: str
) -> tuple[Connection, str, Callable[[Sequence[Mapping[str, Any]]], list[tuple[Any, ...]]]] | None:
    """The INSERT of ``keys`` into ``table`` for SQLite's driver (``RETURNING`` the column
    named, if any), and what turns rows into its parameters; ``None`` where Core must do it
    (another dialect, or a default Core would fill in)."""
    connection = driver_connection(session)
    if connection is None:
        return None
    statement = _statement(
        connection.dialect, table, tuple(keys), tuple(sorted(as_is.items())), returning
    )
    if statement is None:
        return None
    sql, processors = statement

    if not any(processors) and len(keys) > 1:  # (values bound as they are: taken as a tuple)
        return connection, sql, lambda rows: list(map(itemgetter(*keys), rows))

    get = itemgetter(*keys) if len(keys) > 1 else (lambda row: (row[keys[0]],))
    return connection, sql, lambda rows: _bound(rows, get, processors)


def _bound(
    rows: Sequence[Mapping[str, Any]],
    get: Callable[[Mapping[str, Any]], Sequence[Any]],
    processors: Sequence[_Processor],
) -> list[tuple[Any, ...]]:
    """Each row's values (``get``), those of a column with a processor through it."""
    # (the columns bound through a processor, by place; the others are taken as they are)
    through = [(at, processor) for at, processor in enumerate(processors) if processor is not None]
    # (a batch's rows share values, the instant above all: the last one processed is reused
    # when the next is the same object)
    last: list[list[Any]] = [[_NONE, None] for _ in through]
    out: list[tuple[Any, ...]] = []
    for row in rows:
        values = list(get(row))
        for (at, processor), seen in zip(through, last, strict=True):
            values[at] = _processed(values[at], processor, seen)
        out.append(tuple(values))
    return out


@functools.lru_cache(maxsize=64)
def _statement(
    dialect: Dialect,
    table: Table,
    keys: tuple[str, ...],
    as_is_items: tuple[tuple[str, str], ...],
    returning: str,
) -> tuple[str, list[_Processor]] | None:
    """``_prepared``'s SQL and bind processors, made once a dialect, table and keys."""
    as_is = dict(as_is_items)
    columns = [table.c[as_is.get(key, key)] for key in keys]
    named = {column.key for column in columns}
    if any(c.default is not None for c in table.c if c.key not in named):
        return None  # (a default Core would fill in a row: its way)
    processors: list[_Processor] = [
        None if key in as_is else column.type.dialect_impl(dialect).bind_processor(dialect)
        for key, column in zip(keys, columns, strict=True)
    ]
    quote = dialect.identifier_preparer.quote
    sql = (
        f"INSERT INTO {quote(table.name)} ({', '.join(quote(c.name) for c in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    if returning:
        sql += f" RETURNING {quote(table.c[returning].name)}"
    return sql, processors


#: Nothing seen yet.
_NONE = object()


def _processed(value: Any, processor: _Processor, last: list[Any]) -> Any:
    if processor is None:
        return value
    if value is not last[0]:
        last[0], last[1] = value, processor(value)
    return last[1]
