"""The schema revision of the document table: Alembic's check on start, and ``init``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect
from sqlalchemy.exc import OperationalError

from reconciler.errors import SchemaError, TableUnavailable
from reconciler.stores.schema import Base

log = logging.getLogger(__name__)


def _alembic_config() -> Config:
    config = Config()
    location = resources.files("reconciler.stores") / "migrations"
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
        """Compare the database's Alembic revision with this build's head."""
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
        config = _alembic_config()
        with self.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        return self.schema_status()
