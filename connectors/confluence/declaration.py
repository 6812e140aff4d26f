"""What one Confluence page declares, read from its status, its labels and its content
properties: a ``Draft``, before successors are resolved across the scan (``supersession``).

- ``version``: the Confluence version number; ``effective_from``: the ``effective_from`` content
  property (its name is ``effective_from_property``) when present, else the date of the page's
  current version; ``effective_to`` and ``doc_class`` from content properties of those names
  when present;
- state from the page status (``options.STATUS_STATES``): ``current`` -> current, ``archived``
  -> retired, ``trashed`` -> retired (listed on purpose, so a page moved to the trash is
  retired at once rather than after the missing-in-source grace), ``draft`` -> draft;
- supersession: the supersession label (default ``superseded``) *and* the successor content
  property (default ``superseded_by``) naming the successor page id (an id, ``<source>:<id>``
  or a page URL). The label is the declaration, the property its pointer: a label without a
  usable pointer is an ``INVALID_FIELD`` problem and the page keeps the state its status gives;
  a property without the label is ignored (removing the label undoes a supersession).

A field that cannot be read is taken as absent, with an ``INVALID_FIELD`` problem. A page whose
own requests (labels, properties) answer 404 raises ``DocumentUnreadable``: that page's problem,
and the scan goes on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from connectors.base import DocumentUnreadable
from connectors.confluence.client import ConfluenceClient
from connectors.confluence.options import STATUS_STATES
from connectors.confluence.pages import PAGE_ID, Page, doc_id, label_names, page_problem
from connectors.confluence.probing import (
    DOC_CLASS,
    EFFECTIVE_TO,
    marks_print,
    watched_properties,
)
from connectors.records import read_date, shown
from reconciler.model import ProblemKind, SourceProblem, VersionState

__all__ = ["Draft", "declare"]

_PAGE_URL = re.compile(r"/pages/([0-9]+)(?:[/?#]|$)")


@dataclass(slots=True)
class Draft:
    """One page's declaration, before successors are resolved across the scan."""

    page: Page
    state: VersionState | None
    effective_from: datetime | None
    effective_to: datetime | None
    doc_class: str | None
    labelled: bool
    successor: str | None  # the successor's page id, as the property names it
    #: The properties the probe reads (``probing.watched_properties``) as it compares them
    #: (``probing.marks_print``), on a labelled page (on every page where the probe reads
    #: them all, ``watch_properties = "all"``); None on another.
    mark: str | None = None


def declare(
    client: ConfluenceClient,
    page: Page,
    problems: list[SourceProblem],
    *,
    supersession_label: str,
    successor_property: str,
    effective_from_property: str,
    marked: bool = False,
) -> Draft:
    """Read a page's labels and properties; DocumentUnreadable when its requests 404.
    ``marked``: the probe reads every page's properties (not only a labelled page's)."""
    name = client.name
    if page.body is None:
        raise DocumentUnreadable(
            f"confluence {name!r}: page {page.id} came without a storage-format body"
        )
    doc = doc_id(name, page.id)
    for field, message in page.invalid:
        problems.append(
            page_problem(name, ProblemKind.INVALID_FIELD, message, page, doc, field=field)
        )
    state = STATUS_STATES.get(page.status)
    if state is None:
        problems.append(
            page_problem(
                name,
                ProblemKind.INVALID_FIELD,
                f"page status {page.status!r} is not one of {', '.join(STATUS_STATES)}; "
                "a registered page keeps its state, a new one is taken as unknown",
                page,
                doc,
                field="state",
            )
        )
    draft = Draft(
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
    labels = page.labels if page.labels is not None else _cloud_labels(client, page.id)
    properties = _properties(client, page.id)
    invalid: list[tuple[str, str]] = []
    declared_from = _instant(properties, effective_from_property, invalid, field="effective_from")
    if declared_from is not None:
        draft.effective_from = declared_from
    draft.effective_to = _instant(properties, EFFECTIVE_TO, invalid)
    draft.doc_class = _property_text(properties, DOC_CLASS, invalid)
    draft.labelled = supersession_label in labels
    if draft.labelled or marked:
        keys = watched_properties(successor_property, effective_from_property)
        draft.mark = marks_print(properties, keys)
    if draft.labelled:
        if successor_property not in properties:
            invalid.append(
                (
                    "superseded_by",
                    f"labelled {supersession_label!r} but has no "
                    f"{successor_property!r} property naming its successor; "
                    "supersession ignored",
                )
            )
        else:
            draft.successor = _successor(
                name, successor_property, properties[successor_property], invalid
            )
    problems.extend(
        page_problem(name, ProblemKind.INVALID_FIELD, message, page, doc, field=field)
        for field, message in invalid
    )
    return draft


def _cloud_labels(client: ConfluenceClient, page_id: str) -> frozenset[str]:
    names: set[str] = set()
    for entries in client.cursor_pages(
        f"{client.api}/pages/{page_id}/labels", {"limit": 250}, f"page {page_id}"
    ):
        names |= label_names(entries)
    return frozenset(names)


def _properties(client: ConfluenceClient, page_id: str) -> dict[str, Any]:
    """Content property key -> value (JSON) of one page."""
    document = f"page {page_id}"
    if client.flavor == "cloud":
        pages = client.cursor_pages(
            f"{client.api}/pages/{page_id}/properties", {"limit": 250}, document
        )
    else:
        pages = client.offset_pages(f"{client.api}/content/{page_id}/property", {}, document)
    found: dict[str, Any] = {}
    for entries in pages:
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                found.setdefault(entry["key"], entry.get("value"))
    return found


def _successor(
    name: str, successor_property: str, value: Any, invalid: list[tuple[str, str]]
) -> str | None:
    """The page id a successor property names: an id, ``<source>:<id>``, a page URL."""
    raw = value
    if isinstance(value, dict):
        value = value.get("id", value.get("value"))
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    if isinstance(value, str):
        text = value.strip().removeprefix(f"{name}:")
        if PAGE_ID.fullmatch(text):
            return text
        match = _PAGE_URL.search(text)
        if match is not None:
            return match.group(1)
    invalid.append(
        (
            "superseded_by",
            f"{successor_property} must name the successor's page id, got "
            f"{shown(raw)}; supersession ignored",
        )
    )
    return None


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
