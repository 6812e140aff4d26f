"""The chunk index over qdrant-client: local mode (``path=``) or a Qdrant server (``url=``).

Only this module imports ``qdrant_client`` for reading and writing points (the canonical
filter in ``reconciler.filters`` builds Qdrant models but never calls the client). The
reconciler reads identity and managed keys and writes managed keys with ``set_payload``,
selecting points by id; vectors and text are never read or written here except by the
ingestion-only methods. Client and transport errors are mapped once, at this edge, to
``IndexUnavailable`` (reads: retry later) and ``IndexWriteError`` (writes: stop the run), in
``errors``; the filters and payload batches sent are built in ``requests``.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from qdrant_client import QdrantClient, models

from reconciler.errors import ConfigError, IndexWriteError
from reconciler.model import (
    ALL_KEYS,
    MANAGED_KEYS,
    ChunkRecord,
    ChunkState,
    ManagedPage,
    PayloadWrite,
)
from reconciler.payload import DEFAULT_KEYS, KeyMap
from reconciler.ports.index import PointCopy, PointPage, StoredPoint, VectorPage, read_back_by_id
from reconciler.stores.chunking_rules import (
    DOC_FILTER_BATCH,
    PAYLOAD_SCHEMAS,
    check_batch_size,
    check_payload_index,
    create_missing_indexes,
    doc_id_batches,
    managed_nodes,
    managed_page,
    owned_page,
    owned_points,
    owned_states,
    pages,
    point_page,
    reread_page,
    vector_pages,
)
from reconciler.stores.qdrant.connecting import connect
from reconciler.stores.qdrant.errors import reading, redacted_url, writing
from reconciler.stores.qdrant.ids import DocumentReads
from reconciler.stores.qdrant.requests import (
    by_id,
    collection_config,
    doc_filter,
    layout_of,
    our_id,
    payload_batches,
    schema_name,
)

log = logging.getLogger(__name__)

__all__ = ["PAYLOAD_SCHEMAS", "QdrantChunkIndex", "connect"]

#: Points per ``upsert`` call of the reference ingestion.
UPSERT_BATCH = 256

_OK_STATUSES = frozenset({models.UpdateStatus.COMPLETED, models.UpdateStatus.ACKNOWLEDGED})
_LOCAL_INDEX_WARNING = "Payload indexes have no effect in the local Qdrant"


class QdrantChunkIndex:
    """The ``ChunkIndex`` port over one Qdrant collection."""

    def __init__(
        self,
        client: QdrantClient,
        *,
        collection: str,
        keys: KeyMap = DEFAULT_KEYS,
        text_key: str = "text",
    ) -> None:
        self.client = client
        self.collection = collection
        self.keys = keys
        self.text_key = text_key
        options = client.init_options
        self._local = options.get("path") is not None or options.get("location") == ":memory:"
        self._where = "local mode" if self._local else redacted_url(options)
        #: Doc ids under one doc_id filter when a scroll selects documents' points on a server
        #: (local mode reads them by id instead: ``ids``).
        self.doc_filter_batch: int | None = None if self._local else DOC_FILTER_BATCH
        self._logical_by_path = {keys.path(key): key for key in ALL_KEYS}
        self._prefix_parts = tuple(keys.prefix[:-1].split(".")) if keys.prefix else ()
        #: Stored names of what the lean scan reads: doc_id, then the managed keys.
        self._scan_names = tuple(keys.name(key) for key in ("doc_id", *MANAGED_KEYS))
        self._content_name = keys.name("content_hash")
        #: Local mode: documents' points read by id (a filter is tested on every point there).
        self._by_doc: DocumentReads | None = None
        if self._local:
            path = keys.path("doc_id")
            self._by_doc = DocumentReads(
                client, collection, path=path, doc_id=self._owner, reading=self._reading
            )

    def _owner(self, payload: Any) -> Any:
        """A payload's stored doc_id (``None`` where it holds none)."""
        return managed_nodes([payload], self._prefix_parts)[0].get(self.keys.name("doc_id"))

    def __repr__(self) -> str:
        return f"QdrantChunkIndex(collection={self.collection!r}, at={self._where!r})"

    @property
    def supports_payload_indexes(self) -> bool:
        """Whether payload indexes exist here (local mode keeps no payload schema)."""
        return not self._local

    def ready_reads(self) -> None:
        """Local mode: the map of point ids by doc_id read now, not at the first read by
        document (a server: nothing)."""
        if self._by_doc is not None and self.exists():
            self._by_doc.ready()

    def close(self) -> None:
        """Close the client (local mode releases its folder lock)."""
        self.client.close()

    # -- reads ------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the collection exists."""
        with self._reading("checking the collection"):
            return bool(self.client.collection_exists(self.collection))

    def scroll(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ChunkState]:
        """Stream every chunk's id and identity/managed payload keys (never vectors or text)."""
        for points in self._pages(batch_size, doc_ids):
            yield from owned_states(map(self._state, points), doc_ids)

    def scan_managed(
        self,
        *,
        batch_size: int = 1000,
        doc_ids: Collection[str] | None = None,
        placement: bool = False,
    ) -> Iterator[ManagedPage]:
        """The check's lean scan, a page at a time (ids converted only when asked for)."""
        paths = self.keys.placement_paths() if placement else self.keys.scan_paths()
        for points in self._pages(batch_size, doc_ids, paths):
            if points:
                yield owned_page(managed_page(points, self._prefix_parts, self._scan_names,
                                 our_id, self._content_name, placement=placement), doc_ids)  # fmt: skip

    def scan_vectors(self, *, batch_size: int = 1000) -> Iterator[VectorPage]:
        """Every chunk's doc_id and dense vector as stored, a page at a time (no text)."""
        check_batch_size(batch_size)
        selector = models.PayloadSelectorInclude(include=[self.keys.path("doc_id")])
        read = self._filtered_pages(batch_size, selector, None, vectors=True)
        return vector_pages(read, self._prefix_parts, self.keys.name("doc_id"))

    def scan_points(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[PointPage]:
        """Whole points (every vector, the whole payload), a page at a time: what a move copies."""
        name = self.keys.name("doc_id")
        for points in self._pages(batch_size, doc_ids, whole=True):
            if points:
                yield owned_points(point_page(points, self._prefix_parts, name, our_id), doc_ids)

    def _pages(
        self,
        batch_size: int,
        doc_ids: Collection[str] | None,
        paths: list[str] | None = None,
        *,
        whole: bool = False,
    ) -> Iterator[Sequence[models.Record]]:
        """Payload-only scroll pages (``paths``, by default identity and managed keys; with
        ``whole``, every key and the vectors), under a doc_id filter: on a server
        ``DOC_FILTER_BATCH`` ids at a time (in point id order within each); local mode, which
        would test the filter on every point in Python for each page, retrieves them by id."""
        check_batch_size(batch_size)
        selector = whole or models.PayloadSelectorInclude(
            include=paths or self.keys.managed_paths()
        )
        if doc_ids is not None and self._by_doc is not None:
            yield from self._by_doc.pages(doc_ids, batch_size, selector, vectors=whole)
            return
        batches = [None] if doc_ids is None else doc_id_batches(doc_ids, self.doc_filter_batch)
        for wanted in batches:
            found = None if wanted is None else doc_filter(self.keys, wanted)
            yield from self._filtered_pages(batch_size, selector, found, vectors=whole)

    def _filtered_pages(
        self,
        batch_size: int,
        selector: models.PayloadSelectorInclude | bool,
        scroll_filter: models.Filter | None,
        *,
        vectors: bool = False,
    ) -> Iterator[Sequence[models.Record]]:
        def fetch(offset: Any) -> tuple[list[models.Record], Any]:
            with self._reading("scrolling"):
                return self.client.scroll(
                    self.collection,
                    scroll_filter=scroll_filter,
                    limit=batch_size,
                    offset=offset,
                    with_payload=selector,
                    with_vectors=vectors,
                )

        for page, points in enumerate(pages(fetch), start=1):
            log.debug("scroll %s page %d: %d point(s)", self.collection, page, len(points))
            yield points

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        """The identity and managed payload of the given points (missing ids are absent)."""
        with self._reading("retrieving points"):
            points = by_id(self.client, self.collection, point_ids, self.keys.managed_paths())
        return [self._state(point) for point in points]

    def retrieve_managed(self, point_ids: Sequence[str | int]) -> ManagedPage:
        """The given points' doc_id and raw managed values, as one lean page."""
        with self._reading("retrieving points"):
            points = by_id(self.client, self.collection, point_ids, self.keys.reread_paths())
        return reread_page(points, self._prefix_parts, self._scan_names, our_id)

    def _state(self, point: models.Record) -> ChunkState:
        payload = self.keys.from_point(point.payload)
        return ChunkState(
            point_id=point.id if isinstance(point.id, int | str) else str(point.id),
            doc_id=payload.get("doc_id"),
            chunk_id=payload.get("chunk_id"),
            payload=payload,
        )

    def read_points(self, point_ids: Sequence[str | int]) -> list[StoredPoint]:
        """Whole points by id (every vector, the whole payload): what a move copies."""
        if not point_ids:
            return []
        with self._reading("reading whole points"):
            points = self.client.retrieve(
                self.collection, ids=list(point_ids), with_payload=True, with_vectors=True
            )
        return [StoredPoint(our_id(p.id), p.vector, dict(p.payload or {})) for p in points]

    def vector_layout(self) -> Mapping[str, Any]:
        """The collection's dense and sparse vector configuration, as plain data."""
        with self._reading("reading the collection info"):
            params = self.client.get_collection(self.collection).config.params
        return layout_of(params)

    def count(self, *, query_filter: Any | None = None) -> int:
        """Exact number of points, optionally under a ``models.Filter``."""
        with self._reading("counting points"):
            result = self.client.count(self.collection, count_filter=query_filter, exact=True)
        return int(result.count)

    def facet(self, *, key: str, limit: int = 100) -> dict[Any, int]:
        """Counts of the values of a logical key (a server needs a payload index on it)."""
        with self._reading(f"faceting {key!r}"):
            response = self.client.facet(
                self.collection, key=self.keys.path(key), limit=limit, exact=True
            )
        return {hit.value: int(hit.count) for hit in response.hits}

    def payload_indexes(self) -> Mapping[str, str]:
        """Existing payload indexes on reconciler keys: logical key -> schema type."""
        with self._reading("reading the collection info"):
            info = self.client.get_collection(self.collection)
        indexes: dict[str, str] = {}
        for path, index in (info.payload_schema or {}).items():
            logical = self._logical_by_path.get(path)
            if logical is not None:
                indexes[logical] = schema_name(index.data_type)
        return indexes

    # -- writes -----------------------------------------------------------------------------

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        """Apply payload-only writes by point id, ~``batch_size`` points a call; return points.

        A ``None`` value removes the key (Qdrant's ``set_payload`` merge), which readers must
        treat like a stored null.
        """
        check_batch_size(batch_size)
        if self._by_doc is not None and any("doc_id" in write.payload for write in writes):
            self._by_doc.ids.forget()  # (a doc_id written: read the map again)
        written = 0
        for number, (operations, points) in enumerate(
            payload_batches(writes, batch_size, self.keys), start=1
        ):
            self._update(operations, points=points, number=number, written=written)
            written += points
        return written

    def _update(
        self,
        operations: list[models.UpdateOperation],
        *,
        points: int,
        number: int,
        written: int,
    ) -> None:
        what = f"payload batch {number} ({points} point(s)) on collection {self.collection!r}"
        with self._writing(what, written=written):
            results = self.client.batch_update_points(
                self.collection, update_operations=operations, wait=True
            )
        bad = sorted({str(r.status) for r in results if r.status not in _OK_STATUSES})
        if bad or len(results) != len(operations):
            raise IndexWriteError(
                f"{what} was not applied: status {', '.join(bad) or 'missing'} "
                f"({len(results)} result(s) for {len(operations)} operation(s)); "
                "check the server's health and retry",
                points_written=written,
            )
        log.debug(
            "set_payload batch %d on %s: %d operation(s), %d point(s)",
            number,
            self.collection,
            len(operations),
            points,
        )

    def create_payload_index(self, *, key: str, schema: str) -> None:
        """Create a payload index on a logical key (no vector touched)."""
        check_payload_index(key, schema)
        path = self.keys.path(key)
        with self._reading(f"creating a {schema} index on {path!r}"), warnings.catch_warnings():
            # Local mode warns that indexes do nothing there; supports_payload_indexes says so.
            warnings.filterwarnings("ignore", message=_LOCAL_INDEX_WARNING, category=UserWarning)
            self.client.create_payload_index(
                self.collection,
                field_name=path,
                field_schema=models.PayloadSchemaType(schema),
                wait=True,
            )
        log.debug("payload index %s (%s) on %s", path, schema, self.collection)

    # -- moves between the collections of a split store ---------------------------------------

    def ensure_layout(
        self, layout: Mapping[str, Any], *, indexes: Mapping[str, str] | None = None
    ) -> None:
        """Create the collection with another one's ``vector_layout`` unless it exists, and
        each payload index of ``indexes`` (logical key -> schema) it lacks."""
        if not self.exists():
            vectors, sparse = collection_config(layout)
            with self._reading("creating the collection"):
                self.client.create_collection(
                    self.collection, vectors_config=vectors, sparse_vectors_config=sparse
                )
            log.info("created collection %s with the layout of another", self.collection)
        if self.supports_payload_indexes:
            create_missing_indexes(self, indexes or {})

    def copy_points(self, points: Sequence[StoredPoint]) -> int:
        """Upsert whole points as another collection held them, ``UPSERT_BATCH`` a call."""
        written = 0
        for start in range(0, len(points), UPSERT_BATCH):
            batch = [
                models.PointStruct(id=p.point_id, vector=p.vector, payload=dict(p.payload))
                for p in points[start : start + UPSERT_BATCH]
            ]
            written += self._upsert(batch, f"copying {len(batch)} point(s)", written)
            self._written((p.point_id, p.payload) for p in points[start : start + UPSERT_BATCH])
        return written

    def delete_stored(self, points: Sequence[StoredPoint]) -> int:
        """Delete whole points by id (``delete_points``)."""
        return self.delete_points([p.point_id for p in points])

    def read_back(self, points: Sequence[StoredPoint]) -> list[PointCopy | None]:
        """The given points as the collection holds them now, by id (``read_back_by_id``)."""
        return read_back_by_id(self, points)

    def delete_points(self, point_ids: Sequence[str | int]) -> int:
        """Delete points by id (missing ids are no error)."""
        if not point_ids:
            return 0
        what = f"deleting {len(point_ids)} point(s) from {self.collection!r}"
        with self._writing(what, written=0):
            self.client.delete(
                self.collection,
                points_selector=models.PointIdsList(points=list(point_ids)),
                wait=True,
            )
        if self._by_doc is not None:
            self._by_doc.ids.drop(point_ids)
        return len(point_ids)

    # -- the reference ingestion only --------------------------------------------------------

    def ensure_collection(self, *, dim: int) -> None:
        """Create the collection (cosine, ``dim``) if it does not exist."""
        if self.exists():
            self._check_dim(dim)
            return
        with self._reading("creating the collection"):
            self.client.create_collection(
                self.collection,
                vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
            )
        log.info("created collection %s (dim %d, cosine)", self.collection, dim)

    def _check_dim(self, dim: int) -> None:
        with self._reading("reading the collection info"):
            vectors = self.client.get_collection(self.collection).config.params.vectors
        if isinstance(vectors, models.VectorParams) and vectors.size != dim:
            raise ConfigError(
                [
                    (
                        "ingest.dim",
                        f"{dim} differs from the vector size {vectors.size} of collection "
                        f"{self.collection!r}",
                    )
                ]
            )

    def upsert_chunks(self, records: Iterable[ChunkRecord]) -> int:
        """Write new points (vector, text, full payload) in batches; ingestion only."""
        written = 0
        iterator = iter(records)
        number = 0
        while batch := list(itertools.islice(iterator, UPSERT_BATCH)):
            number += 1
            points = [self._point(record) for record in batch]
            written += self._upsert(
                points, f"upsert batch {number} ({len(points)} point(s))", written
            )
            self._written((point.id, point.payload) for point in points)
            log.debug("upsert batch %d on %s: %d point(s)", number, self.collection, len(points))
        return written

    def _written(self, points: Iterable[tuple[Any, Any]]) -> None:
        """Points written whole, ``(id, stored payload)``: local mode's map of ids updated."""
        if self._by_doc is not None:
            self._by_doc.ids.put((point_id, self._owner(payload)) for point_id, payload in points)

    def _upsert(self, points: list[models.PointStruct], what: str, written: int) -> int:
        """One ``upsert`` call, waited for; how many points it wrote."""
        what = f"{what} on {self.collection!r}"
        with self._writing(what, written=written):
            result = self.client.upsert(self.collection, points=points, wait=True)
        if result.status not in _OK_STATUSES:
            raise IndexWriteError(
                f"{what} was not applied: status {result.status}", points_written=written
            )
        return len(points)

    def _point(self, record: ChunkRecord) -> models.PointStruct:
        logical = dict(record.payload)
        logical.setdefault("chunk_id", record.chunk_id)
        payload = self.keys.to_point(logical)
        payload[self.text_key] = record.text
        return models.PointStruct(id=record.point_id, vector=list(record.vector), payload=payload)

    def delete_document_chunks(self, doc_id: str) -> int:
        """Delete a document's points before re-ingesting it; return how many; ingestion only.
        By the ids a read under its doc_id filter gives (local mode reads them from its map of
        ids): never a chunk whose doc_id is an array holding it, which the filter also matches
        (``owned_states``)."""
        found = self.delete_points([state.point_id for state in self.scroll(doc_ids=[doc_id])])
        log.debug("deleted %d chunk(s) of %s from %s", found, doc_id, self.collection)
        return found

    # -- error mapping (``errors``) -------------------------------------------------

    def _reading(self, action: str) -> AbstractContextManager[None]:
        return reading(self.collection, self._where, action)

    def _writing(self, what: str, *, written: int) -> AbstractContextManager[None]:
        return writing(self._where, what, written=written)
