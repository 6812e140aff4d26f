"""The system of record for an in-house document registry that speaks a small JSON protocol.

A team exposes its document-management system with two GET endpoints (the schema is in
``docs/connectors/http-registry.md``)::

    GET {url}/documents?cursor=...&limit=...   -> {"documents": [...], "next_cursor": "..." | null}
    GET {url}/documents/{id}/body              -> the document's text (UTF-8)

The registry is read strictly and a failure is never read as deletions:

- the first page fails: ``SourceUnavailable`` (the engine keeps every document's state);
- a later page fails, or a cursor repeats: the documents read so far, ``complete=False`` and
  an ``UNREADABLE`` problem (so no absent document is taken as deleted);
- one document's body is gone (404/410) or undecodable: that document's problem, the rest goes on;
- one field is invalid (an unknown ``status``, a bad date): the document is yielded with that
  field taken as absent and an ``INVALID_FIELD`` problem;
- an entry without a usable ``id``: a problem, and the snapshot is marked incomplete (it could be
  any registered document, so absence proves nothing this scan).

Records are read with ``connectors.records`` (``Record``, ``record_from``, ``assemble``), as the sql
connector reads its rows, which carry the same logical fields.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Annotated, Any, ClassVar
from urllib.parse import quote, urljoin, urlsplit

import requests
from pydantic import Field

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.httpclient import (
    HttpPolicy,
    base_url_problems,
    get_response,
    make_session,
    redact,
)
from connectors.options import (
    ConnectorSettings,
    HttpPolicyOptions,
    PositiveInt,
    SecretVariable,
    StatusMap,
    checked_url,
    config_problems,
    load,
    text,
    unset,
)
from connectors.records import (
    Record,
    assemble,
    intake,
    keep,
    parse_status_map,
    problem,
    sha256_of,
    shown,
)
from reconciler.model import ProblemKind, SourceProblem, SourceSnapshot

__all__ = ["HttpOptions", "HttpRegistrySource", "HttpSettings"]

log = logging.getLogger(__name__)

_BODY_ACCEPT = "text/markdown, text/plain;q=0.9, */*;q=0.1"


# -- settings ------------------------------------------------------------------------------


class HttpOptions(HttpPolicyOptions):
    """``[sources.options]`` of an http source (docs/connectors/http-registry.md)."""

    unknown_option: ClassVar[str] = "unknown option for an http source"
    secret_keys: ClassVar[frozenset[str]] = frozenset({"token", "password", "api_key", "secret"})
    secret_hint: ClassVar[str] = (
        "secrets are never read from the config file; name an environment variable in "
        "options.token_env instead"
    )

    token_env: SecretVariable | None = None
    page_size: PositiveInt | None = None
    status_map: StatusMap = Field(default_factory=dict)
    ca_file: Annotated[str, text("the path of a CA bundle (PEM)")] | None = None


class HttpSettings(ConnectorSettings):
    """What an http source reads of its ``[[sources]]`` entry."""

    path: Annotated[None, unset("an http source reads a registry: set url, not path")] = None
    url: Annotated[
        str,
        checked_url(
            partial(
                base_url_problems,
                example="https://dms.example/api",
                credentials="name a variable in options.token_env",
            ),
            missing="an http source needs url (the registry's base URL)",
        ),
    ] = Field(default=None, validate_default=True)
    options: HttpOptions = Field(default_factory=HttpOptions)


# -- the connector -------------------------------------------------------------------------


class _BadPage(Exception):
    """A page of the listing that is not shaped as the schema says."""


class _Undecodable(DocumentUnreadable):
    """A body that is not UTF-8."""


class HttpRegistrySource:
    """A JSON document registry over HTTP (docs/connectors/http-registry.md)."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        token_env: str | None = None,
        page_size: int | None = None,
        status_map: Mapping[str, str] | None = None,
        policy: HttpPolicy | None = None,
        ca_file: str | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.token_env = token_env
        self.page_size = page_size
        self.status_map = parse_status_map(status_map)
        self.policy = policy or HttpPolicy()
        self.ca_file = ca_file
        self._clock = clock or (lambda: datetime.now(UTC))
        self._session: requests.Session | None = None
        self._body_urls: dict[str, str] = {}  # source_key -> body_url, from the last scan
        #: The listing's ``Last-Modified`` at the last scan (``changed_at``).
        self._listed_at: datetime | None = None

    def __repr__(self) -> str:
        return f"HttpRegistrySource(name={self.name!r}, url={redact(self.url)!r})"

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with an http source's settings (checked when the config loads)."""
        return config_problems(HttpSettings, settings)

    @classmethod
    def from_settings(cls, settings: Any) -> HttpRegistrySource:
        """Build from a ``[[sources]]`` entry (type "http")."""
        config = load(HttpSettings, settings)
        options = config.options
        return cls(
            settings.name,
            config.url,
            token_env=options.token_env,
            page_size=options.page_size,
            status_map=options.status_map,
            policy=HttpPolicy.from_options(options.policy_options()),
            ca_file=options.ca_file,
        )

    # -- the SystemOfRecord contract -------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """List every document (page by page) and hash the bodies the registry gives no hash of."""
        scanned_at = self._clock()
        session = self._open()
        problems: list[SourceProblem] = []
        records: dict[str, Record] = {}
        complete = True
        failure: str | None = None
        cursor: str | None = None
        seen_cursors: set[str] = set()
        page = 0
        while True:
            page += 1
            try:
                response = get_response(
                    session,
                    f"{self.url}/documents",
                    policy=self.policy,
                    params=self._page_params(cursor),
                    source=self.name,
                )
                entries, next_cursor = _page(response)
                if page == 1:
                    self._listed_at = _http_date(response.headers.get("Last-Modified"))
            except ConnectorConfigError as exc:
                raise ConnectorConfigError(self._auth_hint(str(exc))) from None
            except (SourceUnavailable, _BadPage) as exc:
                failure = f"page {page} of the listing: {exc}"
                break
            for index, entry in enumerate(entries):
                if not self._take(entry, f"page {page}, documents[{index}]", records, problems):
                    complete = False
            if next_cursor is None:
                break
            if next_cursor in seen_cursors:
                failure = f"page {page} of the listing repeats cursor {next_cursor!r}"
                break
            seen_cursors.add(next_cursor)
            cursor = next_cursor

        hashes: dict[str, str] = {}
        body_failure = self._hash_all(records, hashes, problems)
        failure = "; ".join(f for f in (failure, body_failure) if f) or None
        if failure is not None:
            if not records:
                raise SourceUnavailable(f"{self.name}: {failure}")
            complete = False
            problems.append(
                problem(
                    self.name,
                    ProblemKind.UNREADABLE,
                    f"the scan stopped part-way ({failure}); no absent document is taken as "
                    "deleted this run",
                    path=redact(self.url),
                )
            )
        documents = assemble(self.name, list(records.values()), hashes, problems, complete=complete)
        if failure is not None and not documents:
            raise SourceUnavailable(f"{self.name}: {failure}")
        self._body_urls = {key: url for key, url in self._body_urls.items() if key in records}
        log.info(
            "http %s: %d document(s), %d problem(s)%s",
            self.name,
            len(documents),
            len(problems),
            "" if complete else " (partial scan)",
        )
        return SourceSnapshot(
            source=self.name,
            documents=documents,
            problems=tuple(problems),
            scanned_at=scanned_at,
            complete=complete,
        )

    def changed_at(self, source_key: str) -> datetime | None:
        """The listing's ``Last-Modified`` as the last scan read it: the registry's date of its
        newest change, which ``serve``'s watch dates each change of that read by (an older
        one of the same read is counted from then); None without the header."""
        return self._listed_at

    def probe(self, token: str | None) -> str | None:
        """The listing's validator (its ``ETag``, else its ``Last-Modified``), asked with a
        conditional request (``If-None-Match`` / ``If-Modified-Since``): ``token`` again when
        the registry answers 304; None when it gives no validator (the watch then scans)."""
        headers: dict[str, str] = {}
        if token is not None and token.startswith("etag:"):
            headers["If-None-Match"] = token[len("etag:") :]
        elif token is not None and token.startswith("modified:"):
            headers["If-Modified-Since"] = token[len("modified:") :]
        response = get_response(
            self._open(),
            f"{self.url}/documents",
            policy=self.policy,
            params=self._page_params(None),
            headers=headers,
            source=self.name,
        )
        try:
            if response.status_code == 304:
                return token
            if etag := response.headers.get("ETag"):
                return f"etag:{etag}"
            if modified := response.headers.get("Last-Modified"):
                return f"modified:{modified}"
            return None
        finally:
            response.close()

    def read_body(self, source_key: str) -> str:
        """Return one document's body (UTF-8 text); raise DocumentUnreadable when it is gone."""
        session = self._open()
        url = self._body_urls.get(source_key) or self._body_url(source_key)
        try:
            response = get_response(
                session,
                url,
                policy=self.policy,
                headers={"Accept": _BODY_ACCEPT},
                source=self.name,
                document=source_key,
            )
        except ConnectorConfigError as exc:
            raise ConnectorConfigError(self._auth_hint(str(exc))) from None
        try:
            return response.content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Undecodable(
                f"{self.name}: {source_key}: body is not UTF-8 (byte {exc.start})"
            ) from None

    def close(self) -> None:
        """Close the session's connections."""
        if self._session is not None:
            self._session.close()
            self._session = None

    # -- helpers ---------------------------------------------------------------------------

    def _open(self) -> requests.Session:
        if self._session is None:
            session = make_session(self.policy)
            if self.token_env:
                token = os.environ.get(self.token_env, "").strip()
                if not token:
                    raise ConnectorConfigError(
                        f"{self.name}: environment variable {self.token_env} (options.token_env) "
                        "is not set"
                    )
                session.headers["Authorization"] = f"Bearer {token}"
            if self.ca_file:
                session.verify = self.ca_file
            self._session = session
        return self._session

    def _auth_hint(self, message: str) -> str:
        if self.token_env:
            return f"{message} (the token is read from {self.token_env}, options.token_env)"
        return f"{message} (no token is sent: set options.token_env)"

    def _page_params(self, cursor: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if cursor is not None:
            params["cursor"] = cursor
        if self.page_size:
            params["limit"] = self.page_size
        return params

    def _body_url(self, key: str) -> str:
        return f"{self.url}/documents/{quote(key, safe='')}/body"

    def _take(
        self, entry: Any, where: str, records: dict[str, Record], problems: list[SourceProblem]
    ) -> bool:
        """Add one listing entry; False when its identity cannot be known."""
        if not isinstance(entry, Mapping):
            problems.append(
                problem(
                    self.name,
                    ProblemKind.INVALID_FIELD,
                    f"a document must be a JSON object, got {shown(entry)}; ignored, and no "
                    "absent document is taken as deleted this run",
                    path=where,
                )
            )
            return False
        known, record = intake(
            self.name,
            entry,
            status_map=self.status_map,
            records=records,
            problems=problems,
            where=where,
            duplicate=f"is listed twice ({where})",
        )
        if record is None:
            return known
        body_url = entry.get("body_url")
        if body_url is not None:
            resolved = self._resolve_body_url(body_url)
            if resolved is None:
                record.invalid.append(
                    (
                        "body_url",
                        f"body_url must be a URL on the registry's own host, "
                        f"got {shown(body_url)}; the default body path is used",
                    )
                )
            else:
                self._body_urls[record.key] = resolved
        else:
            self._body_urls.pop(record.key, None)
        keep(self.name, record, records, problems)
        return True

    def _resolve_body_url(self, value: Any) -> str | None:
        """``body_url`` resolved against the registry; None unless it stays on its origin.

        The bearer token goes with every request of the session: a body_url elsewhere would
        hand it to another host.
        """
        if not isinstance(value, str) or not value.strip():
            return None
        resolved = urljoin(self.url + "/", value.strip())
        base, target = urlsplit(self.url), urlsplit(resolved)
        if (base.scheme, base.netloc) != (target.scheme, target.netloc):
            return None
        return resolved

    def _hash_all(
        self,
        records: Mapping[str, Record],
        hashes: dict[str, str],
        problems: list[SourceProblem],
    ) -> str | None:
        """Fill ``hashes``; fetch the bodies of records without one. Return the failure, if any.

        After one body request fails for the source's sake (5xx, timeout) no other is made:
        the records left unhashed are not yielded and the scan is partial.
        """
        failure: str | None = None
        for key, record in records.items():
            if record.content_hash is not None:
                hashes[key] = record.content_hash
        for key, record in records.items():
            if record.content_hash is not None:
                continue
            if failure is not None:
                break  # the registry is failing: no more body requests this scan
            try:
                hashes[key] = sha256_of(self.read_body(key))
            except _Undecodable as exc:
                problems.append(problem(self.name, ProblemKind.UNDECODABLE, str(exc), key=key))
            except DocumentUnreadable as exc:
                problems.append(problem(self.name, ProblemKind.UNREADABLE, str(exc), key=key))
            except SourceUnavailable as exc:
                failure = f"the body of {key!r}: {exc}"
        return failure


def _page(response: requests.Response) -> tuple[list[Any], str | None]:
    """(entries, next cursor) of one listing page; raise _BadPage when it is not schema-shaped."""
    try:
        data = response.json()
    except ValueError:
        raise _BadPage(f"malformed JSON from {redact(response.url)}") from None
    if not isinstance(data, Mapping):
        raise _BadPage(f"expected a JSON object with 'documents', got {shown(data)}")
    entries = data.get("documents")
    if not isinstance(entries, list):
        raise _BadPage(f"'documents' must be a list, got {shown(entries)}")
    cursor = data.get("next_cursor")
    if cursor is None or cursor == "":
        return entries, None
    if isinstance(cursor, bool) or not isinstance(cursor, str | int):
        raise _BadPage(f"'next_cursor' must be a string or null, got {shown(cursor)}")
    return entries, str(cursor)


def _http_date(value: str | None) -> datetime | None:
    """An HTTP date (``Last-Modified``) as a UTC datetime; None where there is none."""
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).astimezone(UTC)
    except (TypeError, ValueError):
        return None
