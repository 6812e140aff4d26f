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
label put on or taken off a page moves it. That search also expands, on each page it lists,
every property the connector reads of a page (``watched_properties``: the successor pointer,
which counts only on a labelled page, the start and end dates and the document class;
``expand=metadata.properties.<key>,…``: each property's value, as the page's properties read
it): the digest of each labelled page's properties (``marks``) is part of the token too, so a
pointer, a date or a class set, changed or removed alone on a labelled page moves it, and
``marks`` say which page's. The same properties changed alone on a page without the label
still move nothing (the search does not list it; listing the whole scope at each poll would
cost a request per ``page_size`` pages): that waits for the full job (which reports it as the
watch's miss), unless the source asks for that cost (``watch_properties = "all"``: ``every``):
the second search then lists every page of the scope, its labels expanded too, the label
digest is taken from them, and the properties digest covers every page.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from connectors.base import DocumentUnreadable
from connectors.confluence.client import ConfluenceClient, dig, label_names, results

__all__ = [
    "ABSENT",
    "DOC_CLASS",
    "EFFECTIVE_TO",
    "Probe",
    "marks_print",
    "newest_change",
    "quoted",
    "scope_query",
    "watched_properties",
]

#: What a page's properties print as where it has none of those the probe reads.
ABSENT = "-"
#: The content properties a page's end date and document class are read from.
EFFECTIVE_TO, DOC_CLASS = "effective_to", "doc_class"


def watched_properties(successor_property: str, effective_from_property: str) -> tuple[str, ...]:
    """The keys of the properties a page declares anything by (``declaration``): the pointer
    first, each key once."""
    keys = (successor_property, effective_from_property, EFFECTIVE_TO, DOC_CLASS)
    return tuple(dict.fromkeys(keys))


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
    properties each labelled page carries as the label search read them (``marks_print``;
    None where that search was not answered)."""

    token: str | None
    marks: Mapping[str, str] | None = None


def marks_print(properties: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    """What a page's properties ``keys`` are compared by (``ABSENT``: none of them; a
    property whose value is null counts as absent, as the declaration reads it)."""
    found = {key: properties[key] for key in keys if properties.get(key) is not None}
    if not found:
        return ABSENT
    return json.dumps(found, sort_keys=True, separators=(",", ":"), default=str)


def _digest(items: list[str]) -> str:
    return hashlib.sha256(json.dumps(sorted(items)).encode()).hexdigest()[:16]


def newest_change(
    client: ConfluenceClient,
    spaces: tuple[str, ...],
    cql: str | None,
    label: str | None = None,
    properties: tuple[str, ...] = (),
    *,
    every: bool = False,
) -> Probe:
    """The scope's token (see the module), with the properties the label search read of
    each labelled page (``properties``: their keys, ``watched_properties``; ``every``: of
    every page, the whole scope listed instead of its labelled pages). The
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
    labelled, marks = "", None
    if label:
        labelled, marks = _labelled(
            client, api, scope_query(spaces, cql), label, properties, every=every
        )
    if not found:
        return Probe(f"confluence:none|{total}{labelled}", marks)
    newest = found[0] if isinstance(found[0], dict) else {}
    page, number = dig(newest, "content", "id"), dig(newest, "content", "version", "number")
    return Probe(
        f"confluence:{page}:{number}:{newest.get('lastModified')}|{total}{labelled}", marks
    )


def _labelled(
    client: ConfluenceClient,
    api: str,
    scope: str,
    label: str,
    keys: tuple[str, ...],
    *,
    every: bool = False,
) -> tuple[str, Mapping[str, str] | None]:
    """The token's label part (``|L`` and the digest of the ids of the scope's pages that
    carry ``label``, ``|P`` and the digest of their properties ``keys``), and each one's
    properties (``marks_print``; ``every``: of each page of the scope, listed whole with its
    labels); ``|Lnone`` where the site does not answer the search (the label is then not
    followed)."""
    expand = [f"metadata.properties.{key}" for key in keys]  # (comma-separated: one request)
    params: dict[str, Any] = {"cql": f"{scope} AND label = {quoted(label)}"}
    if every:
        params = {"cql": scope}
        expand.append("metadata.labels")
    if expand:
        params["expand"] = ",".join(expand)
    marks: dict[str, str] = {}
    labelled: list[str] = []
    try:
        for entries in client.offset_pages(f"{api}/content/search", params, "the label search"):
            for entry in entries:
                read = {key: dig(entry, "metadata", "properties", key, "value") for key in keys}
                page = str(dig(entry, "id"))
                marks[page] = marks_print(read, keys)
                names = dig(entry, "metadata", "labels", "results")
                if not every or label in label_names(names if isinstance(names, list) else []):
                    labelled.append(page)
    except DocumentUnreadable:
        return "|Lnone", None
    part = f"|L{_digest(labelled)}"
    if keys:
        part += f"|P{_digest([f'{page}={mark}' for page, mark in marks.items()])}"
    return part, MappingProxyType(marks)
