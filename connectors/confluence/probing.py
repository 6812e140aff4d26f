"""Whether anything in a Confluence source's scope changed, in one small request: a CQL
search of its pages newest-modified first (``order by lastmodified desc``, one result, its
content's ``version``), whose answer also says how many pages match (``totalSize``). The
newest page's id, version and modification date, with that count, are the source's token: an
edit, a new page or a move into the scope makes another page (or version) the newest; a page
trashed or moved out lowers the count. Both flavors answer it at REST v1's search
(``/rest/api/search``; Cloud keeps it at ``/wiki/rest/api/search``).

A label added or removed makes no new version and no new modification date (nor does a
content property set), so that search cannot see it; the supersession label is what declares
a page superseded, so a second search lists the scope's pages that carry it (REST v1's
content search, ``label = "…"``, paged), and the digest of their ids is part of the token: the
label put on or taken off a page moves it. The successor property counts only on a page that
carries the label, so that search also expands it on each page it lists
(``expand=metadata.properties.<key>``: the property's value, as the page's properties read
it): the digest of each labelled page's pointer is part of the token too, so a pointer set,
changed or removed alone moves it, and ``pointers`` say which page's. A property other than
the pointer (a start date) changed alone still moves nothing: it waits for the full job (which
reports it as the watch's miss).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from connectors.base import DocumentUnreadable
from connectors.confluence.client import ConfluenceClient, dig, results

__all__ = ["ABSENT", "Probe", "newest_change", "pointer_print", "quoted", "scope_query"]

#: What a page's pointer prints as where it has no successor property.
ABSENT = "-"


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


@dataclass(frozen=True)
class Probe:
    """A probe's answer: the token (None: the site does not answer the search), and the
    pointer each labelled page carries as the label search read it (``pointer_print``; None
    where that search was not answered)."""

    token: str | None
    pointers: Mapping[str, str] | None = None


def pointer_print(value: Any) -> str:
    """What a successor property's value is compared by (``ABSENT``: no such property)."""
    if value is None:
        return ABSENT
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _digest(items: list[str]) -> str:
    return hashlib.sha256(json.dumps(sorted(items)).encode()).hexdigest()[:16]


def newest_change(
    client: ConfluenceClient,
    spaces: tuple[str, ...],
    cql: str | None,
    label: str | None = None,
    pointer: str | None = None,
) -> Probe:
    """The scope's token (see the module), with the pointers the label search read. The
    token is None where the site does not answer the search (the watch then reads the
    source at each poll). ``SourceUnavailable`` when the site cannot be reached."""
    api = f"{client.site}/wiki/rest/api" if client.flavor == "cloud" else client.api
    params: dict[str, Any] = {
        "cql": f"{scope_query(spaces, cql)} order by lastmodified desc",
        "limit": 1,
        "expand": "content.version",
    }
    try:
        data = client.get(f"{api}/search", params, document="the last-modified search")
    except DocumentUnreadable:  # (404, 400: no such search on this site)
        return Probe(None)
    found = results(data, "the last-modified search", None)
    total = data.get("totalSize")
    labelled, pointers = "", None
    if label:
        labelled, pointers = _labelled(client, api, scope_query(spaces, cql), label, pointer)
    if not found:
        return Probe(f"confluence:none|{total}{labelled}", pointers)
    newest = found[0] if isinstance(found[0], dict) else {}
    page, number = dig(newest, "content", "id"), dig(newest, "content", "version", "number")
    return Probe(
        f"confluence:{page}:{number}:{newest.get('lastModified')}|{total}{labelled}", pointers
    )


def _labelled(
    client: ConfluenceClient, api: str, scope: str, label: str, pointer: str | None
) -> tuple[str, Mapping[str, str] | None]:
    """The token's label part (``|L`` and the digest of the ids of the scope's pages that
    carry ``label``, ``|P`` and the digest of their pointers), and each one's pointer;
    ``|Lnone`` where the site does not answer the search (the label is then not followed)."""
    params: dict[str, Any] = {"cql": f"{scope} AND label = {quoted(label)}"}
    if pointer is not None:
        params["expand"] = f"metadata.properties.{pointer}"
    pointers: dict[str, str] = {}
    try:
        for entries in client.offset_pages(f"{api}/content/search", params, "the label search"):
            for entry in entries:
                value = dig(entry, "metadata", "properties", pointer or "", "value")
                pointers[str(dig(entry, "id"))] = pointer_print(value)
    except DocumentUnreadable:
        return "|Lnone", None
    part = f"|L{_digest(list(pointers))}"
    if pointer is not None:
        part += f"|P{_digest([f'{page}={mark}' for page, mark in pointers.items()])}"
    return part, MappingProxyType(pointers)
