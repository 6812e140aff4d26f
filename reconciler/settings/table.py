"""``[table]``: the document table."""

from __future__ import annotations

import os

from pydantic import Field, field_validator
from sqlalchemy.engine import make_url

from reconciler.errors import ConfigError
from reconciler.model import defaults
from reconciler.settings.shared import Duration, SecretVariable, Section


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
            url = make_url(value)
        except Exception as exc:  # sqlalchemy raises ArgumentError with a clear text
            raise ValueError(f"not a SQLAlchemy database URL ({exc})") from None
        if url.get_backend_name() not in {"sqlite", "postgresql"}:
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
        return make_url(self.resolved_url()).render_as_string(hide_password=True)
