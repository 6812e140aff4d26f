"""The sql connector itself, ``SqlTableSource``: it reads a document-control table, mapped
column by column, and never writes to it.

Many teams already keep "which version is in force" in a table of their DMS or an ERP; the
config maps its columns to the logical fields (``options``, ``docs/connectors/sql.md``). Rows
carry the same logical fields as the HTTP registry's records and are read with the same rules
(``connectors.records``): an invalid field (on SQLite, a date that does not parse: ``lenient``)
is taken as absent with a problem; a row whose body cannot be read is that row's problem.

Rows are streamed (``yield_per``), the rows of one id in the order of their values. The filter
(column -> value(s)) is compiled to bound parameters: no SQL text from the config ever runs.

Failures: no database -> ``SourceUnavailable``; no table, column or permission to read ->
``ConnectorConfigError``; the connection drops part-way -> the rows read so far,
``complete=False`` and an ``UNREADABLE`` problem (none -> unavailable)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    Date,
    DateTime,
    Integer,
    MetaData,
    Numeric,
    Table,
    create_engine,
    extract,
    func,
    select,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    NoSuchModuleError,
    NoSuchTableError,
    ProgrammingError,
    SQLAlchemyError,
)
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.elements import ColumnElement

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.options import config_problems, load
from connectors.records import (
    Record,
    assemble,
    intake,
    keep,
    parse_date,
    parse_status_map,
    problem,
    sha256_of,
)
from connectors.sql.duplicates import by_values
from connectors.sql.lenient import lenient
from connectors.sql.options import LOGICAL_FIELDS, SqlSettings
from reconciler.model import ProblemKind, SourceProblem, SourceSnapshot

__all__ = ["SqlTableSource"]

#: An integer ``updated_at``'s values are summed modulo this (a prime) in the probe's token:
#: a row's counter moved forward moves the sum unless it moved by a multiple of it, and the
#: sum of the residues stays far within 64 bits (SQLite's ``sum`` raises on an overflow).
_RESIDUE = 1_000_000_007
#: The label the scan reads ``options.updated_at`` under (no mapped field is named so).
_CHANGED = "__changed_at"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Mapped:
    """The reflected table and the column of each logical field it has."""

    table: Table
    columns: Mapping[str, Column[Any]]
    where: tuple[ColumnElement[bool], ...]

    def key_value(self, key: str) -> Any:
        """``source_key`` as a value of the id column's type (ids may be integers)."""
        try:
            python_type = self.columns["id"].type.python_type
        except NotImplementedError:
            return key
        if python_type is int:
            return int(key)  # ValueError: no row can have this id
        return key


class SqlTableSource:
    """A document-control table in any SQLAlchemy database, mapped column by column."""

    def __init__(
        self,
        name: str,
        *,
        table: str,
        url: str | None = None,
        url_env: str | None = None,
        columns: Mapping[str, str] | None = None,
        filters: Mapping[str, Any] | None = None,
        status_map: Mapping[str, str] | None = None,
        batch_size: int = 500,
        updated_at: str | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if (url is None) == (url_env is None):
            raise ValueError("give exactly one of url or url_env")
        self.name = name
        self.table_name = table
        self.url = url
        self.url_env = url_env
        self.column_names = dict(columns or {})
        self.filters = dict(filters or {})
        self.status_map = parse_status_map(status_map)
        self.batch_size = batch_size
        self.updated_at = updated_at
        self._clock = clock or (lambda: datetime.now(UTC))
        self._engine: Engine | None = None
        self._mapped: _Mapped | None = None
        #: row id -> its ``updated_at`` read as a date, from the last scan (``changed_at``)
        self._changed: dict[str, datetime] = {}

    def __repr__(self) -> str:
        where = f"url_env={self.url_env!r}" if self.url_env else f"url={self._display_url()!r}"
        return f"SqlTableSource(name={self.name!r}, {where}, table={self.table_name!r})"

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with a sql source's settings (checked when the config loads)."""
        return config_problems(SqlSettings, settings)

    @classmethod
    def from_settings(cls, settings: Any) -> SqlTableSource:
        """Build from a ``[[sources]]`` entry (type "sql")."""
        config = load(SqlSettings, settings)
        options = config.options
        return cls(
            settings.name,
            table=options.table,
            url=config.url,
            url_env=options.url_env,
            columns=options.columns,
            filters=options.filter,
            status_map=options.status_map,
            batch_size=options.batch_size,
            updated_at=options.updated_at,
        )

    # -- the SystemOfRecord contract -------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """Stream every row of the table (under the filter); hash bodies without a hash column."""
        scanned_at = self._clock()
        problems: list[SourceProblem] = []
        records: dict[str, Record] = {}
        hashes: dict[str, str] = {}
        complete = True
        failure: str | None = None
        rows = 0
        try:
            with self._connect() as conn:
                mapped = self._map(conn)
                wanted = ["id", *(f for f in mapped.columns if f != "id")]
                if "content_hash" in mapped.columns:
                    wanted.remove("body")  # the body is read only when ingesting
                stamp = mapped.table.columns.get(self.updated_at) if self.updated_at else None
                labelled = [lenient(conn, mapped.columns[f]).label(f) for f in wanted]
                if stamp is not None:  # (the date of each row's change, for the watch)
                    labelled.append(lenient(conn, stamp).label(_CHANGED))
                statement = select(*labelled).where(*mapped.where).order_by(mapped.columns["id"])
                result = conn.execution_options(yield_per=self.batch_size).execute(statement)
                changed: dict[str, datetime] = {}
                for row in by_values(result.mappings(), ignored=_CHANGED):
                    rows += 1
                    if not self._take(row, rows, records, hashes, problems, changed):
                        complete = False
                self._changed = changed
                # Rows whose hash column is empty or invalid: hash their body after the stream.
                if "body" not in wanted:
                    for key in sorted(set(records) - set(hashes)):
                        found = self._bodies(conn, mapped, key)
                        value = found[0] if len(found) == 1 else None
                        self._hash_body(key, value, hashes, problems)
        except ProgrammingError as exc:
            self._mapped = None
            raise ConnectorConfigError(
                f"{self.name}: cannot read table {self.table_name!r}: {_reason(exc)} (check the "
                "table, the column mapping and the permissions)"
            ) from None
        except SQLAlchemyError as exc:
            self._mapped = None  # the table may have changed under us: reflect it again
            if rows == 0:
                raise SourceUnavailable(
                    f"{self.name}: cannot read {self._display_url()}: {_reason(exc)}"
                ) from None
            failure = f"the connection failed after {rows} row(s): {_reason(exc)}"
        if failure is not None:
            complete = False
            problems.append(
                problem(
                    self.name,
                    ProblemKind.UNREADABLE,
                    f"the scan stopped part-way ({failure}); no absent document is taken as "
                    "deleted this run",
                    path=self.table_name,
                )
            )
        documents = assemble(self.name, list(records.values()), hashes, problems, complete=complete)
        if failure is not None and not documents:
            raise SourceUnavailable(f"{self.name}: {failure}")
        log.info(
            "sql %s: %d row(s), %d document(s), %d problem(s)%s",
            self.name,
            rows,
            len(documents),
            len(problems),
            "" if complete else " (partial scan)",
        )
        return SourceSnapshot(
            source=self.name,
            documents=documents,
            problems=tuple(problems),
            scanned_at=scanned_at,
            complete=complete,
        )

    def read_body(self, source_key: str) -> str:
        """Return the body column of the row with id ``source_key``; raise DocumentUnreadable."""
        try:
            with self._connect() as conn:
                found = self._bodies(conn, self._map(conn), source_key)
        except ProgrammingError as exc:
            self._mapped = None
            raise ConnectorConfigError(
                f"{self.name}: cannot read table {self.table_name!r}: {_reason(exc)}"
            ) from None
        except SQLAlchemyError as exc:
            self._mapped = None
            raise SourceUnavailable(
                f"{self.name}: cannot read {self._display_url()}: {_reason(exc)}"
            ) from None
        if not found:
            raise DocumentUnreadable(f"{self.name}: no row with id {source_key!r}")
        if len(found) > 1:
            raise DocumentUnreadable(f"{self.name}: id {source_key!r} names several rows")
        try:
            return _body(found[0])
        except _BadBody as exc:
            raise DocumentUnreadable(f"{self.name}: {source_key}: {exc}") from None

    def close(self) -> None:
        """Release the engine (NullPool: no connection outlives a scan anyway)."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        self._mapped = None

    # -- helpers ---------------------------------------------------------------------------

    def _display_url(self) -> str:
        if self.url is None:
            return f"${self.url_env}"
        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except ArgumentError:
            return "(invalid url)"

    def probe(self, token: str | None) -> str | None:
        """The ``updated_at`` watermark: the column's maximum and the row count under the
        filter (a deleted row lowers the count), and, for an integer column (a row version
        counter, which moves a row forward but not past the others), the sum of its values
        modulo ``_RESIDUE``; for a date or time column on SQLite and PostgreSQL, the sum of
        its instants (``_instants``: a row replaced by one of an older time, as an ETL that
        copies its upstream's time or a row restored from an archive writes it, leaves the
        maximum and the count as they were); None without ``options.updated_at``."""
        if self.updated_at is None:
            return None
        try:
            with self._connect() as conn:
                mapped = self._map(conn)
                column = mapped.table.columns.get(self.updated_at)
                if column is None:
                    raise ConnectorConfigError(
                        f"{self.name}: table {self.table_name!r} has no column "
                        f"{self.updated_at!r} (options.updated_at)"
                    )
                measures = [lenient(conn, func.max(column)), func.count()]
                if isinstance(column.type, Integer):  # (residues: a sum that cannot overflow)
                    measures.append(func.sum(column % _RESIDUE))
                elif (instants := _instants(conn, column)) is not None:
                    measures.append(func.sum(instants))
                found = conn.execute(
                    select(*measures).select_from(mapped.table).where(*mapped.where)
                ).one()
        except SQLAlchemyError as exc:
            self._mapped = None
            raise SourceUnavailable(
                f"{self.name}: cannot read {self._display_url()}: {_reason(exc)}"
            ) from None
        return "|".join(str(value) for value in found)

    def changed_at(self, source_key: str) -> datetime | None:
        """The row's ``updated_at`` as the last scan read it, where it reads as a date (an
        integer version counter does not); None otherwise (``serve``'s watch then dates the
        change when it saw it)."""
        return self._changed.get(source_key)

    def _connect(self) -> Connection:
        if self._engine is None:
            url = self.url
            if url is None:
                url = os.environ.get(self.url_env or "", "").strip()
                if not url:
                    raise ConnectorConfigError(
                        f"{self.name}: environment variable {self.url_env} (options.url_env) "
                        "is not set"
                    )
            try:
                # NullPool: a periodic scan holds no idle connection between runs.
                self._engine = create_engine(url, poolclass=NullPool)
            except (ArgumentError, NoSuchModuleError, ImportError) as exc:
                raise ConnectorConfigError(
                    f"{self.name}: cannot use the database URL"
                    f"{' in ' + self.url_env if self.url_env else ''}: {type(exc).__name__}"
                ) from None
        try:
            return self._engine.connect()
        except DBAPIError as exc:
            raise SourceUnavailable(
                f"{self.name}: cannot connect to {self._display_url()}: {_reason(exc)}"
            ) from None

    def _map(self, conn: Connection) -> _Mapped:
        """Reflect the table once; check the mapping and the filter against its columns."""
        if self._mapped is not None:
            return self._mapped
        schema, _, name = self.table_name.rpartition(".")
        try:
            table = Table(name, MetaData(), schema=schema or None, autoload_with=conn)
        except NoSuchTableError:
            raise ConnectorConfigError(
                f"{self.name}: table {self.table_name!r} does not exist (options.table)"
            ) from None
        available = {column.name: column for column in table.columns}
        columns: dict[str, Column[Any]] = {}
        missing: list[str] = []
        for logical in LOGICAL_FIELDS:
            column_name = self.column_names.get(logical)
            if column_name is None:
                if logical in available:  # unmapped fields default to a same-named column
                    columns[logical] = available[logical]
                continue
            if column_name not in available:
                missing.append(f"{logical} -> {column_name!r}")
            else:
                columns[logical] = available[column_name]
        for logical in ("id", "body"):
            if logical not in columns and logical not in self.column_names:
                missing.append(f"{logical} (no column {logical!r}; map it in options.columns)")
        where: list[ColumnElement[bool]] = []
        for column_name, value in sorted(self.filters.items()):
            column = available.get(column_name)
            if column is None:
                missing.append(f"filter column {column_name!r}")
            elif isinstance(value, list):
                where.append(column.in_(value))
            else:
                where.append(column == value)
        if missing:
            raise ConnectorConfigError(
                f"{self.name}: table {self.table_name!r} lacks "
                + ", ".join(missing)
                + f"; its columns are {', '.join(sorted(available))}"
            )
        self._mapped = _Mapped(table=table, columns=columns, where=tuple(where))
        return self._mapped

    def _take(
        self,
        row: dict[str, Any],
        number: int,
        records: dict[str, Record],
        hashes: dict[str, str],
        problems: list[SourceProblem],
        changed: dict[str, datetime],
    ) -> bool:
        """Add one row (its ``updated_at`` date to ``changed``); False when its identity
        cannot be known."""
        stamp = row.pop(_CHANGED, None)
        where = f"{self.table_name} row {number}"
        known, record = intake(
            self.name,
            row,
            status_map=self.status_map,
            records=records,
            problems=problems,
            where=where,
            duplicate="is on several rows",
        )
        if record is None:
            return known
        keep(self.name, record, records, problems)
        when = _date_of(stamp)
        if when is not None:
            changed[record.key] = when
        if record.content_hash is not None:
            hashes[record.key] = record.content_hash
        elif "body" in row:
            self._hash_body(record.key, row["body"], hashes, problems)
        return True

    def _hash_body(
        self, key: str, value: Any, hashes: dict[str, str], problems: list[SourceProblem]
    ) -> None:
        try:
            hashes[key] = sha256_of(_body(value))
        except _BadBody as exc:
            problems.append(problem(self.name, exc.kind, str(exc), key=key))

    def _bodies(self, conn: Connection, mapped: _Mapped, source_key: str) -> list[Any]:
        """The body column of the rows with this id (under the filter): zero, one or more."""
        try:
            key = mapped.key_value(source_key)
        except ValueError:
            return []
        statement = (
            select(mapped.columns["body"])
            .where(mapped.columns["id"] == key, *mapped.where)
            .limit(2)
        )
        return [row[0] for row in conn.execute(statement)]


class _BadBody(Exception):
    """A body column value that is not text."""

    def __init__(self, kind: ProblemKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _body(value: Any) -> str:
    """The body text of a body column value; raise _BadBody when it has none."""
    if value is None:
        raise _BadBody(ProblemKind.UNREADABLE, "the body column is NULL")
    if isinstance(value, memoryview):
        value = value.tobytes()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _BadBody(
                ProblemKind.UNDECODABLE, f"the body is not UTF-8 (byte {exc.start})"
            ) from None
    if isinstance(value, str):
        return value
    raise _BadBody(
        ProblemKind.UNREADABLE, f"the body column holds a {type(value).__name__}, not text"
    )


def _instants(conn: Connection, column: Any) -> ColumnElement[Any] | None:
    """A date or time column's value to sum, or None (SQLite: whole milliseconds modulo
    ``_RESIDUE``, exact; PostgreSQL: epoch seconds as numeric, which ``extract`` gives as a
    double below 14, and a parallel sum of doubles depends on the order it adds them in)."""
    dialect = conn.dialect.name if isinstance(column.type, Date | DateTime) else None
    if dialect == "sqlite":
        return func.cast(func.round(func.julianday(column) * 86_400_000), Integer) % _RESIDUE
    if dialect == "postgresql":
        return func.cast(extract("epoch", column), Numeric)
    return None


def _reason(exc: SQLAlchemyError) -> str:
    """The driver's message, first line only (never the statement's parameters)."""
    orig = getattr(exc, "orig", None)
    text = str(orig) if orig is not None else type(exc).__name__
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first if len(first) <= 200 else first[:197] + "..."


def _date_of(value: Any) -> datetime | None:
    """A row's ``updated_at`` as a UTC date; None where it is none (a counter, empty)."""
    if value is None or isinstance(value, (int, float)):
        return None
    try:
        return parse_date(value)
    except ValueError:
        return None
