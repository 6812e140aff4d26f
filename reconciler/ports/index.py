"""The chunk index port: a vector collection seen only through chunk identity and managed
payload keys, as a reader (``ChunkReader``), the repair's payload-only writer
(``ChunkWriter``), the reference ingestion's writer (``ChunkIngestion``) and the mover of whole
points between the two collections of a split store (``ChunkMover``); ``ChunkIndex`` is all
four. ``SplitIndex`` is a chunk index kept in two collections, a main one and an archive
(``[index] archive_collection``)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reconciler.model import (
    MANAGED_KEYS,
    ChunkRecord,
    ChunkState,
    ManagedPage,
    PayloadWrite,
)
from reconciler.payload import KeyMap


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """A whole point as its collection holds it, to move it into another collection of the
    same layout: its vectors as the engine hands them back (never embedded again) and its
    whole payload, text included."""

    point_id: str | int
    vector: Any
    payload: Mapping[str, Any]
    #: The engine's own object for ``point_id`` as the read handed it back (Qdrant Edge's
    #: ``uuid.UUID``), which a write or read of the same engine takes again without parsing
    #: the text (``copy_points``, ``read_back``); ``None`` where not kept. It names the same
    #: point as ``point_id`` (not compared: two reads of one point are equal).
    native: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PointPage:
    """One page of ``ChunkReader.scan_points``: whole points, in scroll order, and the
    ``doc_id`` each holds (``None`` where it holds none), read from the same payloads."""

    points: Sequence[StoredPoint]
    #: The stored ``doc_id`` of each point, in the order of ``points``.
    doc_ids: Sequence[Any]

    def __len__(self) -> int:
        return len(self.points)


@dataclass(frozen=True, slots=True)
class VectorPage:
    """One page of ``ChunkReader.scan_vectors``: the chunks' document ids and dense vectors,
    as the collection stores them (read, never re-embedded), in scroll order."""

    #: The ``doc_id`` of each chunk read.
    doc_ids: Sequence[str]
    #: Its vector, in the order of ``doc_ids`` (all of one collection's size).
    vectors: Sequence[Sequence[float]]
    #: Points of the page left out: no string ``doc_id``, or not exactly one dense vector
    #: (none, several named ones, a multivector or a sparse one only).
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.doc_ids)


class _Absent:
    """The value ``retrieve_managed`` reads for a key the point does not hold."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


#: A key absent from a point, in a ``retrieve_managed`` row (a key stored as null is ``None``:
#: a write that wants it absent must send it).
ABSENT: Any = _Absent()


def states_page(states: Sequence[ChunkState]) -> ManagedPage:
    """``retrieve``'s states as ``retrieve_managed``'s page (an adapter that holds logical
    payloads, or an overlay of one)."""
    rows = [
        (state.doc_id, *(state.payload.get(key, ABSENT) for key in MANAGED_KEYS))
        for state in states
    ]
    return ManagedPage(rows, lambda index: states[index].point_id)


class ChunkReader(Protocol):
    """A vector collection read through chunk identity and managed payload keys."""

    keys: KeyMap

    def exists(self) -> bool:
        """Whether the collection exists."""
        ...

    def scroll(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ChunkState]:
        """Stream every chunk's id and identity/managed payload keys (never vectors or text)."""
        ...

    def scan_managed(
        self,
        *,
        batch_size: int = 1000,
        doc_ids: Collection[str] | None = None,
        placement: bool = False,
    ) -> Iterator[ManagedPage]:
        """The check's lean scan, a page at a time: each chunk's doc_id and raw managed values
        (only the chunks of ``doc_ids`` when given), in the order and with the filter of
        ``scroll``; ``ManagedPage.chunks()`` gives ``(point id, doc_id, values)`` a chunk.

        The values are the stored ones, in ``MANAGED_KEYS`` order, an absent key as ``None``;
        nothing is normalised, no per-chunk dict or ``ChunkState`` is built, and point ids
        are converted only when asked for. With ``placement``, only ``PLACEMENT_KEYS`` are
        read (doc_id and doc_family_id; every other value as ``None``, no content hashes):
        where each chunk is and whose, not what it says (``reconciler split``).
        """
        ...

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        """Identity and managed payload of the given points (missing ids are absent)."""
        ...

    def retrieve_managed(self, point_ids: Sequence[str | int]) -> ManagedPage:
        """The re-read before a payload write, lean: the given points (missing ids are absent)
        as one page of ``(doc_id, *raw managed values)`` rows, as ``scan_managed`` reads them
        but for a key the point does not hold, which reads as ``ABSENT`` (not ``None``), and
        without content_hash; ``point_id(i)`` is the id of row ``i`` as ``retrieve`` gives it."""
        ...

    def scan_vectors(self, *, batch_size: int = 1000) -> Iterator[VectorPage]:
        """Every chunk's doc_id and dense vector as stored, a page at a time, in the order of
        ``scroll`` (the one read of vectors: ``reconciler suggest`` compares documents by
        them; nothing is embedded). A point without a string doc_id or without exactly one
        dense vector is left out and counted (``VectorPage.skipped``); no text is read."""
        ...

    @property
    def supports_payload_indexes(self) -> bool:
        """Whether payload indexes exist in this engine (not in qdrant-client local mode)."""
        ...

    def payload_indexes(self) -> Mapping[str, str]:
        """Existing payload indexes: logical key -> schema type."""
        ...

    def count(self, *, query_filter: Any | None = None) -> int:
        """Exact number of points, optionally under a filter."""
        ...

    def read_points(self, point_ids: Sequence[str | int]) -> list[StoredPoint]:
        """Whole points by id, vectors and every payload key as stored (missing ids are
        absent): what a move copies. Callers read a batch of ids at a time."""
        ...

    def read_back(self, points: Sequence[StoredPoint]) -> list[PointCopy | None]:
        """The given points as this collection holds them now, one an entry in the order
        given (``None`` where it holds none), each with ``vector`` and ``payload`` as
        ``read_points`` reads them: the confirm of ``copy_points`` (``read_back_by_id`` is
        the plain way; an engine may hand back its own records)."""
        ...

    def scan_points(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[PointPage]:
        """Whole points (vectors and every payload key, as ``read_points`` reads them), a page
        of at most ``batch_size`` at a time, in the order and with the filter of ``scroll``
        (only the chunks of ``doc_ids`` when given): a move reads each point it copies once,
        in the pass that finds it. Empty pages are left out."""
        ...

    def vector_layout(self) -> Mapping[str, Any]:
        """The collection's vector configuration (plain data), which ``ensure_layout`` of the
        same adapter takes to create a collection that holds the same points."""
        ...

    def facet(self, *, key: str, limit: int = 100) -> dict[Any, int]:
        """Counts of the values of a logical key."""
        ...

    def ready_reads(self) -> None:
        """Read ahead what reads by document (``doc_ids=``) need, so that the first is as
        quick as the next: qdrant-client local mode reads its map of point ids by doc_id (a
        pass over every point); nothing elsewhere, nor where the collection does not exist.
        The watch calls it when it opens the index it keeps open (``[watch] keep_open``)."""
        ...

    def close(self) -> None:
        """Release the connection (local mode holds a file lock until closed)."""
        ...


class ChunkWriter(Protocol):
    """The payload-only writes of a repair: managed keys by point id, payload indexes."""

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        """Apply payload-only writes by point id in batches; return the points written.

        A ``None`` value removes the key (Qdrant's set_payload semantics, local and server), so
        readers treat an absent nullable key as ``None``.
        """
        ...

    def create_payload_index(self, *, key: str, schema: str) -> None:
        """Create a payload index on a logical key (no vector touched)."""
        ...


class ChunkIngestion(Protocol):
    """What the reference ingestion writes; the reconciler never calls these."""

    def ensure_collection(self, *, dim: int) -> None:
        """Create the collection if it does not exist."""
        ...

    def upsert_chunks(self, records: Iterable[ChunkRecord]) -> int:
        """Write new points (vector, text, full payload); ingestion only."""
        ...

    def delete_document_chunks(self, doc_id: str) -> int:
        """Delete a document's points before re-ingesting it; ingestion only."""
        ...


class ChunkMover(Protocol):
    """Whole points copied into, and deleted from, a collection of a split store: a move
    between its collections; vectors are copied as they are, never embedded."""

    def ensure_layout(
        self, layout: Mapping[str, Any], *, indexes: Mapping[str, str] | None = None
    ) -> None:
        """Create the collection with ``layout`` (another collection's ``vector_layout``) if it
        does not exist, and each payload index of ``indexes`` (logical key -> schema) it
        lacks."""
        ...

    def copy_points(self, points: Sequence[StoredPoint]) -> int:
        """Write whole points as another collection of the same layout held them (vectors
        and payload as they are; a point already here is replaced); return how many."""
        ...

    def delete_points(self, point_ids: Sequence[str | int]) -> int:
        """Delete points by id (missing ids are no error); return how many were asked."""
        ...

    def delete_stored(self, points: Sequence[StoredPoint]) -> int:
        """``delete_points`` of whole points read from this collection (an engine may take
        the ids it handed back, ``StoredPoint.native``, without parsing their text)."""
        ...


class PointCopy(Protocol):
    """A point as ``read_back`` hands it back: its vectors and its whole payload."""

    @property
    def vector(self) -> Any: ...

    @property
    def payload(self) -> Mapping[str, Any] | None: ...


def read_back_by_id(reader: ChunkReader, points: Sequence[StoredPoint]) -> list[PointCopy | None]:
    """``read_back`` through ``read_points``: the points read again by id, matched by id."""
    held = {str(p.point_id): p for p in reader.read_points([p.point_id for p in points])}
    return [held.get(str(p.point_id)) for p in points]


class ChunkIndex(ChunkReader, ChunkWriter, ChunkIngestion, ChunkMover, Protocol):
    """A vector collection seen only through chunk identity and managed payload keys."""

    ...


@runtime_checkable
class SplitIndex(Protocol):
    """A chunk index kept in two collections (``[index] archive_collection``): ``main`` holds
    the servable versions' chunks, ``archive`` every other one. It is a ``ChunkIndex`` over
    both (reads see both; a payload write goes where its point is); a move goes through the
    two parts, a batch of point ids at a time (``reconciler.writing.moving``)."""

    main: ChunkIndex
    archive: ChunkIndex

    @property
    def collections(self) -> tuple[str, str]:
        """The names of the main collection and of the archive."""
        ...


def split_of(index: object) -> SplitIndex | None:
    """``index`` as a split store, or ``None`` when it is one collection."""
    return index if isinstance(index, SplitIndex) else None
