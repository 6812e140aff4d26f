"""Which Confluence pages a source holds, as listed: every page in scope (Cloud: the spaces, by
status; Data Center: the spaces by status, or a CQL query), each listed entry read into a
``Page`` (its id, status, title, path, storage-format body, version number and date, and its
labels where the listing carries them).

One page is one document and its page id is its identity (doc id ``<source>:<page id>``): it
survives moves and renames. A listed entry without a usable id could be any page, so the scan
is marked partial; a version number or date that cannot be read is taken as absent, with a
problem. A space that does not resolve is a configuration error (its pages would look
deleted); a listing that fails part-way raises ``Partial``, and what was read is kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.confluence.client import ConfluenceClient, dig, label_names
from connectors.options import is_integer
from connectors.records import DateOutOfRange, parse_date, shown
from reconciler.model import ProblemKind, SourceProblem

__all__ = [
    "DC_EXPAND",
    "PAGE_ID",
    "Page",
    "Partial",
    "cloud_page",
    "cloud_spaces",
    "dc_page",
    "doc_id",
    "label_names",
    "list_pages",
    "page_problem",
    "storage_body",
]

log = logging.getLogger(__name__)

PAGE_ID = re.compile(r"[0-9]+")
DC_EXPAND = "version,history,ancestors,metadata.labels,body.storage,space"


@dataclass(slots=True)
class Page:
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


class Partial(Exception):
    """The scan stops here: what was read so far is returned, marked incomplete."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def doc_id(source: str, page_id: str) -> str:
    """The doc id of a page of the source ``source``."""
    return f"{source}:{page_id}"


def page_problem(
    source: str,
    kind: ProblemKind,
    message: str,
    page: Page,
    doc: str | None = None,
    *,
    field: str | None = None,
) -> SourceProblem:
    """A problem with one page (its doc id unless ``doc`` names another)."""
    log.debug("confluence %s: %s page %s: %s", source, kind.value, page.id, message)
    return SourceProblem(
        source=source,
        kind=kind,
        message=message,
        path=page.path,
        doc_id=doc or doc_id(source, page.id),
        source_key=page.id,
        field=field,
    )


def list_pages(
    client: ConfluenceClient,
    *,
    spaces: Sequence[str],
    cql: str | None,
    statuses: Sequence[str],
    problems: list[SourceProblem],
) -> Iterator[Page | None]:
    """Every page in scope (None for an entry without an id); Partial when a page fails.

    Resolving the scope (space keys) is not wrapped: failing there, nothing was read, and
    ``SourceUnavailable`` / ``ConnectorConfigError`` reach the caller as they are.
    """
    if client.flavor == "cloud":
        for key, space_id in cloud_spaces(client, spaces).items():
            for status in statuses:
                params = {
                    "space-id": space_id,
                    "status": status,
                    "body-format": "storage",
                    "limit": client.page_size,
                }
                what = f"pages of space {key} (status {status})"
                for raw in _listing(client.cursor_pages, f"{client.api}/pages", params, what):
                    yield cloud_page(client.name, raw, key, problems)
        return
    scopes: list[tuple[str, str, dict[str, Any]]] = []
    if cql is not None:
        query = f"type = page AND ({cql})"
        if spaces:
            keys = ", ".join(f'"{key}"' for key in spaces)
            query = f"space IN ({keys}) AND {query}"
        scopes.append(
            (
                f"CQL {query!r}",
                f"{client.api}/content/search",
                {"cql": query, "expand": DC_EXPAND},
            )
        )
    else:
        for key in spaces:
            _dc_space(client, key)
            for status in statuses:
                params = {
                    "type": "page",
                    "spaceKey": key,
                    "status": status,
                    "expand": DC_EXPAND,
                }
                scopes.append(
                    (f"pages of space {key} (status {status})", f"{client.api}/content", params)
                )
    for what, url, params in scopes:
        for raw in _listing(client.offset_pages, url, params, what):
            yield dc_page(client.name, raw, problems)


def storage_body(data: Any) -> str | None:
    """The storage-format body (XHTML) of a page as the API returns it, if it came with one."""
    body = dig(data, "body", "storage", "value")
    return body if isinstance(body, str) else None


# -- listing -------------------------------------------------------------------------------


def _listing(
    pager: Callable[[str, dict[str, Any]], Iterator[list[Any]]],
    url: str,
    params: dict[str, Any],
    what: str,
) -> Iterator[Any]:
    """Entries of one paged listing; a failing page of it raises Partial."""
    read = 0
    try:
        for entries in pager(url, params):
            read += 1
            yield from entries
    except SourceUnavailable as exc:
        raise Partial(f"listing {what} failed after {read} page(s) of results: {exc}") from None


def cloud_spaces(client: ConfluenceClient, spaces: Sequence[str]) -> dict[str, str]:
    """Space key -> space id; a key that does not resolve is a configuration error."""
    found: dict[str, str] = {}
    params = {"keys": ",".join(spaces), "limit": 250}
    for entries in client.cursor_pages(f"{client.api}/spaces", params):
        for entry in entries:
            if isinstance(entry, dict) and entry.get("key") in spaces:
                space_id = _identifier(entry.get("id"))
                if space_id is not None:
                    found[entry["key"]] = space_id
    missing = [key for key in spaces if key not in found]
    if missing:
        raise ConnectorConfigError(
            f"confluence {client.name!r}: space(s) {', '.join(missing)} not found or not "
            f"visible with the token in {client.token_env}: fix options.spaces or the "
            "token's permissions"
        )
    return {key: found[key] for key in spaces}


def _dc_space(client: ConfluenceClient, key: str) -> None:
    """Refuse a space that does not exist: its pages would look deleted."""
    try:
        client.get(f"{client.api}/space/{quote(key, safe='')}", {}, document=f"space {key}")
    except DocumentUnreadable:
        raise ConnectorConfigError(
            f"confluence {client.name!r}: space {key} not found or not visible with the "
            f"token in {client.token_env}: fix options.spaces or the token's permissions"
        ) from None


# -- one listed entry ----------------------------------------------------------------------


def cloud_page(source: str, raw: Any, space: str, problems: list[SourceProblem]) -> Page | None:
    page_id = _identifier(raw.get("id")) if isinstance(raw, dict) else None
    if page_id is None:
        problems.append(_loose(source, "a listed page has no usable id; scan marked partial"))
        return None
    version = raw.get("version") if isinstance(raw.get("version"), dict) else {}
    title = raw.get("title") if isinstance(raw.get("title"), str) else None
    return _page(
        page_id,
        raw.get("status"),
        title,
        f"{space}/{title or page_id}",
        storage_body(raw),
        version.get("number"),
        version.get("createdAt"),
        None,
    )


def dc_page(source: str, raw: Any, problems: list[SourceProblem]) -> Page | None:
    page_id = _identifier(raw.get("id")) if isinstance(raw, dict) else None
    if page_id is None:
        problems.append(_loose(source, "a listed page has no usable id; scan marked partial"))
        return None
    version = raw.get("version") if isinstance(raw.get("version"), dict) else {}
    title = raw.get("title") if isinstance(raw.get("title"), str) else None
    space = dig(raw, "space", "key")
    ancestors = raw.get("ancestors") if isinstance(raw.get("ancestors"), list) else []
    trail = [
        a["title"] for a in ancestors if isinstance(a, dict) and isinstance(a.get("title"), str)
    ]
    path = "/".join([space if isinstance(space, str) else "?", *trail, title or page_id])
    labels = dig(raw, "metadata", "labels", "results")
    return _page(
        page_id,
        raw.get("status"),
        title,
        path,
        storage_body(raw),
        version.get("number"),
        version.get("when"),
        label_names(labels) if isinstance(labels, list) else frozenset(),
    )


def _page(
    page_id: str,
    status: Any,
    title: str | None,
    path: str,
    body: str | None,
    number: Any,
    when: Any,
    labels: frozenset[str] | None,
) -> Page:
    page = Page(
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


def _identifier(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and PAGE_ID.fullmatch(value) else None


def _loose(source: str, message: str) -> SourceProblem:
    return SourceProblem(source=source, kind=ProblemKind.UNREADABLE, message=message)
