"""Chunks as the index holds them: the managed payload of a point, read in pages, and the
writes of payloads and of whole points."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ChunkState:
    """The identity and managed payload of one chunk, as scanned (never vector, never text).

    ``payload`` holds logical key names; keys absent from the point are absent here.
    """

    point_id: str | int
    doc_id: str | None
    chunk_id: str | None
    payload: Mapping[str, Any] = field(default_factory=dict)


#: One chunk as the check's lean scan yields it: (point id, doc_id as stored, the raw stored
#: values of ``MANAGED_KEYS`` in that order, an absent key read as ``None``). No dict, no
#: ``ChunkState``: the check's hot path compares raw values, normalising only a mismatch.
ManagedRow = tuple[str | int, Any, tuple[Any, ...]]


class ManagedPage:
    """One page of the check's lean scan: for each chunk one tuple, its ``doc_id`` as stored
    followed by the raw stored values of ``MANAGED_KEYS`` in that order (an absent key as
    ``None``), so that a whole page is hashed and matched in C.

    Point ids are converted only when asked for (``point_id(i)``): the check needs the id of
    a chunk only when its values differ from its row's, which is rare.
    """

    __slots__ = ("_point_id", "archived", "contents", "rows")

    def __init__(
        self,
        rows: Sequence[tuple[Any, ...]],
        point_id: Callable[[int], str | int],
        contents: Sequence[Any] | None = None,
    ) -> None:
        self.rows = rows  # ``(doc_id, *managed values)`` a chunk
        #: Each chunk's ``content_hash`` as stored (``None`` when absent), in the order of
        #: ``rows``; ``None`` for a page read without them (every chunk's unknown).
        self.contents = contents
        self._point_id = point_id
        self.archived = False  # whether it comes from a split store's archive collection

    def __len__(self) -> int:
        return len(self.rows)

    def point_id(self, index: int) -> str | int:
        """The id of the ``index``-th chunk of the page (an int, or a UUID's string)."""
        return self._point_id(index)

    def chunks(self) -> Iterator[ManagedRow]:
        """The page chunk by chunk: ``(point id, doc_id, managed values)``."""
        for index, row in enumerate(self.rows):
            yield self._point_id(index), row[0], row[1:]


@dataclass(frozen=True, slots=True)
class PayloadWrite:
    """Set managed ``payload`` (logical keys) on ``point_ids``; one per document in practice."""

    point_ids: tuple[str | int, ...]
    payload: Mapping[str, Any]
    doc_id: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A chunk to ingest: only the reference ingestion creates points."""

    point_id: str
    chunk_id: str
    text: str
    vector: tuple[float, ...]
    payload: Mapping[str, Any]
