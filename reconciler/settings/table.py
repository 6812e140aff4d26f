"""``[table]``: the document table."""

from __future__ import annotations

import os
import re

from pydantic import Field, field_validator

from reconciler.errors import ConfigError
from reconciler.model import defaults
from reconciler.settings.shared import Duration, SecretVariable, Section

#: SQLAlchemy's own URL grammar (``sqlalchemy.engine.url._parse_url``), so that the settings
#: accept and refuse the URLs ``make_url`` does without importing SQLAlchemy, which costs a
#: command about a tenth of a second before it opens a store (issue 38). The table's store
#: parses the URL again with SQLAlchemy when it connects; ``tests/unit/test_table_url.py``
#: holds the two to the same answers.
_URL = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:
            (?P<username>[^:/]*)
            (?::(?P<password>[^@]*))?
        @)?
        (?:
            (?:
                \[(?P<ipv6host>[^/\?]+)\] |
                (?P<ipv4host>[^/:\?]+)
            )?
            (?::(?P<port>[^/\?]*))?
        )?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
    """,
    re.X,
)


def url_backend(url: str) -> str:
    """The backend of a SQLAlchemy database URL (``postgresql`` for ``postgresql+psycopg://``),
    or ``ValueError`` with the text ``make_url`` gives for a URL it refuses."""
    match = _URL.match(url)
    if match is None:
        raise ValueError("Could not parse SQLAlchemy URL from given URL string")
    if match["port"] is not None:  # (an empty port too) SQLAlchemy's "invalid literal for int()"
        int(match["port"])
    return match["name"].split("+")[0]


class TableSettings(Section):
    """The document table (SQLAlchemy URL)."""

    url: str = "sqlite:///reconciler.db"
    #: Name of an environment variable holding the URL (use when it carries a password).
    url_env: SecretVariable = None
    batch_size: int = Field(default=defaults.TABLE_BATCH, gt=0)
    #: Bounds of every call to the database (``Settings.store_bounds``); unset: derived from
    #: ``[schedule] job_deadline``.
    connect_timeout: Duration | None = None
    statement_timeout: Duration | None = None
    lock_timeout: Duration | None = None

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str) -> str:
        try:
            backend = url_backend(value)
        except ValueError as exc:
            raise ValueError(f"not a SQLAlchemy database URL ({exc})") from None
        if backend not in {"sqlite", "postgresql"}:
            raise ValueError("supported databases are sqlite:/// and postgresql+psycopg://")
        return value

    def resolved_url(self) -> str:
        """The URL to connect with (from ``url_env`` when set)."""
        if self.url_env:
            value = os.environ.get(self.url_env)
            if not value:
                raise ConfigError(
                    [("table.url_env", f"environment variable {self.url_env} is not set")]
                )
            return value
        return self.url

    def display_url(self) -> str:
        """The URL with any password masked, for logs and status."""
        from sqlalchemy.engine import make_url  # noqa: PLC0415 - not imported by the settings

        return make_url(self.resolved_url()).render_as_string(hide_password=True)
