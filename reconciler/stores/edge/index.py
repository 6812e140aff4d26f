"""The chunk index over Qdrant Edge: the embedded Rust engine (``qdrant-edge-py``, beta).

One Edge *shard* is one collection: a folder ``<index.path>/<index.collection>`` opened in
this process, with no server. Only this module and its parts (``shard``, ``requests``) import
``qdrant_edge`` for points (``reconciler.filters`` renders its Edge form, opens no shard).

How it maps onto the port, and onto what qdrant-client does:

* point ids: Edge takes unsigned integers and UUIDs and hands UUIDs back as ``uuid.UUID``;
  they are returned as their canonical string, so ids round-trip exactly as on qdrant-client;
* payload keys: the ``KeyMap`` as everywhere (``set_payload(key=...)`` for the nested prefix,
  include-selectors of dotted paths); a ``None`` value removes the key, as on qdrant-client;
* payload indexes: real ones (``create_field_index``), listed by ``info().payload_schema``;
* ``facet``: Edge facets only an indexed key; an unindexed one is counted by a scroll;
* reading ahead: before a whole scroll or one of many documents, the shard's files but the
  vectors' are read through once an open (``_read_ahead``, over ``files.read_ahead``);
* the disk: a shard is neither opened nor written below a free-space floor
  (``files.ensure_space``);
* a split store's moves: whole points read (a scroll or ``retrieve`` with vectors and
  payload) and upserted as they were into another shard, made with this one's
  ``edge_config.json`` (``ensure_layout``); Edge stores a vector that is unit-length already
  as it is, so a copy is the same bytes;
* errors: Edge raises bare ``Exception``s, mapped once in ``shard`` (``reading``,
  ``writing``, ``open_shard``): ``IndexUnavailable`` for a read or a held shard,
  ``IndexWriteError`` with ``points_written`` for a write, as the qdrant-client adapter does.
  A missing point fails its call after the rest of it applied.

This module is the adapter (ids, filters and payload batches in Edge's types: ``requests``).

Edge is single-process: a loaded shard holds an exclusive lock (its write-ahead log) until
``close``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from reconciler.errors import IndexUnavailable
from reconciler.model import (
    ALL_KEYS,
    MANAGED_KEYS,
    ChunkRecord,
    ChunkState,
    ManagedPage,
    PayloadWrite,
)
from reconciler.payload import DEFAULT_KEYS, KeyMap
from reconciler.ports.index import PointCopy, PointPage, StoredPoint, VectorPage
from reconciler.stores.chunking_rules import (
    DOC_FILTER_BATCH,
    check_batch_size,
    check_payload_index,
    create_missing_indexes,
    doc_id_batches,
    facet_counts,
    managed_page,
    owned_page,
    owned_points,
    owned_states,
    pages,
    point_page,
    reread_page,
    vector_pages,
)
from reconciler.stores.edge.files import (
    EDGE_MIN_FREE,
    MIB,
    READ_AHEAD_BYTES_PER_DOC,
    available_memory,
    read_ahead,
)
from reconciler.stores.edge.requests import (
    EDGE_SCHEMAS,
    EdgeId,
    IdMemory,
    answered,
    doc_filter,
    edge_id,
    edge_ids,
    our_id,
    payload_batches,
    schema_name,
    stored_ids,
)
from reconciler.stores.edge.shard import (
    check_dim,
    is_shard,
    open_shard,
    read_config,
    reading,
    write_config,
    writing,
)

log = logging.getLogger(__name__)

#: (the floor and the memory figure live in ``files``; importable from here as before)
__all__ = ["EDGE_MIN_FREE", "MIB", "READ_AHEAD_BYTES_PER_DOC", "EdgeChunkIndex", "available_memory"]

#: Points per ``upsert_points`` of the reference ingestion (and of a move's copy).
UPSERT_BATCH = 256


class EdgeChunkIndex:
    """The ``ChunkIndex`` port over one Qdrant Edge shard at ``path``."""

    def __init__(
        self,
        path: str | Path,
        *,
        keys: KeyMap = DEFAULT_KEYS,
        text_key: str = "text",
    ) -> None:
        self.path = Path(path)
        self.keys = keys
        self.text_key = text_key
        self.collection = self.path.name
        self._logical_by_path = {keys.path(key): key for key in ALL_KEYS}
        self._prefix_parts = tuple(keys.prefix[:-1].split(".")) if keys.prefix else ()
        #: Stored names of what the lean scan reads: doc_id, then the managed keys.
        self._scan_names = tuple(keys.name(key) for key in ("doc_id", *MANAGED_KEYS))
        self._content_name = keys.name("content_hash")
        #: Payload update calls that reached the shard (one per batch, as on qdrant-client).
        self.update_calls = 0
        #: Doc ids under one doc_id filter when a scroll selects documents' points.
        self.doc_filter_batch = DOC_FILTER_BATCH
        #: Bytes of the shard's files per document selected below which a scroll that selects
        #: documents does not read the files ahead.
        self.read_ahead_bytes_per_doc = READ_AHEAD_BYTES_PER_DOC
        #: Whether this open has read the shard's files ahead (once is enough: an apply's
        #: scrolls of changed documents come after its check's whole scroll).
        self._read_ahead_done = False
        self._shard: qe.EdgeShard | None = None
        self._ids = IdMemory()  # (the UUIDs the last lean scan converted: for the writes)
        self._closed = False
        self._load()  # an existing shard is opened (and locked) now, so a held one says so

    def __repr__(self) -> str:
        return f"EdgeChunkIndex(path={str(self.path)!r})"

    @property
    def shard(self) -> qe.EdgeShard:
        """The open shard (for retrieval code and tests), loaded now if another process has
        created it since this index was opened; IndexUnavailable when absent."""
        self._check_open()
        if self._load() is None:
            raise IndexUnavailable(
                f"no Qdrant Edge shard at {self.path}: run `reconciler ingest` first "
                "(or point index.path and index.collection at an existing shard)"
            )
        assert self._shard is not None
        return self._shard

    def _load(self) -> qe.EdgeShard | None:
        """The shard, loaded from ``path`` if it exists there and is not loaded yet."""
        if self._shard is None and is_shard(self.path):
            self._shard = open_shard(self.path, lambda: qe.EdgeShard.load(str(self.path)))
        return self._shard

    def _check_open(self) -> None:
        if self._closed:
            raise IndexUnavailable(
                f"the Qdrant Edge shard at {self.path} was closed; open a new EdgeChunkIndex"
            )

    @property
    def supports_payload_indexes(self) -> bool:
        """Edge keeps real payload indexes."""
        return True

    def ready_reads(self) -> None:
        """Nothing to read ahead."""

    def close(self) -> None:
        """Flush and close the shard, releasing its lock (idempotent)."""
        if self._shard is not None and not self._closed:
            try:
                with self._writing(f"flushing the Edge shard {self.path}", written=0):
                    self._shard.flush()
            finally:
                self._shard.close()
        self._closed = True
        self._shard = None
        self._ids.clear()

    # -- reads ------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the shard exists (has been created at ``path``)."""
        return self._shard is not None or (not self._closed and is_shard(self.path))

    def scroll(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ChunkState]:
        """Stream every chunk's id and identity/managed payload keys (never vectors or text)."""
        for page, points in enumerate(self._managed_pages(batch_size, doc_ids), start=1):
            log.debug("edge scroll %s page %d: %d point(s)", self.path, page, len(points))
            yield from owned_states((self._state(p.id, p.payload) for p in points), doc_ids)

    def scan_managed(self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None,
                     placement: bool = False) -> Iterator[ManagedPage]:  # fmt: skip
        """The check's lean scan, a page at a time (ids converted when asked for: ``IdMemory``)."""
        self._ids.clear()
        convert = self._ids.our_id
        paths = self.keys.placement_paths() if placement else self.keys.scan_paths()
        for points in self._managed_pages(batch_size, doc_ids, paths):
            if points:
                yield owned_page(managed_page(points, self._prefix_parts, self._scan_names,
                                 convert, self._content_name, placement=placement), doc_ids)  # fmt: skip

    def scan_vectors(self, *, batch_size: int = 1000) -> Iterator[VectorPage]:
        """Every chunk's doc_id and dense vector as stored, a page at a time (no text)."""
        check_batch_size(batch_size)
        self._read_ahead(None)
        read = self._pages(batch_size, qe.PayloadSelector.Include([self.keys.path("doc_id")]),
                           vectors=True)  # fmt: skip
        return vector_pages(read, self._prefix_parts, self.keys.name("doc_id"))

    def scan_points(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[PointPage]:
        """Whole points (every vector, the whole payload), a page at a time: what a move copies."""
        name = self.keys.name("doc_id")
        for records in self._managed_pages(batch_size, doc_ids, whole=True):
            if records:
                page = point_page(records, self._prefix_parts, name, our_id, fresh=True)
                yield owned_points(page, doc_ids)

    def _managed_pages(
        self,
        batch_size: int,
        doc_ids: Collection[str] | None,
        paths: list[str] | None = None,
        *,
        whole: bool = False,
    ) -> Iterator[Sequence[qe.Record]]:
        """Payload-only scroll pages (``paths``, by default identity and managed keys; with
        ``whole``, every key and the vectors), under a doc_id filter (``DOC_FILTER_BATCH`` ids
        at a time: in point id order within each)."""
        check_batch_size(batch_size)
        selector = whole or qe.PayloadSelector.Include(paths or self.keys.managed_paths())
        self._read_ahead(None if doc_ids is None else len(doc_ids))
        batches = [None] if doc_ids is None else doc_id_batches(doc_ids, self.doc_filter_batch)
        for wanted in batches:  # (a filter of DOC_FILTER_BATCH ids: cheap a page)
            found = None if wanted is None else doc_filter(self.keys, wanted)
            yield from self._pages(batch_size, selector, found, vectors=whole)

    def _read_ahead(self, documents: int | None) -> int:
        """Before a whole scroll (``documents`` None) or one selecting that many documents, read
        the shard's files through (``files.read_ahead``: not for fewer documents than one per
        ``read_ahead_bytes_per_doc`` of the files, nor files over half the memory available);
        once an open. Returns the bytes read."""
        self._check_open()
        if self._read_ahead_done:
            return 0
        done = read_ahead(
            self.path, documents=documents, bytes_per_doc=self.read_ahead_bytes_per_doc
        )
        if done is None:
            return 0
        self._read_ahead_done = True
        return done

    def _pages(
        self,
        limit: int,
        selector: qe.PayloadSelector | bool,
        scroll_filter: qe.Filter | None = None,
        *,
        vectors: bool = False,
    ) -> Iterator[Sequence[qe.Record]]:
        def fetch(offset: Any) -> tuple[list[qe.Record], Any]:
            request = qe.ScrollRequest(
                offset=offset,
                limit=limit,
                filter=scroll_filter,
                with_payload=selector,
                with_vector=vectors,
            )
            with self._reading("scrolling"):
                return self.shard.scroll(request)

        return pages(fetch)

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        """The identity and managed payload of the given points (missing ids are absent)."""
        if not point_ids:
            return []
        selector = qe.PayloadSelector.Include(self.keys.managed_paths())
        with self._reading("retrieving points"):
            ids: list[EdgeId] = edge_ids(point_ids)
            records = self.shard.retrieve(ids, selector, False)
        return [self._state(record.id, record.payload) for record in records]

    def retrieve_managed(self, point_ids: Sequence[str | int]) -> ManagedPage:
        """The given points' doc_id and raw managed values, as one lean page."""
        if not point_ids:
            return ManagedPage([], our_id)
        selector = qe.PayloadSelector.Include(self.keys.reread_paths())
        with self._reading("retrieving points"):
            records = self.shard.retrieve([edge_id(p) for p in point_ids], selector, False)
        return reread_page(records, self._prefix_parts, self._scan_names, our_id)

    def _state(self, point_id: Any, payload: Mapping[str, Any] | None) -> ChunkState:
        logical = self.keys.from_point(payload)
        return ChunkState(
            point_id=our_id(point_id),
            doc_id=logical.get("doc_id"),
            chunk_id=logical.get("chunk_id"),
            payload=logical,
        )

    def read_points(self, point_ids: Sequence[str | int]) -> list[StoredPoint]:
        """Whole points by id (every vector, the whole payload): what a move copies."""
        if not point_ids:
            return []
        with self._reading("reading whole points"):
            records = self.shard.retrieve(edge_ids(point_ids), True, True)
        return [StoredPoint(our_id(i := r.id), r.vector, r.payload or {}, i) for r in records]

    def read_back(self, points: Sequence[StoredPoint]) -> list[PointCopy | None]:
        """The given points as the shard holds them now, as Edge's own records (``answered``:
        asked by the ids Edge handed back, ``StoredPoint.native``)."""
        if not points:
            return []
        ids = stored_ids(points)
        with self._reading("reading points back"):
            return answered(self.shard.retrieve(ids, True, True), ids, points)

    def vector_layout(self) -> Mapping[str, Any]:
        """The shard's configuration as Edge persists it (``edge_config.json``)."""
        self._check_open()
        return read_config(self.path)

    def count(self, *, query_filter: Any | None = None) -> int:
        """Exact number of points, optionally under a ``qdrant_edge.Filter``
        (``reconciler.filters.default_edge_filter`` renders the default filter)."""
        if query_filter is not None and not isinstance(query_filter, qe.Filter):
            raise TypeError(
                f"EdgeChunkIndex.count() takes a qdrant_edge.Filter, not "
                f"{type(query_filter).__name__}; use reconciler.filters.default_edge_filter()"
            )
        with self._reading("counting points"):
            return int(self.shard.count(qe.CountRequest(exact=True, filter=query_filter)))

    def facet(self, *, key: str, limit: int = 100) -> dict[Any, int]:
        """Counts of the (keyword, integer or bool) values of a logical key, most common first
        (Edge facets an indexed key itself; an unindexed one is counted by scrolling it)."""
        path = self.keys.path(key)
        if path in self._schema():
            with self._reading(f"faceting {key!r}"):
                response = self.shard.facet(qe.FacetRequest(key=path, limit=limit, exact=True))
            return {hit.value: int(hit.count) for hit in response.hits}
        selector = qe.PayloadSelector.Include([path])
        values = (
            self.keys.from_point(point.payload).get(key)
            for points in self._pages(1000, selector)
            for point in points
        )
        return facet_counts(values, limit=limit)

    def payload_indexes(self) -> Mapping[str, str]:
        """Existing payload indexes on reconciler keys: logical key -> schema type."""
        logical = self._logical_by_path
        return {logical[p]: schema_name(t) for p, t in self._schema().items() if p in logical}

    def _schema(self) -> dict[str, qe.PayloadSchemaType]:
        with self._reading("reading the shard info"):
            schema = self.shard.info().payload_schema
        return {path: info.data_type for path, info in schema.items()}

    # -- writes -----------------------------------------------------------------------------

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        """Apply payload-only writes by point id, ~``batch_size`` points a call; return points.
        A call is one batch: its ``set_payload`` operations apply one after the other (Edge has
        no batch operation), and a failure stops the batch where it is. A ``None`` value
        removes the key. Ids the last scan converted go as Edge's UUIDs (``IdMemory``)."""
        check_batch_size(batch_size)
        written = 0
        nest, set_payload, held = self.keys.nest_key, qe.UpdateOperation.set_payload, self._ids
        for number, batch in enumerate(payload_batches(writes, batch_size, self.keys), start=1):
            points = sum(len(ids) for ids, _ in batch)
            what = f"payload batch {number} ({points} point(s)) on the Edge shard {self.path}"
            self.update_calls += 1
            with self._writing(what, written=written):
                shard = self.shard
                for ids, stored in batch:
                    shard.update(set_payload(held.edge_ids(ids), stored, key=nest))
            written += points
            log.debug("edge set_payload batch %d: %d point(s)", number, points)
        return written

    def create_payload_index(self, *, key: str, schema: str) -> None:
        """Create a payload index on a logical key (no vector touched)."""
        check_payload_index(key, schema)
        path = self.keys.path(key)
        with self._writing(f"creating a {schema} index on {path!r}", written=0):
            self.shard.update(qe.UpdateOperation.create_field_index(path, EDGE_SCHEMAS[schema]))
        log.debug("edge payload index %s (%s) on %s", path, schema, self.path)

    # -- moves between the shards of a split store --------------------------------------------

    def ensure_layout(
        self, layout: Mapping[str, Any], *, indexes: Mapping[str, str] | None = None
    ) -> None:
        """Create the shard with another shard's configuration (``vector_layout``: written
        as its ``edge_config.json``, which Edge loads as a new, empty shard) unless it exists,
        and each payload index of ``indexes`` it lacks."""
        self._check_open()
        if self._load() is None:
            write_config(self.path, layout)  # (atomically: a kill leaves no empty file)
            self._shard = open_shard(self.path, lambda: qe.EdgeShard.load(str(self.path)))
            log.info("created Edge shard %s with the configuration of another", self.path)
        create_missing_indexes(self, indexes or {})

    def copy_points(self, points: Sequence[StoredPoint]) -> int:
        """Upsert whole points as another shard held them, ``UPSERT_BATCH`` a call."""
        written = 0
        for start in range(0, len(points), UPSERT_BATCH):
            part = points[start : start + UPSERT_BATCH]
            ids = stored_ids(part)
            batch = [  # (a dict as it is: Edge converts it as it is called)
                qe.Point(pid, p.vector, p.payload if type(p.payload) is dict else dict(p.payload))
                for pid, p in zip(ids, part, strict=True)
            ]
            with self._writing(f"copying {len(batch)} point(s) into {self.path}", written=written):
                self.shard.update(qe.UpdateOperation.upsert_points(batch))
            written += len(batch)
        return written

    def delete_points(self, point_ids: Sequence[str | int]) -> int:
        """Delete points by id (missing ids are no error)."""
        return self._delete(edge_ids(point_ids)) if point_ids else 0

    def delete_stored(self, points: Sequence[StoredPoint]) -> int:
        """Delete whole points read here by the ids Edge handed back (``stored_ids``)."""
        return self._delete(stored_ids(points)) if points else 0

    def _delete(self, ids: list[EdgeId]) -> int:
        with self._writing(f"deleting {len(ids)} point(s) from {self.path}", written=0):
            self.shard.update(qe.UpdateOperation.delete_points(ids))
        return len(ids)

    # -- the reference ingestion only --------------------------------------------------------

    def ensure_collection(self, *, dim: int) -> None:
        """Create the shard (cosine, ``dim``) if it does not exist."""
        self._check_open()
        if self._load() is not None:
            check_dim(self.path, dim)
            return
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._shard = open_shard(self.path, lambda: qe.EdgeShard.create(str(self.path), config))
        log.info("created Edge shard %s (dim %d, cosine)", self.path, dim)

    def upsert_chunks(self, records: Iterable[ChunkRecord]) -> int:
        """Write new points (vector, text, full payload) in batches; ingestion only."""
        written = 0
        iterator = iter(records)
        number = 0
        while batch := list(itertools.islice(iterator, UPSERT_BATCH)):
            number += 1
            points = [self._point(record) for record in batch]
            what = f"upsert batch {number} ({len(points)} point(s)) on {self.path}"
            with self._writing(what, written=written):
                self.shard.update(qe.UpdateOperation.upsert_points(points))
            written += len(points)
        return written

    def _point(self, record: ChunkRecord) -> qe.Point:
        logical = dict(record.payload)
        logical.setdefault("chunk_id", record.chunk_id)
        payload = self.keys.to_point(logical)
        payload[self.text_key] = record.text
        return qe.Point(edge_id(record.point_id), list(record.vector), payload)

    def delete_document_chunks(self, doc_id: str) -> int:
        """Delete a document's points before re-ingesting it; return how many; ingestion only.
        By the ids a read under its doc_id filter gives: never a chunk whose doc_id is an array
        holding it, which the filter also matches (``owned_states``)."""
        return self.delete_points([state.point_id for state in self.scroll(doc_ids=[doc_id])])

    # -- error mapping (``shard``) ----------------------------------------------------

    def _reading(self, action: str) -> AbstractContextManager[None]:
        return reading(self.path, action)

    def _writing(self, what: str, *, written: int) -> AbstractContextManager[None]:
        return writing(self.path, what, written=written)
