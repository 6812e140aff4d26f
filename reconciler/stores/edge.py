"""The chunk index over Qdrant Edge: the embedded Rust engine (``qdrant-edge-py``, beta).

One Edge *shard* is one collection: a folder ``<index.path>/<index.collection>`` opened in
this process, with no server. Only this module imports ``qdrant_edge`` for points (the
canonical filter in ``reconciler.filters`` renders its Edge form but never opens a shard).

How it maps onto the port, and onto what qdrant-client does:

* point ids: Edge takes unsigned integers and UUIDs and hands UUIDs back as ``uuid.UUID``;
  they are returned as their canonical string, so ids round-trip exactly as on qdrant-client;
* payload keys: the ``KeyMap`` as everywhere (``set_payload(key=...)`` for the nested prefix,
  include-selectors of dotted paths); a ``None`` value removes the key, as on qdrant-client;
* payload indexes: real ones (``create_field_index``), listed by ``info().payload_schema``;
* ``facet``: Edge facets only an indexed key; an unindexed one is counted by a scroll;
* reading ahead: before a whole scroll or one of many documents, the shard's files but the
  vectors' are read through once, in order (``_read_ahead``), so that a page cache that has
  let them go is refilled by one sequential read rather than a page at a time;
* errors: Edge raises bare ``Exception``s. A shard another process (or another open in this
  one) holds is ``IndexUnavailable`` saying so; any other failure of a read is
  ``IndexUnavailable``, of a write ``IndexWriteError`` with ``points_written``, as the
  qdrant-client adapter does. A missing point fails its call after the rest of it applied.

Edge is single-process: a loaded shard holds an exclusive lock (its write-ahead log) until
``close``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import shutil
import stat
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from reconciler.errors import ConfigError, IndexUnavailable, IndexWriteError, StoreFault
from reconciler.model import (
    ALL_KEYS,
    MANAGED_KEYS,
    ChunkRecord,
    ChunkState,
    ManagedPage,
    PayloadWrite,
)
from reconciler.payload import DEFAULT_KEYS, KeyMap
from reconciler.stores.chunking_rules import (
    DOC_FILTER_BATCH,
    check_batch_size,
    check_payload_index,
    doc_id_batches,
    facet_counts,
    managed_page,
    pages,
)

log = logging.getLogger(__name__)

__all__ = ["EdgeChunkIndex"]

#: Edge's type of each payload index schema ``create_payload_index`` accepts.
_EDGE_SCHEMAS: dict[str, qe.PayloadSchemaType] = {
    "keyword": qe.PayloadSchemaType.Keyword,
    "integer": qe.PayloadSchemaType.Integer,
    "datetime": qe.PayloadSchemaType.Datetime,
    "bool": qe.PayloadSchemaType.Bool,
    "float": qe.PayloadSchemaType.Float,
}
_SCHEMA_NAMES: list[tuple[qe.PayloadSchemaType, str]] = [
    *((edge, name) for name, edge in _EDGE_SCHEMAS.items()),
    (qe.PayloadSchemaType.Geo, "geo"),
    (qe.PayloadSchemaType.Text, "text"),
    (qe.PayloadSchemaType.Uuid, "uuid"),
]
#: Points per ``upsert_points`` of the reference ingestion.
UPSERT_BATCH = 256
#: Files a shard folder holds once created.
_SHARD_MARKERS = ("edge_config.json", "segments")
#: What Edge's error says when another open holds the shard, or a point is missing.
_LOCKED = "WouldBlock"
_MISSING_POINT = "No point with id"
#: A point id as Edge takes it.
_EdgeId = int | uuid.UUID | str
#: A scroll of the whole shard, or one that selects at least one document per this many bytes
#: of the shard's files, first reads those files through (``_read_ahead``), once an open. A
#: page cache that no longer holds the shard otherwise serves a scoped scroll's points, which
#: lie all over the files, a page at a time. On this project's bench machine (1M chunks, 600 MB
#: of files) the scroll of 11,661 documents took 3.3 s cold against 1.2 s warm, about 180 µs
#: more a document, while reading the files in order took 0.5-0.7 s: the reading pays from
#: about one document per 180 KiB of files; rounded up to 192 KiB, a little on the side of not
#: reading (about 3,100 documents there). A whole scroll reads every page anyway: in order
#: first, it took 8.9 s instead of 16.7.
READ_AHEAD_BYTES_PER_DOC = 192 * 1024
MIB = 1024 * 1024
#: Free space a shard's disk must have for the shard to be opened or written. Measured: a
#: shard opened on a disk with 16 MiB free died with SIGBUS (Edge rolled a 32 MiB WAL
#: segment and wrote it through its mapping); one segment and as much again for the writes.
EDGE_MIN_FREE = 64 * MIB
#: Bytes read at a time when reading the files through (the pages land in the page cache).
_READ_AHEAD_CHUNK = 1 << 20


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
        self._closed = False
        self._load()  # an existing shard is opened (and locked) now, so a held one says so

    def __repr__(self) -> str:
        return f"EdgeChunkIndex(path={str(self.path)!r})"

    @property
    def shard(self) -> qe.EdgeShard:
        """The open shard (for retrieval code and tests); IndexUnavailable when absent.

        A shard another process created since this index was opened is loaded now.
        """
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
        if self._shard is None and _is_shard(self.path):
            self._shard = self._open(lambda: qe.EdgeShard.load(str(self.path)))
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

    # -- reads ------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the shard exists (has been created at ``path``)."""
        return self._shard is not None or (not self._closed and _is_shard(self.path))

    def scroll(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ChunkState]:
        """Stream every chunk's id and identity/managed payload keys (never vectors or text)."""
        for page, points in enumerate(self._managed_pages(batch_size, doc_ids), start=1):
            log.debug("edge scroll %s page %d: %d point(s)", self.path, page, len(points))
            for point in points:
                yield self._state(point.id, point.payload)

    def scan_managed(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ManagedPage]:
        """The check's lean scan, a page at a time (ids converted only when asked for)."""
        for points in self._managed_pages(batch_size, doc_ids, self.keys.scan_paths()):
            if points:
                yield managed_page(
                    points, self._prefix_parts, self._scan_names, _our_id, self._content_name
                )

    def _managed_pages(
        self, batch_size: int, doc_ids: Collection[str] | None, paths: list[str] | None = None
    ) -> Iterator[Sequence[qe.Record]]:
        """Payload-only scroll pages (``paths``, by default identity and managed keys), under a
        doc_id filter (``DOC_FILTER_BATCH`` ids at a time: in point id order within each)."""
        check_batch_size(batch_size)
        selector = qe.PayloadSelector.Include(paths or self.keys.managed_paths())
        self._read_ahead(None if doc_ids is None else len(doc_ids))
        if doc_ids is None:
            yield from self._pages(batch_size, selector)
            return
        for wanted in doc_id_batches(doc_ids, self.doc_filter_batch):  # (cheap a page)
            yield from self._pages(batch_size, selector, self._doc_filter(wanted))

    def _read_ahead(self, documents: int | None) -> int:
        """Before a whole scroll (``documents`` None) or one selecting that many documents,
        read the shard's files through, but the vectors' (payload-only work never reads them),
        so that the scroll finds their pages in the page cache; once an open. Not for a scroll
        of fewer documents than one per ``read_ahead_bytes_per_doc`` of the files, and not when
        the files would take more than half the memory available (they would push each other
        out before the scroll reached them). Sizes are the bytes on disk (Edge preallocates
        sparse files). Best effort: a file that cannot be read is skipped, and only regular
        files are read. Returns the bytes read.

        (Read, not only advised: ``posix_fadvise(WILLNEED)`` queues the same reads without
        waiting, but pages nobody has touched are the first a reclaiming kernel takes back,
        and on the bench machine most were gone before the scroll came to them.)"""
        self._check_open()
        segments = self.path / "segments"
        if self._read_ahead_done or not segments.is_dir():
            return 0
        found: list[tuple[str, int]] = []
        for folder, subfolders, files in os.walk(segments):
            subfolders[:] = [d for d in subfolders if not d.startswith("vector_")]  # (vectors)
            for name in files:
                with contextlib.suppress(OSError):
                    path = os.path.join(folder, name)
                    status = os.stat(path)
                    if stat.S_ISREG(status.st_mode):
                        found.append((path, min(status.st_size, status.st_blocks * 512)))
        total = sum(size for _path, size in found)
        if documents is not None and documents * self.read_ahead_bytes_per_doc < total:
            return 0  # a few documents: their own pages cost less than the files
        room = available_memory()
        if room is None or total > room // 2:
            log.debug(
                "edge read-ahead %s: %d byte(s), %s available: skipped", self.path, total, room
            )
            return 0
        chunk = bytearray(_READ_AHEAD_CHUNK)
        done = sum(_read_through(path, chunk) for path, _size in found)
        self._read_ahead_done = True
        log.debug("edge read-ahead %s: %d byte(s) read", self.path, done)
        return done

    def _pages(
        self, limit: int, selector: qe.PayloadSelector, scroll_filter: qe.Filter | None = None
    ) -> Iterator[Sequence[qe.Record]]:
        def fetch(offset: Any) -> tuple[list[qe.Record], Any]:
            request = qe.ScrollRequest(
                offset=offset,
                limit=limit,
                filter=scroll_filter,
                with_payload=selector,
                with_vector=False,
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
            ids: list[_EdgeId] = [_edge_id(p) for p in point_ids]
            records = self.shard.retrieve(ids, selector, False)
        return [self._state(record.id, record.payload) for record in records]

    def _state(self, point_id: Any, payload: Mapping[str, Any] | None) -> ChunkState:
        logical = self.keys.from_point(payload)
        return ChunkState(
            point_id=_our_id(point_id),
            doc_id=logical.get("doc_id"),
            chunk_id=logical.get("chunk_id"),
            payload=logical,
        )

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
        """Counts of the (keyword, integer or bool) values of a logical key, most common first.

        Edge facets an indexed key itself; an unindexed one is counted by scrolling that key.
        """
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
        indexes: dict[str, str] = {}
        for path, data_type in self._schema().items():
            logical = self._logical_by_path.get(path)
            if logical is not None:
                indexes[logical] = _schema_name(data_type)
        return indexes

    def _schema(self) -> dict[str, qe.PayloadSchemaType]:
        with self._reading("reading the shard info"):
            schema = self.shard.info().payload_schema
        return {path: info.data_type for path, info in schema.items()}

    # -- writes -----------------------------------------------------------------------------

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        """Apply payload-only writes by point id, ~``batch_size`` points a call; return points.

        A call is one batch: its ``set_payload`` operations apply one after the other (Edge has
        no batch operation), and a failure stops the batch where it is. A ``None`` value
        removes the key.
        """
        check_batch_size(batch_size)
        written = 0
        for number, batch in enumerate(_payload_batches(writes, batch_size, self.keys), start=1):
            points = sum(len(ids) for ids, _ in batch)
            what = f"payload batch {number} ({points} point(s)) on the Edge shard {self.path}"
            self.update_calls += 1
            with self._writing(what, written=written):
                for ids, stored in batch:
                    self.shard.update(
                        qe.UpdateOperation.set_payload(ids, stored, key=self.keys.nest_key)
                    )
            written += points
            log.debug("edge set_payload batch %d: %d point(s)", number, points)
        return written

    def create_payload_index(self, *, key: str, schema: str) -> None:
        """Create a payload index on a logical key (no vector touched)."""
        check_payload_index(key, schema)
        path = self.keys.path(key)
        with self._writing(f"creating a {schema} index on {path!r}", written=0):
            self.shard.update(qe.UpdateOperation.create_field_index(path, _EDGE_SCHEMAS[schema]))
        log.debug("edge payload index %s (%s) on %s", path, schema, self.path)

    # -- the reference ingestion only --------------------------------------------------------

    def ensure_collection(self, *, dim: int) -> None:
        """Create the shard (cosine, ``dim``) if it does not exist."""
        self._check_open()
        if self._load() is not None:
            self._check_dim(dim)
            return
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._shard = self._open(lambda: qe.EdgeShard.create(str(self.path), config))
        log.info("created Edge shard %s (dim %d, cosine)", self.path, dim)

    def _check_dim(self, dim: int) -> None:
        try:
            stored = json.loads((self.path / "edge_config.json").read_text(encoding="utf-8"))
            size = stored["vectors"][""]["size"]
        except (OSError, ValueError, KeyError, TypeError):
            return  # a layout this build does not read: Edge checks each vector's size anyway
        if size != dim:
            raise ConfigError(
                [("ingest.dim", f"{dim} differs from the vector size {size} of {self.path}")]
            )

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
        return qe.Point(_edge_id(record.point_id), list(record.vector), payload)

    def delete_document_chunks(self, doc_id: str) -> int:
        """Delete a document's points before re-ingesting it; return how many; ingestion only."""
        doc_filter = self._doc_filter([doc_id])
        found = self.count(query_filter=doc_filter)
        if not found:
            return 0
        with self._writing(f"deleting the chunks of {doc_id!r} from {self.path}", written=0):
            self.shard.update(qe.UpdateOperation.delete_points_by_filter(doc_filter))
        return found

    def _doc_filter(self, doc_ids: list[str]) -> qe.Filter:
        return qe.Filter(
            must=[qe.FieldCondition(key=self.keys.path("doc_id"), match=qe.MatchAny(doc_ids))]
        )

    # -- error mapping ----------------------------------------------------------------------

    def _ensure_space(self, action: str) -> None:
        """Refuse to open or write the shard with less than ``EDGE_MIN_FREE`` on its disk.

        Edge maps its files (preallocated sparse: 32 MiB a WAL segment) and writes into them;
        on a full disk such a write does not fail, it kills the process with SIGBUS. So
        every command, ``check`` too, is refused here first, with a message naming the disk.
        """
        where = self.path
        try:
            while not where.exists() and where != where.parent:
                where = where.parent
            free = shutil.disk_usage(where).free
        except OSError:
            return  # not knowable: Edge's own errors say what is wrong
        if free < EDGE_MIN_FREE:
            raise StoreFault(
                f"chunk index at {self.path}: disk full ({free / MIB:.1f} MiB free on the disk "
                f"of {where}); a Qdrant Edge shard needs {EDGE_MIN_FREE // MIB} MiB free to "
                f"{action} (it writes into files it maps, and on a full disk the process would "
                "die with SIGBUS). Free space on that disk, then run again"
            )

    def _open(self, opener: Any) -> qe.EdgeShard:
        self._ensure_space("be opened")
        try:
            shard: qe.EdgeShard = opener()
        except Exception as exc:
            text = str(exc)
            if _LOCKED in text:
                raise IndexUnavailable(
                    f"the Qdrant Edge shard at {self.path} is open in another process (or "
                    "already open in this one): Edge allows one open shard at a time. Stop the "
                    "other reconciler, ingestion or reader and retry, or use a Qdrant server "
                    '(index.engine = "qdrant" with index.url)'
                ) from exc
            if "already contains segment data" in text:
                raise IndexUnavailable(
                    f"a Qdrant Edge shard appeared at {self.path} while this one was being "
                    "created (another ingestion?); retry"
                ) from exc
            raise IndexUnavailable(
                f"cannot open the Qdrant Edge shard at {self.path}: {text}; check index.path, "
                "its permissions and free disk space"
            ) from exc
        return shard

    @contextmanager
    def _reading(self, action: str) -> Iterator[None]:
        """Map an Edge failure to ``IndexUnavailable`` (retry later)."""
        try:
            yield
        except (IndexUnavailable, TypeError, ValueError):
            raise
        except Exception as exc:
            raise IndexUnavailable(
                f"{action} on the Qdrant Edge shard {self.path} failed: {exc}; check the disk "
                "and the shard folder, then retry"
            ) from exc

    @contextmanager
    def _writing(self, what: str, *, written: int) -> Iterator[None]:
        """Map an Edge failure to ``IndexWriteError`` saying how far the writes got; refuse
        (``StoreFault``, nothing of this write sent) when the disk is too full to write."""
        self._ensure_space("be written")
        try:
            yield
        except (IndexUnavailable, TypeError, ValueError):
            raise
        except Exception as exc:
            text = str(exc)
            if _MISSING_POINT in text:
                point = text.split(_MISSING_POINT, 1)[1].strip()
                detail = (
                    f"point {point} does not exist (deleted after the scan?); the next run skips it"
                )
            else:
                detail = f"{text}; check the disk and the shard folder, then retry"
            raise IndexWriteError(f"{what} failed: {detail}", points_written=written) from exc


def _read_through(path: str, chunk: bytearray) -> int:
    """Read a file from start to end into ``chunk`` (over and over); the bytes read, 0 for a
    file that cannot be read."""
    done = 0
    with contextlib.suppress(OSError), open(path, "rb", buffering=0) as file:
        while read := file.readinto(chunk):
            done += read
    return done


#: Where Linux says how much memory is available, and a cgroup v2 container's own limit.
MEMINFO = "/proc/meminfo"
CGROUP_MEMORY = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current")


def available_memory() -> int | None:
    """Bytes of memory available for new pages without swapping: Linux's ``MemAvailable``,
    else the free pages ``sysconf`` counts, and no more than what a cgroup v2 limit leaves
    this container; ``None`` where none of it is known."""
    room: int | None = None
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open(MEMINFO, encoding="ascii") as info,
    ):
        for line in info:
            if line.startswith("MemAvailable:"):
                room = int(line.split()[1]) * 1024
                break
    if room is None:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            room = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, ValueError):
        limit, used = (Path(p).read_text(encoding="ascii").strip() for p in CGROUP_MEMORY)
        if limit != "max":
            left = max(int(limit) - int(used), 0)
            room = left if room is None else min(room, left)
    return room


def _is_shard(path: Path) -> bool:
    return any((path / marker).exists() for marker in _SHARD_MARKERS)


#: A UUID in its canonical spelling (what Edge and qdrant-client hand back): taken as it is.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _edge_id(point_id: str | int) -> str | int:
    """A point id as Edge takes it: an unsigned integer or a UUID string."""
    if type(point_id) is str and _CANONICAL_UUID.fullmatch(point_id):
        return point_id  # (the usual id: a quarter of the cost of parsing it)
    if isinstance(point_id, bool) or not isinstance(point_id, int | str):
        raise TypeError(f"a point id is an int or a UUID string, not {type(point_id).__name__}")
    if isinstance(point_id, int) and point_id < 0:
        raise ValueError(f"point id {point_id}: Qdrant takes unsigned integers or UUIDs")
    if isinstance(point_id, str):
        try:
            uuid.UUID(point_id)
        except ValueError:
            raise ValueError(
                f"point id {point_id!r}: Qdrant takes unsigned integers or UUIDs"
            ) from None
    return point_id


def _our_id(point_id: Any) -> str | int:
    """An id as Edge hands it back, as qdrant-client would: int, or the UUID's string."""
    if isinstance(point_id, int):
        return point_id
    return str(point_id)


def _payload_batches(
    writes: Iterable[PayloadWrite], batch_size: int, keys: KeyMap
) -> Iterator[list[tuple[list[_EdgeId], dict[str, Any]]]]:
    """Group writes into calls of ~``batch_size`` points; a larger write is split by ids."""
    batch: list[tuple[list[_EdgeId], dict[str, Any]]] = []
    size = 0
    for write in writes:
        ids: list[_EdgeId] = [_edge_id(p) for p in write.point_ids]
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


def _schema_name(data_type: qe.PayloadSchemaType) -> str:
    for edge, name in _SCHEMA_NAMES:
        if data_type == edge:
            return name
    return str(data_type).rsplit(".", 1)[-1].lower()
