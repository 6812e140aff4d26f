"""Whether anything in a Confluence source's scope changed, in one small request: a CQL
search of its pages newest-modified first (``order by lastmodified desc``, one result, its
content's ``version``), whose answer also says how many pages match (``totalSize``). The
newest page's id, version and modification date, with that count, are the source's token: an
edit, a new page or a move into the scope makes another page (or version) the newest; a page
trashed or moved out lowers the count. Both flavors answer it at REST v1's search
(``/rest/api/search``; Cloud keeps it at ``/wiki/rest/api/search``).

A label added or removed makes no new version and no new modification date (nor does a
content property set), so that search cannot see it; the supersession label is what declares
a page superseded, so a second search lists the ids of the scope's pages that carry it
(``label = "…"``, ids only, paged), and their digest is part of the token: the label put on
or taken off a page moves it. A content property changed alone (the successor pointer, a
start date) still moves nothing: it waits for the full job (which reports it as the
watch's miss).
"""

from __future__ import annotations

import hashlib
from typing import Any

from connectors.base import DocumentUnreadable
from connectors.confluence.client import ConfluenceClient, dig, results

__all__ = ["newest_change", "quoted", "scope_query"]


def scope_query(spaces: tuple[str, ...], cql: str | None) -> str:
    """The CQL of the pages in scope (as the Data Center listing asks it with ``cql``)."""
    query = f"type = page AND ({cql})" if cql is not None else "type = page"
    if spaces:
        keys = ", ".join(f'"{key}"' for key in spaces)
        query = f"space IN ({keys}) AND {query}"
    return query


def quoted(text: str) -> str:
    """A CQL string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def newest_change(
    client: ConfluenceClient, spaces: tuple[str, ...], cql: str | None, label: str | None = None
) -> str | None:
    """The scope's token (see the module), or None where the site does not answer the
    search (the watch then reads the source at each poll). ``SourceUnavailable`` when the
    site cannot be reached."""
    api = f"{client.site}/wiki/rest/api" if client.flavor == "cloud" else client.api
    params: dict[str, Any] = {
        "cql": f"{scope_query(spaces, cql)} order by lastmodified desc",
        "limit": 1,
        "expand": "content.version",
    }
    try:
        data = client.get(f"{api}/search", params, document="the last-modified search")
    except DocumentUnreadable:  # (404, 400: no such search on this site)
        return None
    found = results(data, "the last-modified search", None)
    total = data.get("totalSize")
    labelled = f"|L{_labelled(client, api, spaces, cql, label)}" if label else ""
    if not found:
        return f"confluence:none|{total}{labelled}"
    newest = found[0] if isinstance(found[0], dict) else {}
    page, number = dig(newest, "content", "id"), dig(newest, "content", "version", "number")
    return f"confluence:{page}:{number}:{newest.get('lastModified')}|{total}{labelled}"


def _labelled(
    client: ConfluenceClient, api: str, spaces: tuple[str, ...], cql: str | None, label: str
) -> str:
    """The digest of the ids of the scope's pages that carry ``label`` ("none" where the
    site does not answer the search: the label is then not followed)."""
    query = f"{scope_query(spaces, cql)} AND label = {quoted(label)}"
    ids: list[str] = []
    try:
        for entries in client.offset_pages(f"{api}/search", {"cql": query}, "the label search"):
            ids += [str(dig(entry, "content", "id")) for entry in entries]
    except DocumentUnreadable:
        return "none"
    return hashlib.sha256(",".join(sorted(ids)).encode()).hexdigest()[:16]
