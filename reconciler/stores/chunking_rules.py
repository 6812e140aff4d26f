"""Rules every ``ChunkIndex`` adapter shares, whatever its engine (no driver here): argument
checks with the same messages, and Qdrant's facet semantics for adapters that count values
themselves (the in-memory fake, and Qdrant Edge on an unindexed key)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from reconciler.model import ALL_KEYS

__all__ = ["PAYLOAD_SCHEMAS", "check_batch_size", "check_payload_index", "facet_counts", "pages"]

_Point = TypeVar("_Point")

#: Payload index types ``create_payload_index`` accepts.
PAYLOAD_SCHEMAS: tuple[str, ...] = ("keyword", "integer", "datetime", "bool", "float")


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
