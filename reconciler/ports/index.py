"""The chunk index port: a vector collection seen only through chunk identity and managed
payload keys, as a reader (``ChunkReader``), the repair's payload-only writer
(``ChunkWriter``) and the reference ingestion's writer (``ChunkIngestion``); ``ChunkIndex`` is
all three."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from reconciler.model import (
    ChunkRecord,
    ChunkState,
    ManagedPage,
    PayloadWrite,
    VectorPage,
)
from reconciler.payload import KeyMap


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
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ManagedPage]:
        """The check's lean scan, a page at a time: each chunk's doc_id and raw managed values
        (only the chunks of ``doc_ids`` when given), in the order and with the filter of
        ``scroll``; ``ManagedPage.chunks()`` gives ``(point id, doc_id, values)`` a chunk.

        The values are the stored ones, in ``MANAGED_KEYS`` order, an absent key as ``None``;
        nothing is normalised, no per-chunk dict or ``ChunkState`` is built, and point ids
        are converted only when asked for.
        """
        ...

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        """Identity and managed payload of the given points (missing ids are absent)."""
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

    def facet(self, *, key: str, limit: int = 100) -> dict[Any, int]:
        """Counts of the values of a logical key."""
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


class ChunkIndex(ChunkReader, ChunkWriter, ChunkIngestion, Protocol):
    """A vector collection seen only through chunk identity and managed payload keys."""

    ...
