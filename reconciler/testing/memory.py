"""A dict-backed ``ChunkIndex`` for fast tests of the logic, with Qdrant's semantics.

It keeps what the logic can observe of a Qdrant collection: points ordered by id, payloads
nested and renamed by a ``KeyMap``, ``set_payload`` merging (a null removes the key) into the
object at the prefix, a write to a missing point failing after the rest of its call applied,
and payload indexes by logical key. It imports no driver. ``count`` takes no filter.
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from reconciler.errors import CollectionMissing, IndexWriteError
from reconciler.model import (
    MANAGED_KEYS,
    PLACEMENT_KEYS,
    ChunkRecord,
    ChunkState,
    ManagedPage,
    PayloadWrite,
)
from reconciler.payload import DEFAULT_KEYS, KeyMap
from reconciler.ports.index import (
    PointCopy,
    PointPage,
    StoredPoint,
    VectorPage,
    read_back_by_id,
    states_page,
)
from reconciler.stores.chunking_rules import check_batch_size, check_payload_index, facet_counts

log = logging.getLogger(__name__)

__all__ = ["InMemoryChunkIndex"]


@dataclass
class _Point:
    vector: tuple[float, ...]
    payload: dict[str, Any]


class InMemoryChunkIndex:
    """The ``ChunkIndex`` port over a dict, for tests (not for production data)."""

    def __init__(
        self,
        *,
        keys: KeyMap = DEFAULT_KEYS,
        text_key: str = "text",
        collection: str = "memory",
    ) -> None:
        self.keys = keys
        self.text_key = text_key
        self.collection = collection
        self.supports_payload_indexes = True
        #: ``set_payloads`` calls that reached the store, as ``batch_update_points`` would be.
        self.update_calls = 0
        self._points: dict[str | int, _Point] | None = None
        self._dim = 0
        self._indexes: dict[str, str] = {}

    def __repr__(self) -> str:
        size = "missing" if self._points is None else f"{len(self._points)} point(s)"
        return f"InMemoryChunkIndex({self.collection!r}, {size})"

    def point(self, point_id: str | int) -> tuple[tuple[float, ...], dict[str, Any]]:
        """A copy of one stored point's vector and whole (physical) payload, for assertions."""
        stored = self._store()[point_id]
        return stored.vector, copy.deepcopy(stored.payload)

    def put_point(
        self, point_id: str | int, *, vector: Sequence[float], payload: Mapping[str, Any]
    ) -> None:
        """Store a point with an arbitrary physical payload, as another tool would have built it."""
        self._store()[point_id] = _Point(tuple(vector), copy.deepcopy(dict(payload)))

    def _store(self) -> dict[str | int, _Point]:
        if self._points is None:
            raise CollectionMissing(
                f"collection {self.collection!r} does not exist: run ingestion first"
            )
        return self._points

    # -- reads ------------------------------------------------------------------------------

    def close(self) -> None:
        """Nothing to release."""

    def ready_reads(self) -> None:
        """Nothing to read ahead."""

    def exists(self) -> bool:
        """Whether the collection exists."""
        return self._points is not None

    def scroll(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ChunkState]:
        """Stream every chunk's id and identity/managed payload keys, ordered by id."""
        return self._states(batch_size, doc_ids)

    def _states(self, batch_size: int, doc_ids: Collection[str] | None) -> Iterator[ChunkState]:
        check_batch_size(batch_size)
        points = self._store()
        wanted = None if doc_ids is None else set(doc_ids)
        for point_id in sorted(points, key=_id_order):
            stored = points.get(point_id)
            if stored is None:  # deleted while streaming
                continue
            payload = copy.deepcopy(self.keys.from_point(stored.payload))
            doc_id = payload.get("doc_id")
            # (a keyword filter matches texts only: a stored number or object is never selected)
            if wanted is not None and (type(doc_id) is not str or doc_id not in wanted):
                continue
            yield ChunkState(
                point_id=point_id,
                doc_id=doc_id,
                chunk_id=payload.get("chunk_id"),
                payload=payload,
            )

    def scan_managed(
        self,
        *,
        batch_size: int = 1000,
        doc_ids: Collection[str] | None = None,
        placement: bool = False,
    ) -> Iterator[ManagedPage]:
        """The check's lean scan, a page at a time, ordered by id (with ``placement``, only
        ``PLACEMENT_KEYS`` read)."""
        check_batch_size(batch_size)
        states = self._states(batch_size, doc_ids)
        keys = [key if key in PLACEMENT_KEYS or not placement else None for key in MANAGED_KEYS]
        while page := list(itertools.islice(states, batch_size)):
            yield ManagedPage(
                [
                    (state.doc_id, *(state.payload.get(k) if k else None for k in keys))
                    for state in page
                ],
                partial(_id_at, page),
                None if placement else [state.payload.get("content_hash") for state in page],
            )

    def scan_points(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[PointPage]:
        """Whole points (copies), a page at a time, ordered by id."""
        states = self._states(batch_size, doc_ids)
        while page := list(itertools.islice(states, batch_size)):
            points = self.read_points([state.point_id for state in page])
            yield PointPage(points, [state.doc_id for state in page])

    def scan_vectors(self, *, batch_size: int = 1000) -> Iterator[VectorPage]:
        """Every chunk's doc_id and vector as stored, a page at a time, ordered by id."""
        check_batch_size(batch_size)
        points = self._store()
        ids = sorted(points, key=_id_order)
        for start in range(0, len(ids), batch_size):
            doc_ids: list[str] = []
            vectors: list[tuple[float, ...]] = []
            page = [points[p] for p in ids[start : start + batch_size] if p in points]
            for stored in page:
                doc_id = self.keys.from_point(stored.payload).get("doc_id")
                if isinstance(doc_id, str) and stored.vector:
                    doc_ids.append(doc_id)
                    vectors.append(stored.vector)
            if page:
                yield VectorPage(doc_ids, vectors, skipped=len(page) - len(doc_ids))

    def retrieve_managed(self, point_ids: Sequence[str | int]) -> ManagedPage:
        """The given points' doc_id and raw managed values, as one lean page."""
        return states_page(self.retrieve(point_ids))

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        """The identity and managed payload of the given points (missing ids are absent)."""
        points = self._store()
        found = []
        for point_id in point_ids:
            stored = points.get(point_id)
            if stored is None:
                continue
            payload = copy.deepcopy(self.keys.from_point(stored.payload))
            found.append(
                ChunkState(
                    point_id=point_id,
                    doc_id=payload.get("doc_id"),
                    chunk_id=payload.get("chunk_id"),
                    payload=payload,
                )
            )
        return found

    def read_points(self, point_ids: Sequence[str | int]) -> list[StoredPoint]:
        """Whole points by id (copies: the vector and the whole payload)."""
        points = self._store()
        return [
            StoredPoint(pid, points[pid].vector, copy.deepcopy(points[pid].payload))
            for pid in point_ids
            if pid in points
        ]

    def vector_layout(self) -> Mapping[str, Any]:
        """The vector size."""
        self._store()
        return {"dim": self._dim}

    def count(self, *, query_filter: Any | None = None) -> int:
        """Number of points; this fake evaluates no filters."""
        if query_filter is not None:
            raise NotImplementedError("InMemoryChunkIndex.count() takes no query_filter")
        return len(self._store())

    def facet(self, *, key: str, limit: int = 100) -> dict[Any, int]:
        """Counts of the (keyword, integer or bool) values of a logical key, most common first."""
        values = (self.keys.from_point(p.payload).get(key) for p in self._store().values())
        return facet_counts(values, limit=limit)

    def payload_indexes(self) -> Mapping[str, str]:
        """Payload indexes created so far: logical key -> schema type."""
        self._store()
        return dict(self._indexes)

    # -- writes -----------------------------------------------------------------------------

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        """Merge managed payload into points by id, ~``batch_size`` points a call."""
        check_batch_size(batch_size)
        points = self._store()
        calls: list[list[tuple[list[str | int], dict[str, Any]]]] = [[]]
        size = 0
        for write in writes:
            ids = list(write.point_ids)
            if not ids or not write.payload:
                continue
            stored = self.keys.to_stored(write.payload)
            while ids:
                part, ids = ids[: batch_size - size], ids[batch_size - size :]
                calls[-1].append((part, stored))
                size += len(part)
                if size >= batch_size:
                    calls.append([])
                    size = 0
        written = 0
        for number, call in enumerate((c for c in calls if c), start=1):
            self.update_calls += 1
            missing: str | int | None = None
            for ids, stored in call:
                for point_id in ids:
                    target = points.get(point_id)
                    if target is None:
                        missing = point_id if missing is None else missing
                        continue
                    _merge_at(target.payload, self.keys.nest_key, stored)
            if missing is not None:
                raise IndexWriteError(
                    f"payload batch {number} on {self.collection!r} failed: point {missing} "
                    "does not exist",
                    points_written=written,
                )
            points_in_call = sum(len(ids) for ids, _ in call)
            written += points_in_call
            log.debug("set_payload batch %d: %d point(s)", number, points_in_call)
        return written

    def create_payload_index(self, *, key: str, schema: str) -> None:
        """Record a payload index on a logical key."""
        check_payload_index(key, schema)
        self._store()
        self._indexes[key] = schema

    # -- moves between the collections of a split store ---------------------------------------

    def ensure_layout(
        self, layout: Mapping[str, Any], *, indexes: Mapping[str, str] | None = None
    ) -> None:
        """Create the collection with another one's vector size unless it exists, and the
        payload indexes it lacks."""
        if self._points is None:
            self.ensure_collection(dim=int(layout["dim"]))
        self._indexes.update(indexes or {})

    def copy_points(self, points: Sequence[StoredPoint]) -> int:
        """Store whole points as they are (a copy of each)."""
        store = self._store()
        for point in points:
            if len(point.vector) != self._dim:
                raise ValueError(f"vector of {point.point_id}: not {self._dim} dimension(s)")
            store[point.point_id] = _Point(tuple(point.vector), copy.deepcopy(dict(point.payload)))
        return len(points)

    def delete_stored(self, points: Sequence[StoredPoint]) -> int:
        """Delete whole points by id (``delete_points``)."""
        return self.delete_points([p.point_id for p in points])

    def read_back(self, points: Sequence[StoredPoint]) -> list[PointCopy | None]:
        """The given points as held now, by id (``read_back_by_id``)."""
        return read_back_by_id(self, points)

    def delete_points(self, point_ids: Sequence[str | int]) -> int:
        """Delete points by id (missing ids are no error)."""
        store = self._store()
        for point_id in point_ids:
            store.pop(point_id, None)
        return len(point_ids)

    # -- the reference ingestion only --------------------------------------------------------

    def ensure_collection(self, *, dim: int) -> None:
        """Create the (empty) collection if it does not exist."""
        if self._points is None:
            self._points = {}
            self._dim = dim

    def upsert_chunks(self, records: Iterable[ChunkRecord]) -> int:
        """Write new points (vector, text, full payload); ingestion only."""
        points = self._store()
        written = 0
        for record in records:
            if len(record.vector) != self._dim:
                raise ValueError(
                    f"vector of {record.point_id} has {len(record.vector)} dimension(s), "
                    f"the collection {self._dim}"
                )
            logical = dict(record.payload)
            logical.setdefault("chunk_id", record.chunk_id)
            payload = copy.deepcopy(self.keys.to_point(logical))
            payload[self.text_key] = record.text
            points[record.point_id] = _Point(tuple(record.vector), payload)
            written += 1
        log.debug("upserted %d point(s) into %s", written, self.collection)
        return written

    def delete_document_chunks(self, doc_id: str) -> int:
        """Delete a document's points; ingestion only."""
        points = self._store()
        doomed = [
            point_id
            for point_id, stored in points.items()
            if self.keys.from_point(stored.payload).get("doc_id") == doc_id
        ]
        for point_id in doomed:
            del points[point_id]
        return len(doomed)


def _merge_at(payload: dict[str, Any], nest_key: str | None, values: Mapping[str, Any]) -> None:
    """Qdrant's ``set_payload(key=...)``: create the nested object, merge, null removes."""
    node = payload
    if nest_key:
        for part in nest_key.split("."):
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
    for key, value in values.items():
        if value is None:
            node.pop(key, None)
        else:
            node[key] = copy.deepcopy(value)


def _id_order(point_id: str | int) -> tuple[int, str | int]:
    """Qdrant scrolls integer ids first, then UUIDs."""
    return (1, str(point_id)) if isinstance(point_id, str) else (0, point_id)


def _id_at(states: Sequence[ChunkState], index: int) -> str | int:
    return states[index].point_id
