"""Rules every ``ChunkIndex`` adapter shares, whatever its engine (no driver here): argument
checks with the same messages, the scroll's paging, doc id batches, payload writes grouped by
points, the lean scan's page, and Qdrant's facet semantics for adapters that count values
themselves (the in-memory fake, and Qdrant Edge on an unindexed key)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from functools import partial
from operator import attrgetter, countOf, itemgetter
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from reconciler.model import ALL_KEYS, MANAGED_KEYS, PLACEMENT_KEYS, ManagedPage, PayloadWrite
from reconciler.payload import KeyMap
from reconciler.ports.index import ABSENT, PointPage, StoredPoint, VectorPage

__all__ = [
    "DOC_FILTER_BATCH",
    "PAYLOAD_SCHEMAS",
    "check_batch_size",
    "check_payload_index",
    "create_missing_indexes",
    "doc_id_batches",
    "facet_counts",
    "managed_nodes",
    "managed_page",
    "pages",
    "point_batches",
    "point_page",
    "vector_page",
    "vector_pages",
]

_Point = TypeVar("_Point")

#: Payload index types ``create_payload_index`` accepts.
PAYLOAD_SCHEMAS: tuple[str, ...] = ("keyword", "integer", "datetime", "bool", "float")


#: Doc ids under one doc_id filter when an indexed engine selects documents' points. Qdrant
#: evaluates a scroll's filter again for every page: at 1M chunks on Edge, one filter over the
#: 11,661 documents of 3,887 families cost 55 ms a page of 1,000 points (6.4 s for the 117
#: pages); a hundred ids at a time, 5 ms a page (0.6 s).
DOC_FILTER_BATCH = 100


def doc_id_batches(
    doc_ids: Iterable[str], size: int | None = DOC_FILTER_BATCH
) -> Iterator[list[str]]:
    """The distinct ``doc_ids``, sorted, ``size`` at a time (``None``: all in one; nothing
    for none)."""
    if size is not None and size < 1:
        raise ValueError(f"size must be at least 1, not {size}")
    wanted = sorted(set(doc_ids))
    step = size or max(len(wanted), 1)
    for start in range(0, len(wanted), step):
        yield wanted[start : start + step]


def check_batch_size(batch_size: int) -> None:
    """Refuse a batch size below 1."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")


def check_payload_index(key: str, schema: str) -> None:
    """Refuse a payload index on an unknown logical key or of an unknown schema."""
    if key not in ALL_KEYS:
        raise ValueError(f"unknown payload key {key!r}; one of {', '.join(ALL_KEYS)}")
    if schema not in PAYLOAD_SCHEMAS:
        raise ValueError(f"unknown payload schema {schema!r}; one of {', '.join(PAYLOAD_SCHEMAS)}")


class _Indexed(Protocol):
    def payload_indexes(self) -> Mapping[str, str]: ...

    def create_payload_index(self, *, key: str, schema: str) -> None: ...


def create_missing_indexes(index: _Indexed, indexes: Mapping[str, str]) -> None:
    """Create each payload index of ``indexes`` (logical key -> schema) ``index`` lacks."""
    if not indexes:
        return
    held = index.payload_indexes()
    for key, schema in indexes.items():
        if held.get(key) != schema:
            index.create_payload_index(key=key, schema=schema)


def point_batches(
    writes: Iterable[PayloadWrite],
    batch_size: int,
    keys: KeyMap,
    point_ids: Callable[[Sequence[Any]], list[Any]] | None = None,
) -> Iterator[list[tuple[list[Any], dict[str, Any]]]]:
    """Group payload writes into calls of ~``batch_size`` points, each call a list of (point
    ids, stored payload); a larger write is split by ids, an empty one skipped. ``point_ids``
    converts a write's ids for the engine (all at once)."""
    batch: list[tuple[list[Any], dict[str, Any]]] = []
    size = 0
    for write in writes:
        ids = list(write.point_ids) if point_ids is None else point_ids(write.point_ids)
        if not ids or not write.payload:
            continue
        stored = keys.to_stored(write.payload)
        start = 0
        while start < len(ids):
            part = ids[start : start + batch_size - size]
            start += len(part)
            batch.append((part, stored))
            size += len(part)
            if size >= batch_size:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


def pages(
    fetch: Callable[[Any], tuple[Sequence[_Point], Any]],
) -> Iterator[Sequence[_Point]]:
    """Follow a scroll: ``fetch(offset)`` returns a page and the next offset (None at the end);
    the first call gets None."""
    offset: Any = None
    while True:
        points, offset = fetch(offset)
        yield points
        if offset is None:
            return


_NO_KEYS: Mapping[str, Any] = MappingProxyType({})
_PAYLOAD = attrgetter("payload")
#: The names of a scan row: the doc_id's, then ``MANAGED_KEYS``' (``managed_page``).
_SCAN_WIDTH = 1 + len(MANAGED_KEYS)


def managed_nodes(
    payloads: Sequence[Mapping[str, Any] | None], prefix: Sequence[str]
) -> Sequence[Mapping[str, Any]]:
    """The mappings that hold a page's payload keys: each payload itself, or the node under
    the nested ``prefix`` path; an empty mapping for a point without one (its keys read as
    absent)."""
    if not prefix:
        if None in payloads:
            return [payload if payload is not None else _NO_KEYS for payload in payloads]
        return payloads  # type: ignore[return-value] # no None in it
    nodes: list[Mapping[str, Any]] = []
    for payload in payloads:
        node: Any = payload
        for part in prefix:
            node = node.get(part) if isinstance(node, Mapping) else None
        nodes.append(node if isinstance(node, Mapping) else _NO_KEYS)
    return nodes


def managed_page(
    points: Sequence[Any],
    prefix: Sequence[str],
    names: Sequence[str],
    point_id: Callable[[Any], str | int],
    content: str | None = None,
    *,
    placement: bool = False,
) -> ManagedPage:
    """A scroll page of qdrant-client or Edge records as the check's lean ``ManagedPage``:
    ``names`` are the stored names of doc_id and of the managed keys in ``MANAGED_KEYS``
    order, ``content`` the stored name of content_hash (its values go apart, in
    ``ManagedPage.contents``); ``point_id`` converts a record's id when one is asked for.
    With ``placement``, a page read for ``scan_managed(placement=True)``: doc_id and the
    family only, no content hash.
    Each payload is let go as soon as its values are read."""
    if placement:
        return _placement_page(points, prefix, names, point_id)
    if prefix:
        nodes = managed_nodes([point.payload for point in points], prefix)
        rows = [tuple(map(node.get, names)) for node in nodes]
        contents = None if content is None else [node.get(content) for node in nodes]
        return ManagedPage(rows, partial(_id_at, points, point_id), contents)
    # One payload at a time, let go as soon as its values are read (Qdrant Edge builds each
    # as a dict when asked): a page never holds a thousand payloads at once.
    rows = []
    add = rows.append
    if content is None:
        contents = None
        for node in map(_PAYLOAD, points):
            add(tuple(map((node or _NO_KEYS).get, names)))
    elif len(names) == _SCAN_WIDTH:
        # (the usual page, each value taken by its own ``get``: no ``map`` or tuple grown
        # from an iterator a point, issue 38)
        contents = []
        keep = contents.append
        doc, k1, k2, k3, k4, k5, k6, k7, k8, k9 = names
        for node in map(_PAYLOAD, points):
            get = (node or _NO_KEYS).get
            add((get(doc), get(k1), get(k2), get(k3), get(k4), get(k5), get(k6), get(k7),
                 get(k8), get(k9)))  # fmt: skip
            keep(get(content))
    else:
        contents = []
        keep = contents.append
        for node in map(_PAYLOAD, points):
            node = node or _NO_KEYS
            add(tuple(map(node.get, names)))
            keep(node.get(content))
    return ManagedPage(rows, partial(_id_at, points, point_id), contents)


def _placement_page(
    points: Sequence[Any], prefix: Sequence[str], names: Sequence[str], point_id: Any
) -> ManagedPage:
    """``managed_page`` of a page read for placement only: of ``names``, only the first two,
    doc_id's and doc_family_id's (``PLACEMENT_KEYS``), are read; every other managed value
    is absent, and no content hash."""
    assert tuple(MANAGED_KEYS[:1]) == PLACEMENT_KEYS[1:]  # (a row: doc_id, the family, ...)
    if prefix:
        nodes = managed_nodes([point.payload for point in points], prefix)
    else:
        nodes = [payload or _NO_KEYS for payload in map(_PAYLOAD, points)]
    doc, family, tail = names[0], names[1], (None,) * (len(names) - 2)
    rows = [(node.get(doc), node.get(family), *tail) for node in nodes]
    return ManagedPage(rows, partial(_id_at, points, point_id), None)


def reread_page(
    points: Sequence[Any],
    prefix: Sequence[str],
    names: Sequence[str],
    point_id: Callable[[Any], str | int],
) -> ManagedPage:
    """Records read by id as ``retrieve_managed``'s page: ``names`` as in ``managed_page``, a
    key the point does not hold read as ``ABSENT``."""
    nodes = managed_nodes([point.payload for point in points], prefix)
    absent = [ABSENT] * len(names)
    rows = [tuple(map(node.get, names, absent)) for node in nodes]
    return ManagedPage(rows, partial(_id_at, points, point_id))


def _id_at(points: Sequence[Any], convert: Callable[[Any], str | int], index: int) -> str | int:
    return convert(points[index].id)


def point_page(
    points: Sequence[Any],
    prefix: Sequence[str],
    doc_id: str,
    point_id: Callable[[Any], str | int],
    *,
    fresh: bool = False,
) -> PointPage:
    """A scroll page of qdrant-client or Edge records read whole (vectors and payload) as
    ``scan_points``' page: each payload read once and copied (not with ``fresh``: an engine
    that builds a new dict each time it is asked, as Edge does), the ``doc_id`` (its stored
    name under the nested ``prefix``) read from it, ids converted by ``point_id`` (each
    point's ``native`` is the id as the engine handed it back)."""
    if fresh:
        payloads = [point.payload or {} for point in points]
    else:
        payloads = [dict(point.payload or _NO_KEYS) for point in points]
    nodes = managed_nodes(payloads, prefix)
    return PointPage(
        [
            StoredPoint(point_id(native := point.id), point.vector, payload, native)
            for point, payload in zip(points, payloads, strict=True)
        ],
        [node.get(doc_id) for node in nodes],
    )


def vector_pages(
    pages: Iterable[Sequence[Any]], prefix: Sequence[str], doc_id: str
) -> Iterator[VectorPage]:
    """Scroll pages read with their vectors as ``VectorPage``s (``vector_page``), empty ones
    left out."""
    return (vector_page(points, prefix, doc_id) for points in pages if points)


def vector_page(points: Sequence[Any], prefix: Sequence[str], doc_id: str) -> VectorPage:
    """A scroll page of qdrant-client or Edge records read with their vectors as a
    ``VectorPage``: ``doc_id`` is the stored name of the document id under the nested
    ``prefix``; a point without a string id or without one dense vector (``dense_vector``)
    is counted in ``skipped``."""
    nodes = managed_nodes([point.payload for point in points], prefix)
    doc_ids: list[str] = []
    vectors: list[Sequence[float]] = []
    for point, node in zip(points, nodes, strict=True):
        owner = node.get(doc_id)
        vector = dense_vector(point.vector)
        if isinstance(owner, str) and vector is not None:
            doc_ids.append(owner)
            vectors.append(vector)
    return VectorPage(doc_ids, vectors, skipped=len(points) - len(doc_ids))


def dense_vector(stored: Any) -> Sequence[float] | None:
    """The one dense vector of a point as an engine hands it back: the unnamed vector (a list
    of numbers), or the only dense one among named vectors; None for none, several dense named
    vectors (which one is meant is not known), a multivector or a sparse vector only."""
    if isinstance(stored, Mapping):
        dense = [v for v in stored.values() if _is_dense(v)]
        return dense[0] if len(dense) == 1 else None
    return stored if _is_dense(stored) else None


def _is_dense(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) > 0
        and isinstance(value[0], float | int)
    )


def facet_counts(values: Iterable[Any], *, limit: int) -> dict[Any, int]:
    """Count each point's value of a key as Qdrant facets it: keyword, integer and bool values
    (each element of a list once per point), most common first, then by value."""
    counts: Counter[tuple[int, Any]] = Counter()
    for value in values:
        found = value if isinstance(value, list) else [value]
        counts.update({(_facet_type(v), v) for v in found if _facet_type(v) >= 0})
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return {value: count for (_, value), count in ranked[:limit]}


def _facet_type(value: Any) -> int:
    """Qdrant facets keyword, integer and bool values; -1 for anything else."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return 1
    if isinstance(value, str):
        return 2
    return -1


# -- a doc_id filter selects texts only ------------------------------------------------------
# Qdrant's keyword filter also matches an array that holds one of the ids (``["kb:a"]`` under
# ``kb:a``); no document owns such a chunk (the check reports it as an orphan without a doc_id:
# ``payload.doc_id_of``), so a read under the filter leaves it out, on every engine alike.


_FIRST = itemgetter(0)


def owned_states(states: Iterable[Any], doc_ids: Collection[str] | None) -> Iterable[Any]:
    """``ChunkState``s read under ``doc_ids`` (``None``: no filter) whose doc_id is a text."""
    return states if doc_ids is None else (s for s in states if type(s.doc_id) is str)


def owned_page(page: ManagedPage, doc_ids: Collection[str] | None) -> ManagedPage:
    """A lean scan's page read under ``doc_ids``, without the chunks whose doc_id is no text."""
    rows = page.rows
    if doc_ids is None or countOf(map(type, map(_FIRST, rows)), str) == len(rows):
        return page
    kept = [n for n, row in enumerate(rows) if type(row[0]) is str]
    contents = None if page.contents is None else [page.contents[n] for n in kept]
    owned = ManagedPage([rows[n] for n in kept], lambda n: page.point_id(kept[n]), contents)
    owned.archived = page.archived
    return owned


def owned_points(page: PointPage, doc_ids: Collection[str] | None) -> PointPage:
    """A whole-point page read under ``doc_ids``, without the points whose doc_id is no text."""
    if doc_ids is None or countOf(map(type, page.doc_ids), str) == len(page.doc_ids):
        return page
    kept = [n for n, owner in enumerate(page.doc_ids) if type(owner) is str]
    return PointPage([page.points[n] for n in kept], [page.doc_ids[n] for n in kept])
