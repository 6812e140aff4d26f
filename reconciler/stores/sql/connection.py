"""The SQLAlchemy engine of the document table, and the one place driver faults are mapped.

``make_engine`` turns on SQLite's WAL, busy timeout and foreign keys, bounds every call to the
database (``TableBounds``), and maps a driver error that is about the machine (disk full, I/O,
corruption) to ``StoreFault`` once, at the edge.

The bounds (``[table]`` settings, by default derived from ``[schedule] job_deadline``):
PostgreSQL gets libpq's ``connect_timeout`` (the whole handshake: a server that accepts and
never answers fails the connect), ``statement_timeout`` and ``lock_timeout`` set on each
session (the server ends a statement or a lock wait), TCP keepalives and ``tcp_user_timeout``
(a peer that vanished);
and, since a server that stops answering mid-statement cannot end it and its kernel still
acknowledges every byte, a watchdog (``_Watchdog``) shuts the socket of a statement (or a
pool's ping) that has outlived the statement bound by ``connect`` seconds: the call then fails
at once, like a dropped connection. SQLite gets its busy timeout (the lock wait).
"""

from __future__ import annotations

import logging
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event

from reconciler.errors import DriverMissing, StoreFault

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableBounds:
    """How long one call to the database may take, in seconds: a connect (handshake
    included), a statement, a lock wait (SQLite: its busy timeout)."""

    connect: float = 30.0
    statement: float = 3600.0
    lock: float = 60.0


def now() -> datetime:
    """The current instant, UTC."""
    return datetime.now(UTC)


def _sqlite_pragmas(busy_ms: int) -> Any:
    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms:d}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return pragmas


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _pg_connect_args(bounds: TableBounds) -> dict[str, Any]:
    """libpq's bounds: the handshake, and a peer that stops acknowledging (keepalives,
    ``tcp_user_timeout``). (Statement and lock bounds are set on each new session,
    ``_pg_session``: a startup ``options`` parameter is refused by poolers such as
    PgBouncer.)"""
    idle = max(1, min(30, int(bounds.connect)))
    return {
        "connect_timeout": max(2, round(bounds.connect)),  # (libpq reads less than 2 as 2)
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": max(1, idle // 3),
        "keepalives_count": 3,
        "tcp_user_timeout": _ms(bounds.connect),
    }


def _pg_session(bounds: TableBounds) -> Any:
    """Each new PostgreSQL session: the server ends a statement past ``bounds.statement``
    and a lock wait past ``bounds.lock``."""

    def bound(dbapi_connection: Any, _record: Any) -> None:
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True  # (SET outside a transaction: it lasts the session)
        try:
            with dbapi_connection.cursor() as cursor:
                cursor.execute(f"SET statement_timeout = {_ms(bounds.statement):d}")
                cursor.execute(f"SET lock_timeout = {_ms(bounds.lock):d}")
        finally:
            dbapi_connection.autocommit = autocommit

    return bound


def make_engine(url: str, *, bounds: TableBounds | None = None) -> Engine:
    """Create an engine whose every call is bounded (``TableBounds``); on SQLite turn on WAL,
    a busy timeout and foreign keys."""
    bounds = bounds or TableBounds()
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    postgres = url.startswith("postgresql")
    try:
        engine = create_engine(
            url,
            pool_pre_ping=True,
            future=True,
            connect_args=_pg_connect_args(bounds) if postgres else {},
        )
    except ImportError as exc:  # psycopg is a dependency, but an environment can lack it
        raise DriverMissing(getattr(exc, "name", None)) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas(_ms(bounds.lock)))
    elif engine.dialect.name == "postgresql":
        event.listen(engine, "connect", _pg_session(bounds))
        _Watchdog(bounds.statement + bounds.connect).watch(engine)
    event.listen(engine, "handle_error", _store_faults)
    return engine


def connect_args(url: str, bounds: TableBounds) -> dict[str, Any]:
    """The bounds as keyword arguments of ``psycopg.connect`` (for a connection made outside
    the pool, such as the advisory lease's); none for another database."""
    return _pg_connect_args(bounds) if url.startswith("postgresql") else {}


class _Watchdog:
    """Shuts the socket of a PostgreSQL call that has run past ``limit`` seconds: the server
    did not end it (``statement_timeout``), so it is not answering at all. A thread per engine
    while calls are in flight (it ends when none is); a call costs a dictionary entry."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        #: id(connection) -> (when to cut it, the connection, its socket's descriptor).
        self._calls: dict[int, tuple[float, Any, int]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, engine: Engine) -> None:
        """Arm around each statement and each pool ping of ``engine``."""
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        event.listen(engine, "handle_error", self._error)
        dialect = engine.dialect
        ping = dialect.do_ping

        def do_ping(dbapi_connection: Any) -> bool:
            self.arm(dbapi_connection)
            try:
                return bool(ping(dbapi_connection))
            finally:
                self.disarm(dbapi_connection)

        dialect.do_ping = do_ping  # type: ignore[method-assign]

    def _before(self, conn: Any, *_args: Any) -> None:
        self.arm(conn.connection.dbapi_connection)

    def _after(self, conn: Any, *_args: Any) -> None:
        self.disarm(conn.connection.dbapi_connection)

    def _error(self, context: Any) -> None:
        dbapi = getattr(context.connection, "connection", None)
        if dbapi is not None:
            self.disarm(getattr(dbapi, "dbapi_connection", None))

    def arm(self, dbapi_connection: Any) -> None:
        """A call starts on this connection."""
        try:
            fd = int(dbapi_connection.fileno())
        except Exception:  # closed, or not a psycopg connection: nothing to watch
            return
        with self._lock:
            self._calls[id(dbapi_connection)] = (
                time.monotonic() + self.limit,
                dbapi_connection,
                fd,
            )
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sql-watchdog", daemon=True)
                self._thread.start()

    def disarm(self, dbapi_connection: Any) -> None:
        """The call on this connection has ended."""
        with self._lock:
            self._calls.pop(id(dbapi_connection), None)

    def _run(self) -> None:
        while True:
            time.sleep(min(1.0, max(0.05, self.limit / 10)))
            now = time.monotonic()
            with self._lock:
                late = [
                    (key, conn, fd) for key, (due, conn, fd) in self._calls.items() if due <= now
                ]
                for key, _conn, _fd in late:
                    del self._calls[key]
                if not late and not self._calls:
                    self._thread = None  # (the next call starts another)
                    return
            for _key, conn, fd in late:
                if not _same_socket(conn, fd):
                    continue  # (closed since: its descriptor may be another socket's now)
                log.warning(
                    "document table: a call got no answer within %.0fs; its connection is cut",
                    self.limit,
                )
                try:
                    sock = socket.socket(fileno=fd)
                except OSError:
                    continue
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                finally:
                    sock.detach()  # (the driver still owns the descriptor)


#: What a driver's error code says about the machine: SQLite result codes (by name, extended
#: codes by prefix) and PostgreSQL SQLSTATEs. Codes, not messages: a message can quote data.
_SQLITE_FAULTS = (
    ("SQLITE_FULL", "disk full"),
    ("SQLITE_IOERR", "disk I/O error"),
    ("SQLITE_CORRUPT", "database is corrupt"),
    ("SQLITE_NOTADB", "database is corrupt"),
    ("SQLITE_READONLY", "read-only storage"),
)
_PG_FAULTS = {
    "53100": "disk full",
    "58030": "disk I/O error",
    "XX001": "database is corrupt",
    "XX002": "database is corrupt",
}
#: For a driver error without a code (one raised by hand): its message, as SQLite words it.
_SQLITE_MESSAGES = (
    ("database or disk is full", "disk full"),
    ("disk i/o error", "disk I/O error"),
    ("database disk image is malformed", "database is corrupt"),
    ("file is not a database", "database is corrupt"),
    ("attempt to write a readonly database", "read-only storage"),
)


def _fault_of(original: BaseException) -> str | None:
    """What a driver error says about the storage, if anything."""
    name = getattr(original, "sqlite_errorname", None)
    if isinstance(name, str):
        return next((meaning for code, meaning in _SQLITE_FAULTS if name.startswith(code)), None)
    state = getattr(original, "sqlstate", None)
    if isinstance(state, str):
        return _PG_FAULTS.get(state.upper())
    text = str(original).lower()
    if type(original).__module__.startswith("sqlite3"):
        return next((meaning for needle, meaning in _SQLITE_MESSAGES if text == needle), None)
    return None


def _no_space(engine: Engine | None) -> bool:
    """Whether a SQLite database's folder has (almost) no space left."""
    database = engine.url.database if engine is not None else None
    if engine is None or engine.dialect.name != "sqlite" or not database:
        return False
    try:
        return shutil.disk_usage(Path(database).parent).free < 1 << 20
    except OSError:
        return False


def _store_faults(context: Any) -> None:
    """Map a driver error that is about the machine (disk full, I/O, corruption) to
    ``StoreFault`` once, at the edge, so it never reads as an unreachable server."""
    original = context.original_exception
    meaning = _fault_of(original)
    if meaning is None:
        return
    engine = context.engine
    if meaning == "disk I/O error" and _no_space(engine):
        meaning = "disk full"  # SQLite reports a full disk under its WAL as an I/O error
    where = (
        f"at {engine.url.database}"
        if engine is not None and engine.dialect.name == "sqlite"
        else f"on {engine.url.render_as_string(hide_password=True)}"
        if engine is not None
        else ""
    )
    raise StoreFault(
        f"document table {where}: {meaning} ({' '.join(str(original).split())}); the failed "
        "transaction was rolled back. Fix the storage (free space, check the disk, or restore "
        "the database), then run again"
    ) from original


def _same_socket(dbapi_connection: Any, fd: int) -> bool:
    """Whether the connection is still open on socket ``fd``."""
    try:
        return not dbapi_connection.closed and int(dbapi_connection.fileno()) == fd
    except Exception:
        return False
