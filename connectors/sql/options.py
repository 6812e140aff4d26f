"""What a sql source's ``[[sources]]`` entry may say, declared with pydantic and checked when the
config loads, every mistake listed at once (docs/connectors/sql.md): the database (a URL without
a password, or the environment variable holding one), the table, the column of each logical
field, the filter (column -> value(s), never SQL text), the status words and the batch size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field, PlainValidator
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from connectors.options import (
    ConnectorOptions,
    ConnectorSettings,
    Loc,
    PositiveInt,
    SecretVariable,
    StatusMap,
    checked_url,
    invalid,
    refuse,
    text,
    unset,
)
from connectors.records import FIELDS

__all__ = ["LOGICAL_FIELDS", "SqlOptions", "SqlSettings"]

#: Logical fields a column can be mapped to: the registry record's, plus the body.
LOGICAL_FIELDS: tuple[str, ...] = (*FIELDS, "body")
_SCALARS = (str, int, float, bool)


def _columns(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise invalid("a table mapping logical fields to column names")
    problems: list[tuple[Loc, str]] = []
    for logical, column in value.items():
        if logical not in LOGICAL_FIELDS:
            problems.append(((logical,), f"unknown field; fields are {', '.join(LOGICAL_FIELDS)}"))
        elif not isinstance(column, str) or not column:
            problems.append(((logical,), "a column name"))
    if problems:
        raise refuse(problems)
    return dict(value)


def _filter(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise invalid("a table mapping column names to a value or a list of values")
    problems: list[tuple[Loc, str]] = []
    for column, wanted in value.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        if not values or not all(isinstance(v, _SCALARS) for v in values):
            problems.append(((column,), "a string, number or boolean, or a list of them"))
    if problems:
        raise refuse(problems)
    return dict(value)


class SqlOptions(ConnectorOptions):
    """``[sources.options]`` of a sql source (docs/connectors/sql.md)."""

    unknown_option: ClassVar[str] = "unknown option for a sql source"

    url_env: SecretVariable | None = None
    table: Annotated[str, text("a sql source needs the table's name")] = Field(
        default=None, validate_default=True
    )
    columns: Annotated[dict[str, str], PlainValidator(_columns)] = Field(default_factory=dict)
    filter: Annotated[dict[str, Any], PlainValidator(_filter)] = Field(default_factory=dict)
    status_map: StatusMap = Field(default_factory=dict)
    batch_size: PositiveInt = 500
    #: A column every change of a row moves forward (a last-modified time or a row version):
    #: ``serve``'s watch polls its maximum (with the row count, for deletions) before it scans.
    updated_at: str | None = None


def _database_url_problems(url: str) -> list[str]:
    try:
        parsed = make_url(url)
    except ArgumentError:
        return ["not a SQLAlchemy database URL"]
    if parsed.password:
        return [
            "a URL with a password never goes in the config file; put it in an environment "
            "variable named by options.url_env"
        ]
    return []


class SqlSettings(ConnectorSettings):
    """What a sql source reads of its ``[[sources]]`` entry."""

    path: Annotated[None, unset("a sql source reads a database: set url or options.url_env")] = None
    url: Annotated[str | None, checked_url(_database_url_problems)] = None
    options: SqlOptions = Field(default_factory=SqlOptions)

    @classmethod
    def rules(cls, given: Mapping[str, Any], options: Mapping[str, Any]) -> list[tuple[Loc, str]]:
        """Exactly one of ``url`` and ``options.url_env``."""
        if bool(given.get("url")) == bool(options.get("url_env")):
            return [
                (
                    ("url",),
                    "set exactly one of url (a SQLAlchemy URL without a password) or "
                    "options.url_env (a variable holding the URL)",
                )
            ]
        return []
