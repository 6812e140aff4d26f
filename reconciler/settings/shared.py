"""What the sections of a configuration share: the names the environment overrides go by,
the section base (unknown keys refused, frozen), durations and secrets named by a variable."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

ENV_PREFIX = "RECONCILER_"
#: ... and the separator of their levels (``RECONCILER_TABLE__URL``).
ENV_NESTING = "__"
#: Environment variables that are not config keys.
#: Variables that are not overrides: the config file, and the test suite's own (its PostgreSQL,
#: its Hypothesis profile: under ``thorough`` every CLI test refused its config).
ENV_RESERVED = {"RECONCILER_CONFIG", "RECONCILER_TEST_PG", "RECONCILER_HYPOTHESIS_PROFILE"}
#: ... and the audit chain's protection, read where the chain is written and verified, never
#: from the config file (``reconciler.stores.sql.audit_protection``).
ENV_RESERVED |= {"RECONCILER_AUDIT_KEY", "RECONCILER_AUDIT_KEY_FILE", "RECONCILER_AUDIT_ANCHOR"}
DEFAULT_CONFIG_NAME = "reconciler.toml"

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(value: Any) -> timedelta:
    """Parse ``"90s"``, ``"15m"``, ``"24h"``, ``"7d"``, ``"2w"`` (or seconds as a number)."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    raise ValueError("expected a duration such as 90s, 15m, 24h, 7d or 2w")


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _secret_variable(value: str | None) -> str | None:
    if value is not None and value.upper().startswith(ENV_PREFIX):
        raise ValueError(
            f"{value}: variables starting with {ENV_PREFIX} are read as config overrides; "
            "name the secret's variable otherwise (e.g. DATABASE_URL, QDRANT_API_KEY)"
        )
    return value


SecretVariable = Annotated[str | None, BeforeValidator(_secret_variable)]
