"""The system of record for Confluence: Cloud (REST v2) and Data Center / Server (REST v1).

One page is one document. The page id is its identity (doc id ``<source>:<page id>``): it
survives moves and renames. What each page declares:

- ``version``: the Confluence version number; ``effective_from``: the ``effective_from`` content
  property when present, else the date of the page's current version; ``effective_to`` and
  ``doc_class`` from content properties of those names when present;
- state from the page status: ``current`` -> current, ``archived`` -> retired, ``trashed`` ->
  retired (listed on purpose, so a page moved to the trash is retired at once rather than after
  the missing-in-source grace), ``draft`` -> draft;
- supersession: the supersession label (default ``superseded``) *and* the successor content
  property (default ``superseded_by``) naming the successor page id. The label is the
  declaration, the property its pointer: a label without a usable pointer, a pointer to a page
  not in scope, to the page itself or round a cycle is a ``SourceProblem`` and the page keeps the
  state its status gives; a property without the label is ignored (removing the label undoes a
  supersession);
- ``content_hash``: sha256 of the storage-format body, exactly as Confluence returns it.

Failures are never read as deletions (connectors/base.py): a listing request that fails once
nothing is read raises ``SourceUnavailable``; one that fails later ends the scan with the pages
read so far, ``complete=False`` and an ``UNREADABLE`` problem naming what failed; a page whose
own request (properties, labels) answers 404 is that page's ``UNREADABLE`` problem and the scan
goes on. 401/403 raise ``ConnectorConfigError`` naming the token's environment variable, never
its value. Requests go through one session per connector (connectors/httpclient.py): timeouts,
retries of 429/5xx honouring ``Retry-After``, GET only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import quote, urljoin, urlsplit

import requests
from pydantic import Field, PlainValidator
from requests.auth import AuthBase, HTTPBasicAuth

from connectors.base import (
    ConnectorConfigError,
    ConnectorError,
    DocumentUnreadable,
    SourceUnavailable,
)
from connectors.httpclient import HttpPolicy, base_url_problems, get_json, make_session, redact
from connectors.options import (
    ConnectorSettings,
    HttpPolicyOptions,
    Loc,
    NonNegativeSeconds,
    check,
    checked_url,
    config_problems,
    invalid,
    is_integer,
    load,
    reserved_variable,
    text,
    unset,
)
from connectors.records import DateOutOfRange, break_cycles, parse_date, read_date, shown
from reconciler.model import (
    ProblemKind,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    VersionState,
)

__all__ = ["ConfluenceOptions", "ConfluenceSettings", "ConfluenceSource"]

log = logging.getLogger(__name__)

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
_PAGE_ID = re.compile(r"[0-9]+")
_PAGE_URL = re.compile(r"/pages/([0-9]+)(?:[/?#]|$)")
_DC_EXPAND = "version,history,ancestors,metadata.labels,body.storage,space"


# -- settings ------------------------------------------------------------------------------


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


class _Bearer(AuthBase):
    """``Authorization: Bearer`` with a Data Center personal access token."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "_Bearer(<redacted>)"


@dataclass(slots=True)
class _Page:
    """One listed page, before its properties are read."""

    id: str
    status: str
    title: str | None
    path: str
    body: str | None
    version: int | None
    version_at: datetime | None
    labels: frozenset[str] | None  # None: not in the listing (Cloud), read per page
    #: (``SourceDocument`` field, message) of each field taken as absent.
    invalid: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class _Draft:
    """One page's declaration, before successors are resolved across the scan."""

    page: _Page
    state: VersionState | None
    effective_from: datetime | None
    effective_to: datetime | None
    doc_class: str | None
    labelled: bool
    successor: str | None  # the successor's page id, as the property names it


class _Partial(Exception):
    """The scan stops here: what was read so far is returned, marked incomplete."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfluenceSource:
    """Confluence pages (Cloud REST v2 or Data Center REST v1), one document per page."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        flavor: str,
        token_env: str,
        username_env: str | None = None,
        spaces: Sequence[str] = (),
        cql: str | None = None,
        supersession_label: str = "superseded",
        successor_property: str = "superseded_by",
        effective_from_property: str = "effective_from",
        statuses: Sequence[str] | None = None,
        page_size: int = 50,
        policy: HttpPolicy | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if flavor not in FLAVORS:
            raise ConnectorConfigError(f"confluence {name!r}: flavor must be cloud or datacenter")
        self.name = name
        self.flavor = flavor
        self.token_env = token_env
        self.username_env = username_env
        self.spaces = tuple(spaces)
        self.cql = cql
        self.supersession_label = supersession_label.strip().lower()
        self.successor_property = successor_property
        self.effective_from_property = effective_from_property
        self.statuses = tuple(statuses) if statuses else DEFAULT_STATUSES[flavor]
        self.page_size = page_size
        self.policy = policy or HttpPolicy()
        self._clock = clock or (lambda: datetime.now(UTC))
        base = url.rstrip("/")
        if flavor == "cloud":
            self._site = base.removesuffix("/wiki")
            self._api = f"{self._site}/wiki/api/v2"
        else:
            self._site = base
            self._api = f"{base}/rest/api"
        parts = urlsplit(base)
        self._origin = f"{parts.scheme}://{parts.netloc}".lower()
        self._session = make_session(self.policy)
        self._statuses_seen: dict[str, str] = {}  # page id -> status, from the last scan

    def __repr__(self) -> str:
        return (
            f"ConfluenceSource(name={self.name!r}, flavor={self.flavor!r}, "
            f"url={redact(self._site)!r}, token_env={self.token_env!r})"
        )

    def close(self) -> None:
        """Release the HTTP session's connections."""
        self._session.close()

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with a confluence source's settings (checked when the config loads)."""
        return config_problems(ConfluenceSettings, settings)

    @classmethod
    def from_settings(cls, settings: Any) -> ConfluenceSource:
        """Build from a ``[[sources]]`` entry (type "confluence")."""
        config = load(ConfluenceSettings, settings)
        options = config.options
        policy = HttpPolicy.from_options(options.policy_options())
        if options.backoff_jitter is not None:
            policy = dataclasses.replace(policy, backoff_jitter=options.backoff_jitter)
        return cls(
            settings.name,
            config.url,
            flavor=options.flavor,
            token_env=options.token_env,
            username_env=options.username_env,
            spaces=options.spaces,
            cql=options.cql,
            supersession_label=options.supersession_label,
            successor_property=options.successor_property,
            effective_from_property=options.effective_from_property,
            statuses=options.statuses,
            page_size=options.page_size,
            policy=policy,
        )

    # -- the SystemOfRecord contract -------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """List every page in scope with its properties; partial scans say so."""
        scanned_at = self._clock()
        self._authenticate()
        problems: list[SourceProblem] = []
        pages: list[_Page] = []
        failure: str | None = None
        complete = True
        try:
            seen: set[str] = set()
            for page in self._list_pages(problems):
                if page is None:  # an entry without an id: it could be any page
                    complete = False
                elif page.id not in seen:  # offset paging may repeat an entry; keep the first
                    seen.add(page.id)
                    pages.append(page)
        except _Partial as exc:
            failure = exc.message

        drafts: list[_Draft] = []
        unreadable: set[str] = set()
        for page in pages:
            try:
                draft = self._declare(page, problems)
            except DocumentUnreadable as exc:
                unreadable.add(page.id)
                problems.append(self._problem(ProblemKind.UNREADABLE, str(exc), page))
                continue
            except SourceUnavailable as exc:
                failure = f"reading page {page.id} failed: {exc}"
                break
            drafts.append(draft)

        if failure is not None:
            complete = False
            if not drafts:
                raise SourceUnavailable(failure)
            log.warning(
                "confluence %s: partial scan (%d page(s) read): %s",
                self.name,
                len(drafts),
                failure,
            )
            problems.append(
                SourceProblem(
                    source=self.name,
                    kind=ProblemKind.UNREADABLE,
                    message=f"partial scan, absent pages are not taken as deleted: {failure}",
                    path=redact(self._api),
                )
            )
        documents = self._resolve(drafts, problems, complete=complete, unreadable=unreadable)
        self._statuses_seen = {d.page.id: d.page.status for d in drafts}
        log.debug(
            "confluence %s: %d document(s), %d problem(s), complete=%s",
            self.name,
            len(documents),
            len(problems),
            complete,
        )
        return SourceSnapshot(
            source=self.name,
            documents=tuple(documents),
            problems=tuple(problems),
            scanned_at=scanned_at,
            complete=complete,
        )

    def read_body(self, source_key: str) -> str:
        """The page's storage-format body (XHTML), as hashed by the scan."""
        if not _PAGE_ID.fullmatch(source_key):
            raise DocumentUnreadable(
                f"confluence {self.name!r}: {source_key!r} is not a Confluence page id"
            )
        self._authenticate()
        if self.flavor == "cloud":
            url = f"{self._api}/pages/{source_key}"
            params: dict[str, Any] = {"body-format": "storage"}
        else:
            url = f"{self._api}/content/{source_key}"
            params = {
                "expand": "body.storage",
                "status": self._statuses_seen.get(source_key, "current"),
            }
        try:
            data = self._get(url, params, document=f"page {source_key}")
        except SourceUnavailable as exc:
            raise DocumentUnreadable(str(exc)) from None
        body = _storage_body(data)
        if body is None:
            raise DocumentUnreadable(
                f"confluence {self.name!r}: page {source_key} has no storage-format body"
            )
        return body

    # -- listing ---------------------------------------------------------------------------

    def _list_pages(self, problems: list[SourceProblem]) -> Iterator[_Page | None]:
        """Every page in scope (None for an entry without an id); _Partial when a page fails.

        Resolving the scope (space keys) is not wrapped: failing there, nothing was read, and
        ``SourceUnavailable`` / ``ConnectorConfigError`` reach the caller as they are.
        """
        if self.flavor == "cloud":
            spaces = self._cloud_spaces()
            for key, space_id in spaces.items():
                for status in self.statuses:
                    params = {
                        "space-id": space_id,
                        "status": status,
                        "body-format": "storage",
                        "limit": self.page_size,
                    }
                    what = f"pages of space {key} (status {status})"
                    for raw in self._listing(
                        self._cursor_pages, f"{self._api}/pages", params, what
                    ):
                        yield self._cloud_page(raw, key, problems)
            return
        scopes: list[tuple[str, str, dict[str, Any]]] = []
        if self.cql is not None:
            cql = f"type = page AND ({self.cql})"
            if self.spaces:
                keys = ", ".join(f'"{key}"' for key in self.spaces)
                cql = f"space IN ({keys}) AND {cql}"
            scopes.append(
                (f"CQL {cql!r}", f"{self._api}/content/search", {"cql": cql, "expand": _DC_EXPAND})
            )
        else:
            for key in self.spaces:
                self._dc_space(key)
                for status in self.statuses:
                    params = {
                        "type": "page",
                        "spaceKey": key,
                        "status": status,
                        "expand": _DC_EXPAND,
                    }
                    scopes.append(
                        (f"pages of space {key} (status {status})", f"{self._api}/content", params)
                    )
        for what, url, params in scopes:
            for raw in self._listing(self._offset_pages, url, params, what):
                yield self._dc_page(raw, problems)

    def _listing(
        self,
        pager: Callable[[str, dict[str, Any]], Iterator[list[Any]]],
        url: str,
        params: dict[str, Any],
        what: str,
    ) -> Iterator[Any]:
        """Entries of one paged listing; a failing page of it raises _Partial."""
        read = 0
        try:
            for entries in pager(url, params):
                read += 1
                yield from entries
        except SourceUnavailable as exc:
            raise _Partial(
                f"listing {what} failed after {read} page(s) of results: {exc}"
            ) from None

    def _cloud_spaces(self) -> dict[str, str]:
        """Space key -> space id; a key that does not resolve is a configuration error."""
        found: dict[str, str] = {}
        params = {"keys": ",".join(self.spaces), "limit": 250}
        for entries in self._cursor_pages(f"{self._api}/spaces", params):
            for entry in entries:
                if isinstance(entry, dict) and entry.get("key") in self.spaces:
                    space_id = _identifier(entry.get("id"))
                    if space_id is not None:
                        found[entry["key"]] = space_id
        missing = [key for key in self.spaces if key not in found]
        if missing:
            raise ConnectorConfigError(
                f"confluence {self.name!r}: space(s) {', '.join(missing)} not found or not "
                f"visible with the token in {self.token_env}: fix options.spaces or the "
                "token's permissions"
            )
        return {key: found[key] for key in self.spaces}

    def _dc_space(self, key: str) -> None:
        """Refuse a space that does not exist: its pages would look deleted."""
        try:
            self._get(f"{self._api}/space/{quote(key, safe='')}", {}, document=f"space {key}")
        except DocumentUnreadable:
            raise ConnectorConfigError(
                f"confluence {self.name!r}: space {key} not found or not visible with the "
                f"token in {self.token_env}: fix options.spaces or the token's permissions"
            ) from None

    def _cursor_pages(
        self, url: str, params: dict[str, Any], document: str | None = None
    ) -> Iterator[list[Any]]:
        """Cloud v2 cursor paging: the ``Link: <...>; rel="next"`` header, else ``_links.next``."""
        seen: set[str] = set()
        next_url: str | None = url
        next_params: dict[str, Any] | None = params
        while next_url is not None:
            data, response = self._get_with_response(next_url, next_params, document=document)
            yield _results(data, redact(next_url), document)
            link = response.links.get("next", {}).get("url") or _next_link(data)
            if not link:
                return
            next_url, next_params = self._follow(link), None
            if next_url in seen:
                raise _error(document)(
                    f"confluence {self.name!r}: the next-page link repeats ({redact(next_url)})"
                )
            seen.add(next_url)

    def _offset_pages(
        self, url: str, params: dict[str, Any], document: str | None = None
    ) -> Iterator[list[Any]]:
        """Data Center start/limit paging: go on while ``_links.next`` is present."""
        start = 0
        while True:
            data = self._get(url, {**params, "start": start, "limit": self.page_size}, document)
            entries = _results(data, redact(url), document)
            yield entries
            if not entries or not _next_link(data):
                return
            size = data.get("size")
            start += size if is_integer(size) and size > 0 else len(entries)

    def _follow(self, link: str) -> str:
        """Resolve a next-page link; never send the credentials to another site."""
        target = urljoin(self._origin + "/", link)
        parts = urlsplit(target)
        if f"{parts.scheme}://{parts.netloc}".lower() != self._origin:
            raise SourceUnavailable(
                f"confluence {self.name!r}: a next-page link points off the site "
                f"({redact(target)}); not followed"
            )
        return target

    # -- one page --------------------------------------------------------------------------

    def _cloud_page(self, raw: Any, space: str, problems: list[SourceProblem]) -> _Page | None:
        page_id = _identifier(raw.get("id")) if isinstance(raw, dict) else None
        if page_id is None:
            problems.append(self._loose("a listed page has no usable id; scan marked partial"))
            return None
        version = raw.get("version") if isinstance(raw.get("version"), dict) else {}
        title = raw.get("title") if isinstance(raw.get("title"), str) else None
        return self._page(
            page_id,
            raw.get("status"),
            title,
            f"{space}/{title or page_id}",
            _storage_body(raw),
            version.get("number"),
            version.get("createdAt"),
            None,
        )

    def _dc_page(self, raw: Any, problems: list[SourceProblem]) -> _Page | None:
        page_id = _identifier(raw.get("id")) if isinstance(raw, dict) else None
        if page_id is None:
            problems.append(self._loose("a listed page has no usable id; scan marked partial"))
            return None
        version = raw.get("version") if isinstance(raw.get("version"), dict) else {}
        title = raw.get("title") if isinstance(raw.get("title"), str) else None
        space = _dig(raw, "space", "key")
        ancestors = raw.get("ancestors") if isinstance(raw.get("ancestors"), list) else []
        trail = [
            a["title"] for a in ancestors if isinstance(a, dict) and isinstance(a.get("title"), str)
        ]
        path = "/".join([space if isinstance(space, str) else "?", *trail, title or page_id])
        labels = _dig(raw, "metadata", "labels", "results")
        return self._page(
            page_id,
            raw.get("status"),
            title,
            path,
            _storage_body(raw),
            version.get("number"),
            version.get("when"),
            _label_names(labels) if isinstance(labels, list) else frozenset(),
        )

    def _page(
        self,
        page_id: str,
        status: Any,
        title: str | None,
        path: str,
        body: str | None,
        number: Any,
        when: Any,
        labels: frozenset[str] | None,
    ) -> _Page:
        page = _Page(
            id=page_id,
            status=status if isinstance(status, str) else "",
            title=title,
            path=path,
            body=body,
            version=None,
            version_at=None,
            labels=labels,
        )
        if is_integer(number) and number >= 0:
            page.version = number
        else:
            page.invalid.append(
                (
                    "version",
                    f"version number missing or invalid ({shown(number)}); taken as absent",
                )
            )
        if isinstance(when, str):
            try:
                page.version_at = parse_date(when)
            except DateOutOfRange as exc:
                page.invalid.append(("effective_from", f"version date {exc}; taken as absent"))
            except ValueError:
                page.invalid.append(
                    ("effective_from", f"version date {when!r} is not ISO 8601; taken as absent")
                )
        return page

    def _declare(self, page: _Page, problems: list[SourceProblem]) -> _Draft:
        """Read a page's labels and properties; DocumentUnreadable when its requests 404."""
        if page.body is None:
            raise DocumentUnreadable(
                f"confluence {self.name!r}: page {page.id} came without a storage-format body"
            )
        doc_id = self._doc_id(page.id)
        for name, message in page.invalid:
            problems.append(
                self._problem(ProblemKind.INVALID_FIELD, message, page, doc_id, field=name)
            )
        state = STATUS_STATES.get(page.status)
        if state is None:
            problems.append(
                self._problem(
                    ProblemKind.INVALID_FIELD,
                    f"page status {page.status!r} is not one of {', '.join(STATUS_STATES)}; "
                    "a registered page keeps its state, a new one is taken as unknown",
                    page,
                    doc_id,
                    field="state",
                )
            )
        draft = _Draft(
            page=page,
            state=state,
            effective_from=page.version_at,
            effective_to=None,
            doc_class=None,
            labelled=False,
            successor=None,
        )
        if page.status == "trashed":
            return draft  # retired whatever it declares; its properties may not be readable
        labels = page.labels if page.labels is not None else self._cloud_labels(page.id)
        properties = self._properties(page.id)
        invalid: list[tuple[str, str]] = []
        declared_from = _instant(
            properties, self.effective_from_property, invalid, field="effective_from"
        )
        if declared_from is not None:
            draft.effective_from = declared_from
        draft.effective_to = _instant(properties, "effective_to", invalid)
        draft.doc_class = _property_text(properties, "doc_class", invalid)
        draft.labelled = self.supersession_label in labels
        if draft.labelled:
            if self.successor_property not in properties:
                invalid.append(
                    (
                        "superseded_by",
                        f"labelled {self.supersession_label!r} but has no "
                        f"{self.successor_property!r} property naming its successor; "
                        "supersession ignored",
                    )
                )
            else:
                draft.successor = self._successor(properties[self.successor_property], invalid)
        problems.extend(
            self._problem(ProblemKind.INVALID_FIELD, message, page, doc_id, field=name)
            for name, message in invalid
        )
        return draft

    def _cloud_labels(self, page_id: str) -> frozenset[str]:
        names: set[str] = set()
        for entries in self._cursor_pages(
            f"{self._api}/pages/{page_id}/labels", {"limit": 250}, f"page {page_id}"
        ):
            names |= _label_names(entries)
        return frozenset(names)

    def _properties(self, page_id: str) -> dict[str, Any]:
        """Content property key -> value (JSON) of one page."""
        document = f"page {page_id}"
        if self.flavor == "cloud":
            pages = self._cursor_pages(
                f"{self._api}/pages/{page_id}/properties", {"limit": 250}, document
            )
        else:
            pages = self._offset_pages(f"{self._api}/content/{page_id}/property", {}, document)
        found: dict[str, Any] = {}
        for entries in pages:
            for entry in entries:
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    found.setdefault(entry["key"], entry.get("value"))
        return found

    def _successor(self, value: Any, invalid: list[tuple[str, str]]) -> str | None:
        """The page id a successor property names: an id, ``<source>:<id>``, a page URL."""
        raw = value
        if isinstance(value, dict):
            value = value.get("id", value.get("value"))
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return str(value)
        if isinstance(value, str):
            text = value.strip().removeprefix(f"{self.name}:")
            if _PAGE_ID.fullmatch(text):
                return text
            match = _PAGE_URL.search(text)
            if match is not None:
                return match.group(1)
        invalid.append(
            (
                "superseded_by",
                f"{self.successor_property} must name the successor's page id, got "
                f"{shown(raw)}; supersession ignored",
            )
        )
        return None

    # -- supersession across the scan ------------------------------------------------------

    def _resolve(
        self,
        drafts: list[_Draft],
        problems: list[SourceProblem],
        *,
        complete: bool,
        unreadable: set[str],
    ) -> list[SourceDocument]:
        """Documents with successors resolved; pages whose successor was not read held back.

        A page is held back (not yielded, its state kept, an ``UNREADABLE`` problem naming
        why) when its successor is a page this scan could not read, or may sit in the part of a
        partial scan that was not read, or is itself held back: dropping the pointer instead
        would read the page as current again.
        """
        by_id = {d.page.id: d for d in drafts}
        successors: dict[str, str] = {}
        waiting: dict[str, str] = {}  # page id -> successor not read this scan
        for draft in drafts:
            target, page = draft.successor, draft.page
            if target is None:
                continue
            doc_id = self._doc_id(page.id)
            if target == page.id:
                problems.append(
                    self._problem(
                        ProblemKind.SELF_SUPERSESSION,
                        f"{self.successor_property} names the page itself; ignored",
                        page,
                        doc_id,
                    )
                )
            elif target in by_id:
                successors[page.id] = target
            elif target in unreadable or not complete:
                waiting[page.id] = target
            else:
                problems.append(
                    self._problem(
                        ProblemKind.DANGLING_SUPERSEDED_BY,
                        f"{self.successor_property} names page {target}, which is not in this "
                        "source's scope; ignored",
                        page,
                        doc_id,
                    )
                )
        for page_id, message in break_cycles(successors, self.successor_property):
            problems.append(
                self._problem(
                    ProblemKind.SUPERSESSION_CYCLE,
                    message,
                    by_id[page_id].page,
                    self._doc_id(page_id),
                )
            )
        grew = True
        while grew:  # a page superseded by a held-back page is held back too
            grew = False
            for page_id, target in successors.items():
                if target in waiting and page_id not in waiting:
                    waiting[page_id] = target
                    grew = True
        for page_id, target in sorted(waiting.items()):
            problems.append(
                self._problem(
                    ProblemKind.UNREADABLE,
                    f"its successor, page {target}, was not read this scan; "
                    "the page keeps its registered state",
                    by_id[page_id].page,
                )
            )
        held = set(waiting)
        documents = []
        for draft in sorted(drafts, key=lambda d: (len(d.page.id), d.page.id)):
            page = draft.page
            if page.id in held or page.body is None:
                continue
            successor = successors.get(page.id)
            state = draft.state
            if successor is not None and page.status != "trashed":
                state = VersionState.SUPERSEDED
            documents.append(
                SourceDocument(
                    source=self.name,
                    source_key=page.id,
                    doc_id=self._doc_id(page.id),
                    content_hash="sha256:" + hashlib.sha256(page.body.encode("utf-8")).hexdigest(),
                    path=page.path,
                    version=page.version,
                    state=state,
                    effective_from=draft.effective_from,
                    effective_to=draft.effective_to,
                    superseded_by=self._doc_id(successor)
                    if successor is not None and state is VersionState.SUPERSEDED
                    else None,
                    title=page.title,
                    doc_class=draft.doc_class,
                )
            )
        return documents

    # -- HTTP ------------------------------------------------------------------------------

    def _authenticate(self) -> None:
        """Read the credentials from the environment (each scan: rotated tokens are picked up)."""
        token = os.environ.get(self.token_env, "")
        if not token:
            raise ConnectorConfigError(
                f"confluence {self.name!r}: environment variable {self.token_env} is not set "
                "(it holds the "
                + ("API token)" if self.flavor == "cloud" else "personal access token)")
            )
        if self.flavor == "datacenter":
            self._session.auth = _Bearer(token)
            return
        user = os.environ.get(self.username_env or "", "")
        if not user:
            raise ConnectorConfigError(
                f"confluence {self.name!r}: environment variable {self.username_env} is not set "
                "(it holds the Atlassian account e-mail)"
            )
        self._session.auth = HTTPBasicAuth(user, token)

    def _get(self, url: str, params: Mapping[str, Any] | None, document: str | None = None) -> Any:
        return self._get_with_response(url, params, document=document)[0]

    def _get_with_response(
        self, url: str, params: Mapping[str, Any] | None, *, document: str | None = None
    ) -> tuple[Any, requests.Response]:
        log.debug("confluence %s: GET %s", self.name, redact(url))
        try:
            return get_json(
                self._session,
                url,
                policy=self.policy,
                params=params,
                source=f"confluence {self.name!r}",
                document=document,
            )
        except ConnectorConfigError as exc:
            variables = f"token in {self.token_env}"
            if self.flavor == "cloud":
                variables = f"user in {self.username_env}, API {variables}"
            raise ConnectorConfigError(f"{exc} ({variables})") from None

    # -- helpers ---------------------------------------------------------------------------

    def _doc_id(self, page_id: str) -> str:
        return f"{self.name}:{page_id}"

    def _problem(
        self,
        kind: ProblemKind,
        message: str,
        page: _Page,
        doc_id: str | None = None,
        *,
        field: str | None = None,
    ) -> SourceProblem:
        log.debug("confluence %s: %s page %s: %s", self.name, kind.value, page.id, message)
        return SourceProblem(
            source=self.name,
            kind=kind,
            message=message,
            path=page.path,
            doc_id=doc_id or self._doc_id(page.id),
            source_key=page.id,
            field=field,
        )

    def _loose(self, message: str) -> SourceProblem:
        return SourceProblem(source=self.name, kind=ProblemKind.UNREADABLE, message=message)


# -- response shapes -----------------------------------------------------------------------


def _error(document: str | None) -> type[ConnectorError]:
    return DocumentUnreadable if document is not None else SourceUnavailable


def _results(data: Any, where: str, document: str | None) -> list[Any]:
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise _error(document)(f"{where}: the response has no results list")
    return results


def _next_link(data: Any) -> str | None:
    link = _dig(data, "_links", "next")
    return link if isinstance(link, str) and link else None


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _storage_body(data: Any) -> str | None:
    body = _dig(data, "body", "storage", "value")
    return body if isinstance(body, str) else None


def _identifier(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and _PAGE_ID.fullmatch(value) else None


def _label_names(entries: list[Any]) -> frozenset[str]:
    return frozenset(
        e["name"].strip().lower()
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("name"), str)
    )


def _property_text(
    properties: Mapping[str, Any],
    key: str,
    invalid: list[tuple[str, str]],
    field: str | None = None,
) -> str | None:
    value = properties.get(key)
    if isinstance(value, dict) and len(value) == 1 and ("value" in value or "date" in value):
        value = next(iter(value.values()))  # {"value": ...}, the shape some macros write
    if value is None:
        return None
    if not isinstance(value, str):
        invalid.append(
            (field or key, f"property {key} must be a string, got {shown(value)}; taken as absent")
        )
        return None
    return value.strip() or None


def _instant(
    properties: Mapping[str, Any],
    key: str,
    invalid: list[tuple[str, str]],
    field: str | None = None,
) -> datetime | None:
    value = _property_text(properties, key, invalid, field)
    return read_date(value, f"property {key}", invalid, field=field or key)
