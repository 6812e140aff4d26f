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

The record helpers below (``Record``, ``record_from``, ``assemble``) are shared with the sql
connector, whose rows carry the same logical fields.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import requests

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.frontmatter import cycles
from connectors.httpclient import (
    HttpPolicy,
    base_url_problems,
    get_response,
    make_session,
    redact,
)
from reconciler.model import (
    ProblemKind,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    VersionState,
    parse_instant,
)

__all__ = ["HttpRegistrySource"]

log = logging.getLogger(__name__)

_HASH = re.compile(r"(?:sha256:)?([0-9a-f]{64})", re.IGNORECASE)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DIGITS = re.compile(r"[0-9]+")
_BODY_ACCEPT = "text/markdown, text/plain;q=0.9, */*;q=0.1"
_ENV_PREFIX = "RECONCILER_"

#: Logical fields of a registry record (the HTTP schema's keys, the sql connector's mapping).
FIELDS: tuple[str, ...] = (
    "id",
    "family",
    "version",
    "status",
    "effective_from",
    "effective_to",
    "superseded_by",
    "title",
    "doc_class",
    "content_hash",
)

_OPTIONS = {
    "token_env",
    "page_size",
    "status_map",
    "connect_timeout",
    "read_timeout",
    "retries",
    "backoff_factor",
    "backoff_max",
    "ca_file",
}


# -- records: the logical fields both registry-shaped connectors read -------------------------


class RecordRefused(Exception):
    """A record whose identity cannot be known: it becomes a problem, never a document."""


@dataclass(slots=True)
class Record:
    """One source document's fields, converted, before supersession is resolved."""

    key: str
    family: str | None = None
    version: int | None = None
    state: VersionState | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    successor: str | None = None  # the raw superseded_by key
    title: str | None = None
    doc_class: str | None = None
    content_hash: str | None = None
    #: (``SourceDocument`` field, message) of each field taken as absent.
    invalid: list[tuple[str, str]] = field(default_factory=list)


def sha256_of(body: str) -> str:
    """The ``content_hash`` of a body: sha256 of its UTF-8 bytes, exactly as served."""
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def status_map_problems(value: Any, key: str = "options.status_map") -> list[tuple[str, str]]:
    """What is wrong with a ``status_map`` option (source value -> version state)."""
    if not isinstance(value, Mapping):
        return [(key, "a table mapping source status values to version states")]
    allowed = {state.value for state in VersionState}
    return [
        (f"{key}.{name}", f"must be one of {'|'.join(sorted(allowed))}, got {target!r}")
        for name, target in value.items()
        if not isinstance(target, str) or target.lower() not in allowed
    ]


def parse_status_map(value: Mapping[str, str] | None) -> dict[str, VersionState]:
    """``status_map`` option -> source value -> state (validated by ``status_map_problems``)."""
    return {str(k): VersionState(v.lower()) for k, v in (value or {}).items()}


def record_from(raw: Mapping[str, Any], *, status_map: Mapping[str, VersionState]) -> Record:
    """Convert one record's logical fields; raise RecordRefused when ``id`` is unusable."""
    key = _identity(raw.get("id"))
    record = Record(key=key)
    record.family = _text(raw, "family", record.invalid)
    record.title = _text(raw, "title", record.invalid)
    record.doc_class = _text(raw, "doc_class", record.invalid)
    record.version = _version(raw.get("version"), record.invalid)
    record.state = _status(raw.get("status"), status_map, record.invalid)
    record.effective_from = _instant(raw, "effective_from", record.invalid)
    record.effective_to = _instant(raw, "effective_to", record.invalid)
    successor = raw.get("superseded_by")
    if successor is not None:
        try:
            record.successor = _identity(successor)
        except RecordRefused:
            record.invalid.append(
                (
                    "superseded_by",
                    f"superseded_by must name one document id, got {_shown(successor)}; "
                    "taken as absent",
                )
            )
    record.content_hash = _hash(raw.get("content_hash"), record.invalid)
    return record


def assemble(
    source: str,
    records: Sequence[Record],
    hashes: Mapping[str, str],
    problems: list[SourceProblem],
    *,
    complete: bool,
) -> tuple[SourceDocument, ...]:
    """Documents of the records that have a hash, supersession resolved; problems appended.

    ``records`` are unique by key. A ``superseded_by`` naming the record itself or part of a
    cycle is dropped with a problem; one naming no record is dropped with a problem when the
    scan was complete, and kept as declared when it was not (the successor may be among the
    records the scan could not read).
    """
    keys = {record.key for record in records}
    successors: dict[str, str] = {}
    for record in records:
        if record.successor is None:
            continue
        doc_id = f"{source}:{record.key}"
        if record.successor == record.key:
            problems.append(
                problem(
                    source,
                    ProblemKind.SELF_SUPERSESSION,
                    "superseded_by names the document itself; ignored",
                    key=record.key,
                )
            )
        elif record.successor in keys or not complete:
            successors[record.key] = record.successor
        else:
            problems.append(
                problem(
                    source,
                    ProblemKind.DANGLING_SUPERSEDED_BY,
                    f"superseded_by {record.successor!r} names no document of {source}; ignored",
                    key=record.key,
                )
            )
            log.debug("%s: %s dangles", source, doc_id)
    for cycle in cycles(successors):
        chain = " -> ".join([*cycle, cycle[0]])
        for key in cycle:
            del successors[key]
            problems.append(
                problem(
                    source,
                    ProblemKind.SUPERSESSION_CYCLE,
                    f"superseded_by forms a cycle ({chain}); ignored",
                    key=key,
                )
            )
    return tuple(
        SourceDocument(
            source=source,
            source_key=record.key,
            doc_id=f"{source}:{record.key}",
            content_hash=hashes[record.key],
            family=record.family,
            version=record.version,
            state=record.state,
            effective_from=record.effective_from,
            effective_to=record.effective_to,
            superseded_by=(
                f"{source}:{successors[record.key]}" if record.key in successors else None
            ),
            title=record.title,
            doc_class=record.doc_class,
        )
        for record in sorted(records, key=lambda r: r.key)
        if record.key in hashes
    )


def problem(
    source: str,
    kind: ProblemKind,
    message: str,
    *,
    key: str | None = None,
    path: str | None = None,
    field: str | None = None,
) -> SourceProblem:
    """A problem about one document (``key``) or about the scan (no key)."""
    log.debug("%s: %s %s: %s", source, kind.value, key or path, message)
    return SourceProblem(
        source=source,
        kind=kind,
        message=message,
        path=path,
        doc_id=f"{source}:{key}" if key is not None else None,
        source_key=key,
        field=field,
    )


def intake(
    source: str,
    raw: Mapping[str, Any],
    *,
    status_map: Mapping[str, VersionState],
    records: Mapping[str, Record],
    problems: list[SourceProblem],
    where: str,
    duplicate: str,
) -> tuple[bool, Record | None]:
    """Parse one listed document: (identity known?, the new record or None).

    A record whose identity cannot be read makes the scan partial (False); a repeated id is a
    problem and the first one is kept (True, None). The caller adds the new record's
    ``invalid`` messages with ``keep``.
    """
    try:
        record = record_from(raw, status_map=status_map)
    except RecordRefused as exc:
        problems.append(
            problem(
                source,
                ProblemKind.INVALID_FIELD,
                f"{exc}; ignored, and no absent document is taken as deleted this run",
                path=where,
            )
        )
        return False, None
    if record.key in records:
        problems.append(
            problem(
                source,
                ProblemKind.DUPLICATE_ID,
                f"id {record.key!r} {duplicate}; the first is kept",
                key=record.key,
                path=where,
            )
        )
        return True, None
    return True, record


def keep(
    source: str, record: Record, records: dict[str, Record], problems: list[SourceProblem]
) -> None:
    """Register a new record and report its invalid fields."""
    problems.extend(
        problem(source, ProblemKind.INVALID_FIELD, message, key=record.key, field=name)
        for name, message in record.invalid
    )
    records[record.key] = record


def _identity(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RecordRefused(f"id must be a string or an integer, got {_shown(value)}")
    text = str(value).strip()
    if not text:
        raise RecordRefused("id is empty")
    return text


def _text(raw: Mapping[str, Any], key: str, invalid: list[tuple[str, str]]) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        invalid.append((key, f"{key} must be a string, got {_shown(value)}; taken as absent"))
        return None
    return str(value).strip() or None


def _version(value: Any, invalid: list[tuple[str, str]]) -> int | None:
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, Decimal | float) and value == int(value):
        number = int(value)
    elif isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        number = int(value.strip())
    if number is None or number < 0:
        invalid.append(
            (
                "version",
                f"version must be a non-negative integer, got {_shown(value)}; taken as absent",
            )
        )
        return None
    return number


def _status(
    value: Any, status_map: Mapping[str, VersionState], invalid: list[tuple[str, str]]
) -> VersionState | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        invalid.append(("state", f"status must be a string, got {_shown(value)}; taken as absent"))
        return None
    text = str(value).strip()
    if not text:
        return None
    if text in status_map:
        return status_map[text]
    folded = {k.lower(): v for k, v in status_map.items()}
    if text.lower() in folded:
        return folded[text.lower()]
    try:
        return VersionState(text.lower())
    except ValueError:
        allowed = "|".join([*(s.value for s in VersionState), *status_map])
        invalid.append(("state", f"status must be one of {allowed}, got {text!r}; taken as absent"))
        return None


def _instant(raw: Mapping[str, Any], key: str, invalid: list[tuple[str, str]]) -> datetime | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            if _DATE.fullmatch(text):
                return datetime.fromisoformat(text).replace(tzinfo=UTC)
            return parse_instant(text)
        except (ValueError, OverflowError):
            pass
    invalid.append(
        (
            key,
            f"{key} must be a date or an ISO 8601 date-time, got {_shown(value)}; taken as absent",
        )
    )
    return None


def _hash(value: Any, invalid: list[tuple[str, str]]) -> str | None:
    if value is None or value == "":
        return None
    match = _HASH.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        invalid.append(
            (
                "content_hash",
                f"content_hash must be 'sha256:' and 64 hex digits, got {_shown(value)}; "
                "the body is hashed instead",
            )
        )
        return None
    return "sha256:" + match.group(1).lower()


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def secret_variable_problems(value: Any, key: str) -> list[tuple[str, str]]:
    """What is wrong with an option naming an environment variable that holds a secret."""
    if not isinstance(value, str) or not value.strip():
        return [(key, "the name of an environment variable")]
    if value.upper().startswith(_ENV_PREFIX):
        return [
            (
                key,
                f"{value}: variables starting with {_ENV_PREFIX} are read as config overrides; "
                "name the secret's variable otherwise",
            )
        ]
    return []


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

    def __repr__(self) -> str:
        return f"HttpRegistrySource(name={self.name!r}, url={redact(self.url)!r})"

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with an http source's settings (checked when the config loads)."""
        problems: list[tuple[str, str]] = []
        if settings.path:
            problems.append(("path", "an http source reads a registry: set url, not path"))
        url = settings.url
        if not url:
            problems.append(("url", "an http source needs url (the registry's base URL)"))
        else:
            problems += base_url_problems(
                url,
                example="https://dms.example/api",
                credentials="name a variable in options.token_env",
            )
        options = settings.options
        for key in sorted(options):
            value = options[key]
            where = f"options.{key}"
            if key in ("token", "password", "api_key", "secret"):
                problems.append(
                    (
                        where,
                        "secrets are never read from the config file; name an environment "
                        "variable in options.token_env instead",
                    )
                )
            elif key not in _OPTIONS:
                problems.append((where, "unknown option for an http source"))
            elif key == "token_env":
                problems += secret_variable_problems(value, where)
            elif key == "status_map":
                problems += status_map_problems(value)
            elif key == "ca_file":
                if not isinstance(value, str) or not value:
                    problems.append((where, "the path of a CA bundle (PEM)"))
            elif key == "page_size" and not _number(value, integer=True, minimum=1):
                problems.append((where, "a positive integer"))
            elif key == "retries" and not _number(value, integer=True, minimum=0):
                problems.append((where, "a non-negative integer"))
            elif key.endswith("_timeout") and not _number(value, minimum=0, strict=True):
                problems.append((where, "a positive number of seconds"))
            elif key.startswith("backoff_") and not _number(value, minimum=0):
                problems.append((where, "a non-negative number of seconds"))
        return problems

    @classmethod
    def from_settings(cls, settings: Any) -> HttpRegistrySource:
        """Build from a ``[[sources]]`` entry (type "http")."""
        problems = cls.config_problems(settings)
        if problems:
            raise ConnectorConfigError(
                f"source {settings.name!r}: " + "; ".join(f"{k}: {m}" for k, m in problems)
            )
        options = settings.options
        return cls(
            settings.name,
            settings.url,
            token_env=options.get("token_env"),
            page_size=options.get("page_size"),
            status_map=options.get("status_map"),
            policy=HttpPolicy.from_options(options),
            ca_file=options.get("ca_file"),
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
                    f"a document must be a JSON object, got {_shown(entry)}; ignored, and no "
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
                        f"got {_shown(body_url)}; the default body path is used",
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


def _number(value: Any, *, minimum: float, integer: bool = False, strict: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        return False
    return value > minimum if strict else value >= minimum


def _page(response: requests.Response) -> tuple[list[Any], str | None]:
    """(entries, next cursor) of one listing page; raise _BadPage when it is not schema-shaped."""
    try:
        data = response.json()
    except ValueError:
        raise _BadPage(f"malformed JSON from {redact(response.url)}") from None
    if not isinstance(data, Mapping):
        raise _BadPage(f"expected a JSON object with 'documents', got {_shown(data)}")
    entries = data.get("documents")
    if not isinstance(entries, list):
        raise _BadPage(f"'documents' must be a list, got {_shown(entries)}")
    cursor = data.get("next_cursor")
    if cursor is None or cursor == "":
        return entries, None
    if isinstance(cursor, bool) or not isinstance(cursor, str | int):
        raise _BadPage(f"'next_cursor' must be a string or null, got {_shown(cursor)}")
    return entries, str(cursor)
