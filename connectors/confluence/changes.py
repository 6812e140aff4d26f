"""Which pages changed since the probe's last token, and the pages at some paths: what
``serve``'s watch reads of a Confluence source instead of the whole site.

The changed pages are those of the scope whose last modification is not older than the
newest one the previous token saw (its watermark), asked with one CQL search:
``lastmodified >= now("-Nm")``. CQL dates have a minute's resolution and a literal date is
read in the searching user's time zone, so the window is given relative to the site's own
clock, ``OVERLAP`` minutes wider than the time since the watermark (a page edited in the
same minute as the watermark, or a clock a little off, is listed again: the watch compares
each page's id and version with what it read last, so a page listed twice is no change).

A page trashed, deleted or moved out makes no modification to list; the scope's page count
in the token tells: when it is not the count last read plus the pages new to it, the site is
read whole (``None``). So it is when the tokens cannot be read or the search fails.

The pages at some paths (``SPACE/…/title``) are found by their titles, one CQL search (Data
Center) or one listing a title (Cloud), and kept where the whole path matches; a path that
finds no page now (renamed, trashed, deleted) has the scope listed whole, so that a page is
never taken as gone only because the title search did not find it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime

from connectors.confluence.client import ConfluenceClient, dig
from connectors.confluence.pages import (
    DC_EXPAND,
    PAGE_ID,
    Page,
    cloud_page,
    cloud_spaces,
    dc_page,
)
from connectors.confluence.probing import quoted, scope_query
from connectors.records import parse_date
from reconciler.model import SourceProblem

__all__ = ["OVERLAP", "Token", "changed_pages", "pages_at", "pages_with_ids", "read_token"]

#: Minutes the changed-pages window reaches back past the watermark.
OVERLAP = 2

_TOKEN = re.compile(
    r"confluence:(?P<newest>.*?)\|(?P<total>[0-9]+|None)"
    r"(?:\|L(?P<labels>\w+))?(?:\|P(?P<marks>\w+))?"
)
#: The most ids one Cloud listing is asked for.
_IDS = 50


@dataclass(frozen=True)
class Token:
    """What a probe's token says: the newest modification (None: no page), the count, the
    digest of the pages that carry the supersession label and that of their properties."""

    newest: datetime | None
    total: int | None
    labels: str | None = None
    marks: str | None = None


def read_token(token: str | None) -> Token | None:
    """The token ``probing.newest_change`` made, read back; None when it is not one."""
    found = _TOKEN.fullmatch(token or "")
    if found is None:
        return None
    total = int(found["total"]) if found["total"] != "None" else None
    newest = found["newest"]
    labels, marks = found["labels"], found["marks"]
    if newest == "none":
        return Token(None, total, labels, marks)
    try:
        return Token(parse_date(newest.split(":", 2)[2]), total, labels, marks)
    except (ValueError, IndexError):
        return None


def changed_pages(
    client: ConfluenceClient,
    spaces: tuple[str, ...],
    cql: str | None,
    since: datetime,
    problems: list[SourceProblem],
    *,
    now: datetime,
) -> list[Page | None]:
    """The pages of the scope modified at ``since`` or later (``OVERLAP`` minutes earlier)."""
    minutes = max(math.ceil((now - since).total_seconds() / 60), 0) + OVERLAP
    query = f'{scope_query(spaces, cql)} AND lastmodified >= now("-{minutes}m")'
    return _search(client, spaces, query, problems)


def pages_with_ids(
    client: ConfluenceClient,
    spaces: tuple[str, ...],
    cql: str | None,
    ids: Collection[str],
    problems: list[SourceProblem],
) -> list[Page | None]:
    """The pages of the scope with these ids (a labelled page whose properties moved,
    a successor to resolve with it): one CQL search (Data Center, ``id IN (…)``), or listings
    by id (Cloud, ``_IDS`` a request), pages outside the scope left out."""
    wanted = sorted(page for page in ids if PAGE_ID.fullmatch(page))
    if not wanted:
        return []
    if client.flavor != "cloud":
        query = f"{scope_query(spaces, cql)} AND id IN ({', '.join(wanted)})"
        return _search(client, spaces, query, problems)
    keys = {space_id: key for key, space_id in cloud_spaces(client, spaces).items()}
    return list(_cloud_ids(client, keys, wanted, problems))


def pages_at(
    client: ConfluenceClient,
    spaces: tuple[str, ...],
    cql: str | None,
    paths: Collection[str],
    problems: list[SourceProblem],
    *,
    statuses: tuple[str, ...],
) -> list[Page] | None:
    """The pages at ``paths``; None where one of them finds no page (list the scope)."""
    titles = sorted({path.rsplit("/", 1)[-1] for path in paths})
    if not titles:
        return []
    if client.flavor == "cloud":
        found = list(_cloud_titled(client, spaces, titles, statuses, problems))
    else:
        named = " OR ".join(f"title = {quoted(title)}" for title in titles)
        found = _search(client, spaces, f"{scope_query(spaces, cql)} AND ({named})", problems)
    if any(page is None for page in found):
        return None  # (an entry without an id could be any page)
    at = [page for page in found if page is not None and page.path in paths]
    if {page.path for page in at} != set(paths):
        return None
    return at


def _search(
    client: ConfluenceClient,
    spaces: tuple[str, ...],
    query: str,
    problems: list[SourceProblem],
) -> list[Page | None]:
    """The pages a CQL query finds, as the listing reads them (Cloud: found by REST v1's
    search, read through REST v2 by id, as the listing reads them)."""
    if client.flavor != "cloud":
        url = f"{client.api}/content/search"
        params = {"cql": query, "expand": DC_EXPAND}
        return [
            dc_page(client.name, raw, problems)
            for entries in client.offset_pages(url, params)
            for raw in entries
        ]
    ids: list[str] = []
    search = f"{client.site}/wiki/rest/api/search"
    for entries in client.offset_pages(search, {"cql": query}):
        ids += [str(dig(entry, "content", "id")) for entry in entries]
    if not ids:
        return []
    keys = {space_id: key for key, space_id in cloud_spaces(client, spaces).items()}
    return list(_cloud_ids(client, keys, ids, problems))


def _cloud_ids(
    client: ConfluenceClient, keys: dict[str, str], ids: list[str], problems: list[SourceProblem]
) -> Iterator[Page | None]:
    for at in range(0, len(ids), _IDS):
        params = {"id": ",".join(ids[at : at + _IDS]), "body-format": "storage"}
        for entries in client.cursor_pages(f"{client.api}/pages", params):
            for raw in entries:
                space = dig(raw, "spaceId")
                if space is None:
                    yield None  # (it could be any page)
                elif str(space) in keys:  # (asked by id: a page of another space is not in scope)
                    yield cloud_page(client.name, raw, keys[str(space)], problems)


def _cloud_titled(
    client: ConfluenceClient,
    spaces: tuple[str, ...],
    titles: list[str],
    statuses: tuple[str, ...],
    problems: list[SourceProblem],
) -> Iterator[Page | None]:
    for key, space_id in cloud_spaces(client, spaces).items():
        for title in titles:
            params = {
                "space-id": space_id,
                "title": title,
                "status": ",".join(statuses),
                "body-format": "storage",
            }
            for entries in client.cursor_pages(f"{client.api}/pages", params):
                for raw in entries:
                    yield cloud_page(client.name, raw, key, problems)
