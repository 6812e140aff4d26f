"""Adopting an existing collection that has no document table (``reconciler bootstrap``).

An inherited corpus has chunks but no registry to derive their payloads from. Bootstrap reads
the collection's payloads once (never vectors, never text), groups chunks by document id and
registers one row per document that has none: the state, version, dates, class and family the
payloads already carry where they are valid, ``unknown`` where they are not. It reports what it
could not map and never writes a payload: the next ``apply`` derives every chunk's managed keys
from the new rows, payload-only. Running it again creates nothing. A split store's archive
(``[index] archive_collection``) is read too, after the main collection.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.app.wiring import (
    local_folder_missing,
    open_initialised_table,
    open_qdrant_index,
    open_table,
)
from reconciler.errors import CollectionMissing
from reconciler.model import OPEN_END, OPEN_START, Document, VersionState, parse_instant
from reconciler.payload import KeyMap
from reconciler.settings import Settings
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.sql import SqlDocumentTable
from reconciler.writing.ingestion import register_adopted

log = logging.getLogger(__name__)

__all__ = ["Adoption", "bootstrap", "plan_documents", "render_bootstrap"]

#: Payload fields taken over from the chunks (logical names); the most common value wins.
_TAKEN = (
    "version_state",
    "doc_version",
    "effective_from",
    "effective_to",
    "superseded_by",
    "doc_class",
    "content_hash",
    "quarantined",
    "quarantine_reason",
)
#: Document ids that mean "none" in a preset's layout: LlamaIndex writes the string "None" as
#: doc_id/ref_doc_id/document_id of a node that has no source document.
_NO_ID: dict[str, frozenset[str]] = {"llamaindex": frozenset({"None"})}
#: Point ids listed per unmapped entry (the count is always exact).
_SAMPLE = 10


@dataclass
class _Tally:
    """What one document's chunks say, field by field (values and how many chunks say them)."""

    chunks: int = 0
    values: dict[str, Counter[Any]] = field(default_factory=lambda: defaultdict(Counter))


@dataclass
class Adoption:
    """The outcome of reading a collection: the rows to create and what could not be mapped."""

    chunks: int = 0
    documents: dict[str, Document] = field(default_factory=dict)
    chunk_counts: dict[str, int] = field(default_factory=dict)
    already_registered: int = 0
    unmapped: list[dict[str, Any]] = field(default_factory=list)


def _hashable(value: Any) -> Any:
    if isinstance(value, list | dict):
        return repr(value)
    return value


def _at_path(payload: Mapping[str, Any] | None, path: str) -> Any:
    node: Any = payload or {}
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _scan_all(
    indexes: list[QdrantChunkIndex], *, keys: KeyMap, family_key: str | None, batch_size: int
) -> Iterator[tuple[str | int, dict[str, Any], Any]]:
    """``_scan`` of each collection that exists, in turn."""
    for index in indexes:
        if index.exists():
            yield from _scan(index, keys=keys, family_key=family_key, batch_size=batch_size)


def _scan(
    index: QdrantChunkIndex, *, keys: KeyMap, family_key: str | None, batch_size: int
) -> Iterator[tuple[str | int, dict[str, Any], Any]]:
    """Stream (point id, logical payload, family value) of every point: payload only.

    The port's ``scroll`` reads the identity and managed keys; bootstrap also needs the
    configured family path, so it asks the same client for those paths alone.
    """
    paths = keys.managed_paths() + ([family_key] if family_key else [])
    offset: Any = None
    while True:
        with index._reading("scrolling payloads to adopt"):  # the store's own error mapping
            points, offset = index.client.scroll(
                index.collection,
                limit=batch_size,
                offset=offset,
                with_payload=paths,
                with_vectors=False,
            )
        for point in points:
            point_id = point.id if isinstance(point.id, int | str) else str(point.id)
            family = _at_path(point.payload, family_key) if family_key else None
            yield point_id, keys.from_point(point.payload), family
        if offset is None:
            return


def _most_common(
    doc_id: str, name: str, counts: Counter[Any], unmapped: list[dict[str, Any]]
) -> Any:
    """The value most chunks carry (ties: first seen); a disagreement is reported."""
    if not counts:
        return None
    (chosen, _), *rest = counts.most_common()
    if rest:
        unmapped.append(
            {
                "kind": "conflicting_values",
                "doc_id": doc_id,
                "field": name,
                "values": {str(value): count for value, count in counts.most_common()},
                "chosen": chosen,
                "message": f"{doc_id}: chunks disagree on {name}; took the most common",
            }
        )
    return chosen


def _invalid(doc_id: str, name: str, value: Any, fallback: str) -> dict[str, Any]:
    return {
        "kind": "invalid_value",
        "doc_id": doc_id,
        "field": name,
        "value": value,
        "message": f"{doc_id}: {name} {value!r} is not valid; {fallback}",
    }


def _state(doc_id: str, value: Any, unmapped: list[dict[str, Any]]) -> VersionState:
    if value is None:
        return VersionState.UNKNOWN
    try:
        return VersionState(str(value).strip().lower())
    except ValueError:
        unmapped.append(_invalid(doc_id, "version_state", value, "registered as unknown"))
        return VersionState.UNKNOWN


def _version(doc_id: str, value: Any, unmapped: list[dict[str, Any]]) -> int:
    if value is None:
        return 1
    try:
        number = int(value) if not isinstance(value, bool | float) else None
    except (TypeError, ValueError):
        number = None
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None or number < 1:
        unmapped.append(_invalid(doc_id, "doc_version", value, "registered as version 1"))
        return 1
    return number


def _instant(doc_id: str, name: str, value: Any, unmapped: list[dict[str, Any]]) -> datetime | None:
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return parse_instant(value)
    except ValueError:
        default = "open-ended" if name == "effective_to" else "no start date"
        unmapped.append(_invalid(doc_id, name, value, f"registered as {default}"))
        return None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str | int):
        return str(value) or None
    return None


def _document(
    doc_id: str,
    tally: _Tally,
    family_values: Counter[Any],
    *,
    source: str,
    at: datetime,
    unmapped: list[dict[str, Any]],
) -> Document:
    picked = {
        name: _most_common(doc_id, name, tally.values[name], unmapped)
        for name in _TAKEN
        if tally.values.get(name)
    }
    state = _state(doc_id, picked.get("version_state"), unmapped)
    effective_from = _instant(doc_id, "effective_from", picked.get("effective_from"), unmapped)
    effective_to = _instant(doc_id, "effective_to", picked.get("effective_to"), unmapped)
    family = (
        _text(_most_common(doc_id, "family", family_values, unmapped)) if family_values else None
    )
    quarantined = picked.get("quarantined") is True
    return Document(
        doc_id=doc_id,
        source=source,
        # "<source>:<key>" ids (the contract's form) keep their key, so a connector configured
        # later under the same name recognises the document; any other id is its own key.
        source_key=doc_id.removeprefix(f"{source}:") or doc_id,
        doc_family_id=family or doc_id,
        doc_version=_version(doc_id, picked.get("doc_version"), unmapped),
        version_state=state,
        effective_from=None if effective_from == OPEN_START else effective_from,
        effective_to=effective_to or OPEN_END,
        superseded_by=_text(picked.get("superseded_by"))
        if state is VersionState.SUPERSEDED
        else None,
        doc_class=_text(picked.get("doc_class")),
        source_hash=_text(picked.get("content_hash")),
        quarantined=quarantined,
        quarantine_reason=_text(picked.get("quarantine_reason")) if quarantined else None,
        updated_at=at,
    )


def plan_documents(
    index: QdrantChunkIndex,
    table: SqlDocumentTable | None,
    *,
    settings: Settings,
    at: datetime,
    archive: QdrantChunkIndex | None = None,
) -> Adoption:
    """Read the collection (and a split store's ``archive``) and decide the rows to create
    (``table`` None: none exist yet)."""
    keys = settings.index.key_map
    family_key = settings.bootstrap.family_key
    adoption = Adoption()
    tallies: dict[str, _Tally] = defaultdict(_Tally)
    families: dict[str, Counter[Any]] = defaultdict(Counter)
    no_id: list[str | int] = []
    no_id_count = 0
    none_ids = _NO_ID.get(settings.bootstrap.preset, frozenset()) | {""}
    not_text: Counter[str] = Counter()
    for point_id, payload, family in _scan_all(
        [index] if archive is None else [index, archive],
        keys=keys,
        family_key=family_key,
        batch_size=settings.index.scroll_batch,
    ):
        adoption.chunks += 1
        doc_id = payload.get("doc_id")
        if not isinstance(doc_id, str) or doc_id in none_ids:
            no_id_count += 1
            if len(no_id) < _SAMPLE:
                no_id.append(point_id)
            if doc_id is not None and not isinstance(doc_id, str):
                not_text[type(doc_id).__name__] += 1
            continue
        tally = tallies[doc_id]
        tally.chunks += 1
        for name in _TAKEN:
            if name in payload and payload[name] is not None:
                tally.values[name][_hashable(payload[name])] += 1
        if family_key and family is not None:
            families[doc_id][_hashable(family)] += 1
        elif not family_key and payload.get("doc_family_id") is not None:
            families[doc_id][_hashable(payload["doc_family_id"])] += 1
    if no_id_count:
        where = keys.path("doc_id")
        adoption.unmapped.append(
            {
                "kind": "no_doc_id",
                "doc_id": None,
                "points": no_id_count,
                "sample": no_id,
                "message": (
                    f"{no_id_count} chunk(s) carry no string document id at {where!r}"
                    + (f" ({dict(not_text)})" if not_text else "")
                    + "; the next apply quarantines them as orphan chunks"
                ),
            }
        )
    if family_key and tallies and not families:
        adoption.unmapped.append(
            {
                "kind": "family_key_unread",
                "doc_id": None,
                "points": adoption.chunks,
                "sample": [],
                "message": (
                    f"no chunk holds [bootstrap] family_key {family_key!r} (a dotted payload "
                    "path, e.g. 'metadata.series'): every document gets a family of its own"
                ),
            }
        )
    existing = set(table.get_documents(tallies)) if table is not None else set()
    adoption.already_registered = len(existing)
    for doc_id in sorted(tallies):
        if doc_id in existing:
            continue
        tally = tallies[doc_id]
        adoption.documents[doc_id] = _document(
            doc_id,
            tally,
            families.get(doc_id, Counter()),
            source=settings.bootstrap.source,
            at=at,
            unmapped=adoption.unmapped,
        )
        adoption.chunk_counts[doc_id] = tally.chunks
    return adoption


def bootstrap(settings: Settings, *, dry_run: bool = False) -> dict[str, Any]:
    """Register a row for every document of the collection that has none; write no payload.

    The table is created when it does not exist yet (not in a dry run). Returns counts, the
    rows created (or that would be) and the list of what could not be mapped.
    """
    at = datetime.now(UTC)
    missing = CollectionMissing(
        f"collection {settings.index.collection!r} does not exist at "
        f"{settings.index.path or settings.index.url}; point index.collection at "
        "the collection to adopt"
    )
    if local_folder_missing(settings):
        raise missing  # opening a local-mode folder that does not exist would create it
    index = open_qdrant_index(settings, needed_by="reconciler bootstrap")
    table = None
    try:
        if not index.exists():
            raise missing  # before the table: nothing is created for what cannot be adopted
        table = open_initialised_table(settings) if dry_run else open_table(settings, create=True)
        archive = None
        if settings.index.archive_collection is not None:
            archive = QdrantChunkIndex(
                index.client,
                collection=settings.index.archive_collection,
                keys=settings.index.key_map,
                text_key=settings.index.text_key,
            )
        adoption = plan_documents(index, table, settings=settings, at=at, archive=archive)
        run_id = None
        rows = list(adoption.documents.values())
        if not dry_run and table is not None:
            run_id = register_adopted(
                table,
                source=settings.bootstrap.source,
                rows=rows,
                chunk_counts=adoption.chunk_counts,
                unmapped=len(adoption.unmapped),
                chunks_scanned=adoption.chunks,
            )
    finally:
        index.close()
        if table is not None:
            table.close()
    data = _result(settings, adoption, run_id=run_id, dry_run=dry_run)
    log.info(
        "bootstrap of %s: %d chunk(s), %d document(s) %s, %d already registered, %d unmapped",
        settings.index.collection,
        adoption.chunks,
        len(rows),
        "to create" if dry_run else "created",
        adoption.already_registered,
        len(adoption.unmapped),
    )
    return data


def _result(
    settings: Settings, adoption: Adoption, *, run_id: str | None, dry_run: bool
) -> dict[str, Any]:
    rows = list(adoption.documents.values())
    return {
        "run_id": run_id,
        "dry_run": dry_run,
        "collection": settings.index.collection,
        "preset": settings.bootstrap.preset,
        "source": settings.bootstrap.source,
        "layout": {
            "payload_prefix": settings.index.payload_prefix,
            "text_key": settings.index.text_key,
            "doc_id": settings.index.key_map.path("doc_id"),
            "family": settings.bootstrap.family_key or settings.index.key_map.path("doc_family_id"),
        },
        "chunks_scanned": adoption.chunks,
        "documents_seen": len(rows) + adoption.already_registered,
        "already_registered": adoption.already_registered,
        "created": len(rows),
        "families": len({d.doc_family_id for d in rows}),
        "by_state": dict(sorted(Counter(str(d.version_state) for d in rows).items())),
        "documents": [
            {
                "doc_id": d.doc_id,
                "family": d.doc_family_id,
                "version": d.doc_version,
                "state": str(d.version_state),
                "chunks": adoption.chunk_counts.get(d.doc_id, 0),
            }
            for d in rows
        ],
        "unmapped": adoption.unmapped,
    }


def render_bootstrap(data: Mapping[str, Any]) -> str:
    """The bootstrap result for a person."""
    verb = "would create" if data["dry_run"] else "created"
    states = ", ".join(f"{n} {s}" for s, n in data["by_state"].items()) or "none"
    lines = [
        f"collection {data['collection']!r} (preset {data['preset']}; doc id at "
        f"{data['layout']['doc_id']!r}): {data['chunks_scanned']} chunk(s), "
        f"{data['documents_seen']} document(s)",
        f"{verb} {data['created']} row(s) in {data['families']} family(ies) under source "
        f"{data['source']!r}: {states}; {data['already_registered']} already registered",
    ]
    if data["unmapped"]:
        lines.append(f"could not map ({len(data['unmapped'])}):")
        lines += [f"  {entry['kind']}: {entry['message']}" for entry in data["unmapped"]]
    if data["created"] and not data["dry_run"]:
        lines.append("next: `reconciler plan`, then `reconciler apply` writes the payloads")
    return "\n".join(lines)
