"""The schema revision of the document table: Alembic's check on start, and ``init``."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from reconciler.errors import SchemaError, TableUnavailable
from reconciler.stores.sql.schema import Base

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

#: ``revision: str = "0004"`` / ``down_revision: str | None = "0003"`` in a version file.
_REVISION_LINE = re.compile(
    r"^(down_revision|revision)\b[^=\n]*=\s*(?:\"([^\"]*)\"|'([^']*)'|None)\s*$", re.MULTILINE
)


def _alembic_config() -> Config:
    from alembic.config import Config  # noqa: PLC0415 (Alembic loads only when it is needed)

    config = Config()
    location = resources.files("reconciler.stores.sql") / "migrations"
    config.set_main_option("script_location", str(location))
    return config


@dataclass(frozen=True)
class SchemaStatus:
    """Where the database stands against this build's migrations."""

    current: str | None
    head: str
    known: bool

    @property
    def up_to_date(self) -> bool:
        """Whether the database is at this build's head revision."""
        return self.current == self.head


class SqlSchema:
    """The schema's revision: read it, and upgrade (or, for ``init``, create) it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def schema_status(self) -> SchemaStatus:
        """Compare the database's Alembic revision with this build's head.

        The common case, a database at the head, is answered from the version files and one
        SELECT without importing Alembic (every command opens the table: start-up time);
        anything else asks Alembic.
        """
        head = plain_head()
        if head is not None and self._stored_revision() == head:
            return SchemaStatus(current=head, head=head, known=True)
        return self._alembic_status()

    def _stored_revision(self) -> str | None:
        """``alembic_version.version_num`` when it holds exactly one row, else ``None``."""
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
        except SQLAlchemyError:
            return None  # no such table, or no database: Alembic's path says which
        return str(rows[0][0]) if len(rows) == 1 else None

    def _alembic_status(self) -> SchemaStatus:
        from alembic.runtime.migration import MigrationContext  # noqa: PLC0415
        from alembic.script import ScriptDirectory  # noqa: PLC0415

        script = ScriptDirectory.from_config(_alembic_config())
        head = script.get_current_head()
        assert head is not None
        try:
            with self.engine.connect() as conn:
                current = MigrationContext.configure(conn).get_current_revision()
        except OperationalError as exc:
            raise TableUnavailable(f"cannot reach the document table: {exc.orig}") from None
        try:
            known = current is None or script.get_revision(current) is not None
        except Exception:  # alembic raises ResolutionError/CommandError for unknown ids
            known = False
        return SchemaStatus(current=current, head=head, known=known)

    def ensure_schema(self, *, create: bool = False) -> SchemaStatus:
        """Check the schema on start: upgrade an older revision, refuse an unknown one.

        A database with no reconciler schema is created only when ``create`` (``reconciler
        init``); otherwise the caller is told to run ``init``.
        """
        database = self.engine.url.database
        if (
            not create
            and self.engine.dialect.name == "sqlite"
            and database not in (None, "", ":memory:")
            and not Path(database).exists()
        ):
            raise SchemaError(
                f"no document table at {database}; run `reconciler init` first "
                "(the table is not initialised)"
            )
        status = self.schema_status()
        if not status.known:
            raise SchemaError(
                f"the document table is at schema revision {status.current!r}, which this build "
                f"of corpus-reconciler does not know (head {status.head!r}); it was migrated by a "
                "newer build: run that build, or restore a backup"
            )
        if status.current is None:
            existing = set(inspect(self.engine).get_table_names())
            ours = set(Base.metadata.tables)
            if existing & ours:
                raise SchemaError(
                    "the database holds reconciler tables but no Alembic revision; refusing to "
                    "guess its schema (was it created by hand?)"
                )
            if not create:
                raise SchemaError(
                    "the document table is not initialised; run `reconciler init` first"
                )
        if status.up_to_date:
            return status
        log.info("upgrading document table schema %s -> %s", status.current, status.head)
        from alembic import command  # noqa: PLC0415

        config = _alembic_config()
        if self.engine.dialect.name != "sqlite":
            with self.engine.begin() as conn:  # PostgreSQL: DDL is transactional
                config.attributes["connection"] = conn
                command.upgrade(config, "head")
            return self.schema_status()
        with self.engine.connect() as conn:
            # pysqlite runs DDL outside any transaction (each statement commits): a kill
            # mid-upgrade left half a revision, for good. Here the whole upgrade is one
            # transaction of SQLite's own, which a kill rolls back.
            raw = conn.connection.dbapi_connection
            assert raw is not None
            previous = raw.isolation_level
            raw.isolation_level = None
            try:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                config.attributes["connection"] = conn
                command.upgrade(config, "head")
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            finally:
                raw.isolation_level = previous
        return self.schema_status()


@cache
def plain_head() -> str | None:
    """This build's head revision, read from the version files' ``revision`` and
    ``down_revision`` lines without Alembic; ``None`` unless they form one plain chain (then
    Alembic decides). ``tests/integration/test_migrations.py`` holds it equal to Alembic's head."""
    folder = resources.files("reconciler.stores.sql") / "migrations" / "versions"
    parents: dict[str, str | None] = {}
    try:
        for entry in folder.iterdir():
            if not entry.name.endswith(".py") or entry.name.startswith("_"):
                continue
            found = {m[1]: m[2] or m[3] or None for m in _REVISION_LINE.finditer(entry.read_text())}
            if "revision" not in found or "down_revision" not in found or not found["revision"]:
                return None
            parents[str(found["revision"])] = found["down_revision"]
    except OSError:
        return None
    heads = set(parents) - {p for p in parents.values() if p is not None}
    roots = [r for r, p in parents.items() if p is None]
    if len(heads) != 1 or len(roots) != 1 or len(set(parents.values())) != len(parents):
        return None
    return heads.pop()
