"""What a confluence source's ``[[sources]]`` entry may say, declared with pydantic and checked
when the config loads, every mistake listed at once (docs/connectors/confluence.md): the site
and its flavor, the scope (spaces, CQL, statuses), the environment variables that hold the
credentials (never a secret in the file), the label and properties that declare supersession,
paging and the HTTP policy. Beside them, what each page status declares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PlainValidator

from connectors.httpclient import base_url_problems
from connectors.options import (
    ConnectorSettings,
    HttpPolicyOptions,
    Loc,
    NonNegativeSeconds,
    check,
    checked_url,
    invalid,
    is_integer,
    reserved_variable,
    text,
    unset,
)
from reconciler.model import VersionState

__all__ = [
    "DEFAULT_STATUSES",
    "FLAVORS",
    "STATUS_STATES",
    "ConfluenceOptions",
    "ConfluenceSettings",
]

FLAVORS = ("cloud", "datacenter")
#: Page status -> declared state. Anything else is an ``INVALID_FIELD`` problem (state unknown).
STATUS_STATES: Mapping[str, VersionState] = {
    "current": VersionState.CURRENT,
    "archived": VersionState.RETIRED,
    "trashed": VersionState.RETIRED,
    "deleted": VersionState.RETIRED,
    "draft": VersionState.DRAFT,
}
#: Statuses listed by default. Data Center lists ``archived`` only when asked (older servers
#: reject the status); an unlisted archived page is retired after the missing-in-source grace.
DEFAULT_STATUSES: Mapping[str, tuple[str, ...]] = {
    "cloud": ("current", "archived", "trashed"),
    "datacenter": ("current", "trashed"),
}
_LISTABLE = frozenset(STATUS_STATES)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _credential_variable(value: Any) -> str:
    """An option naming an environment variable: never the secret itself (never echoed)."""
    if value is None:
        raise invalid("the name of the environment variable holding the credential")
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise invalid(
            "must name an environment variable (letters, digits, underscore); the value "
            "is not shown in case it is the secret itself"
        )
    reason = reserved_variable(value)
    if reason is not None:
        raise invalid(reason)
    return value


def _spaces(value: Any) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(s, str) and s.strip() for s in value)
    ):
        raise invalid("a non-empty list of space keys")
    return tuple(s.strip() for s in value)


def _statuses(value: Any) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or "current" not in value
        or not all(isinstance(s, str) and s in _LISTABLE for s in value)
    ):
        raise invalid(
            "a list of page statuses including current, from " + ", ".join(sorted(_LISTABLE))
        )
    return tuple(value)


_CredentialVariable = Annotated[str, PlainValidator(_credential_variable)]
_Name = Annotated[str, text("a non-empty string")]


class ConfluenceOptions(HttpPolicyOptions):
    """``[sources.options]`` of a confluence source (docs/connectors/confluence.md)."""

    unknown_option: ClassVar[str] = "unknown option for a confluence source"
    secret_keys: ClassVar[frozenset[str]] = frozenset({"token", "password", "api_token", "secret"})
    secret_hint: ClassVar[str] = (
        "secrets are never read from the config file; name an environment variable in "
        "options.token_env"
    )

    flavor: Annotated[
        Literal["cloud", "datacenter"],
        check(lambda v: v in FLAVORS, "cloud or datacenter (Data Center and Server)"),
    ] = Field(default=None, validate_default=True)
    spaces: Annotated[tuple[str, ...], PlainValidator(_spaces)] = ()
    cql: Annotated[str, text("a CQL query string")] | None = None
    username_env: _CredentialVariable | None = None
    token_env: _CredentialVariable = Field(default=None, validate_default=True)
    supersession_label: _Name = "superseded"
    successor_property: _Name = "superseded_by"
    effective_from_property: _Name = "effective_from"
    watch_properties: Annotated[
        Literal["labelled", "all"],
        check(lambda v: v in ("labelled", "all"), "labelled or all"),
    ] = "labelled"
    statuses: Annotated[tuple[str, ...], PlainValidator(_statuses)] | None = None
    page_size: Annotated[
        int, check(lambda v: is_integer(v) and 1 <= v <= 250, "an integer from 1 to 250")
    ] = 50
    backoff_jitter: NonNegativeSeconds | None = None


class ConfluenceSettings(ConnectorSettings):
    """What a confluence source reads of its ``[[sources]]`` entry."""

    path: Annotated[None, unset("a confluence source is reached by url, not path")] = None
    url: Annotated[
        str,
        checked_url(
            partial(
                base_url_problems,
                example="https://example.atlassian.net",
                credentials="name variables in options",
            ),
            missing="a confluence source needs url (the site's base URL)",
        ),
    ] = Field(default=None, validate_default=True)
    options: ConfluenceOptions = Field(default_factory=ConfluenceOptions)

    @classmethod
    def rules(cls, given: Mapping[str, Any], options: Mapping[str, Any]) -> list[tuple[Loc, str]]:
        """The scope each flavor reads; the credentials each flavor needs."""
        problems: list[tuple[Loc, str]] = []
        flavor, spaces, cql = options.get("flavor"), options.get("spaces"), options.get("cql")
        if flavor == "cloud" and cql is not None:
            problems.append(
                (("options", "cql"), "CQL scope is for datacenter; on cloud list options.spaces")
            )
        if spaces is None and (cql is None or flavor == "cloud"):
            problems.append(
                (
                    ("options", "spaces"),
                    "name the scope: options.spaces (space keys)"
                    + (" and/or options.cql" if flavor == "datacenter" else ""),
                )
            )
        if flavor == "cloud" and options.get("username_env") is None:
            problems.append(
                (
                    ("options", "username_env"),
                    "the name of the environment variable holding the credential",
                )
            )
        elif flavor == "datacenter" and "username_env" in options:
            problems.append(
                (
                    ("options", "username_env"),
                    "datacenter authenticates with a personal access token (bearer); "
                    "only options.token_env is used",
                )
            )
        return problems
