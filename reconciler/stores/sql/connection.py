"""The SQLAlchemy engine of the document table, and the one place driver faults are mapped.

``make_engine`` turns on SQLite's WAL, busy timeout and foreign keys, and maps a driver error
that is about the machine (disk full, I/O, corruption) to ``StoreFault`` once, at the edge.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event

from reconciler.errors import DriverMissing, StoreFault


def now() -> datetime:
    """The current instant, UTC."""
    return datetime.now(UTC)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    """Create an engine; on SQLite turn on WAL, a busy timeout and foreign keys."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    try:
        engine = create_engine(url, pool_pre_ping=True, future=True)
    except ImportError as exc:  # psycopg is a dependency, but an environment can lack it
        raise DriverMissing(getattr(exc, "name", None)) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "handle_error", _store_faults)
    return engine


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
