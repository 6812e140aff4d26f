"""Local mode's map of point ids by ``doc_id``, so that a read of some documents' points
(a scoped run's scroll under a doc_id filter) retrieves them by id.

qdrant-client's local mode evaluates a scroll's filter in Python over every point of the
collection, again for each page, and sorts every point id for each page too: at 100,000 points
one page under a filter of one document cost 1.8 s of CPU, of a hundred documents 6.1 s, while
``retrieve`` by id costs about 10 µs a point (issue 39: a single watched change at 100k chunks
took 12.3 s, a burst of 1,000 did not finish in 25 minutes). The map is read once, by one
unfiltered scroll page of every point's doc_id (2 s at 100k), when a read by document first
needs it, and then kept by the adapter's own writes. Local mode locks its folder: while the
client is open no other process writes the collection.

What the map does not see, a read re-checks: before each use the collection's point count is
compared with the map's (a point added or deleted behind the adapter, through the raw client,
changes it: the map is read again), and every point retrieved is kept only if its stored
doc_id is still one of the documents asked for (a point deleted is absent from the retrieve;
the map is read again at the next use). A raw write that changes a point's doc_id without
changing the count is the one change it misses, until the map is read again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from qdrant_client import QdrantClient, models

from reconciler.stores.chunking_rules import pages

__all__ = ["DocumentReads", "LocalIds", "canonical", "owners"]


def canonical(point_id: Any) -> Any:
    """A point id as local mode keys it: an integer as it is, a UUID in its canonical
    spelling (``retrieve`` and ``scroll`` hand ids back so)."""
    if isinstance(point_id, str):
        try:
            return str(uuid.UUID(point_id))
        except ValueError:
            return point_id
    return point_id


def owners(doc_id: Any) -> tuple[Hashable, ...]:
    """The values a doc_id filter (``MatchAny``) can match in a stored doc_id: the value, or
    each element of a list (Qdrant matches an array if any element matches); none for a
    missing or unhashable value."""
    values = doc_id if isinstance(doc_id, list) else [doc_id]
    return tuple(v for v in values if v is not None and isinstance(v, Hashable))


def scroll_order(point_id: Any) -> tuple[str, int]:
    """The order of local mode's scroll (integers first, by value, then strings)."""
    return (point_id, 0) if isinstance(point_id, str) else ("", point_id)


class LocalIds:
    """Point ids by stored doc_id, of one local-mode collection (``None`` until read)."""

    __slots__ = ("_by_doc", "_doc_of")

    def __init__(self) -> None:
        self._doc_of: dict[Any, tuple[Hashable, ...]] | None = None
        self._by_doc: dict[Hashable, set[Any]] = {}

    @property
    def size(self) -> int | None:
        """How many points the map holds (``None``: not read)."""
        return None if self._doc_of is None else len(self._doc_of)

    def load(self, points: Iterable[tuple[Any, Any]]) -> None:
        """Read the map again from every point's ``(id, stored doc_id)``."""
        self._doc_of = {}
        self._by_doc = {}
        self.put(points)

    def forget(self) -> None:
        """Drop the map (the next read by document reads it again)."""
        self._doc_of = None
        self._by_doc = {}

    def ids_of(self, doc_ids: Collection[Any]) -> list[Any]:
        """The ids of the points of ``doc_ids``, each once, in scroll order."""
        found: set[Any] = set()
        for doc_id in doc_ids:
            found.update(self._by_doc.get(doc_id, ()))
        return sorted(found, key=scroll_order)

    def put(self, points: Iterable[tuple[Any, Any]]) -> None:
        """Points written (or replaced) with these ``(id, stored doc_id)`` (no-op unread)."""
        if self._doc_of is None:
            return
        for point_id, doc_id in points:
            key = canonical(point_id)
            self._remove(key)
            held = owners(doc_id)
            self._doc_of[key] = held
            for owner in held:
                self._by_doc.setdefault(owner, set()).add(key)

    def drop(self, point_ids: Iterable[Any]) -> None:
        """Points deleted (no-op unread)."""
        if self._doc_of is None:
            return
        for point_id in point_ids:
            self._remove(canonical(point_id))

    def _remove(self, key: Any) -> None:
        assert self._doc_of is not None
        for owner in self._doc_of.pop(key, ()):
            held = self._by_doc.get(owner)
            if held is not None:
                held.discard(key)
                if not held:
                    del self._by_doc[owner]


class DocumentReads:
    """Documents' points read by id from one local-mode collection (``LocalIds``): what the
    adapter's scroll, lean scan and whole-point scan under a doc_id filter read instead of
    scrolling under one. ``doc_id`` reads a point's stored doc_id from its payload;
    ``reading`` maps the client's failures (``errors.reading``)."""

    def __init__(
        self,
        client: QdrantClient,
        collection: str,
        *,
        path: str,
        doc_id: Callable[[Any], Any],
        reading: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self.client = client
        self.collection = collection
        self.ids = LocalIds()
        self._selector = models.PayloadSelectorInclude(include=[path])
        self._doc_id = doc_id
        self._reading = reading

    def pages(
        self,
        doc_ids: Collection[str],
        batch_size: int,
        selector: models.PayloadSelectorInclude | bool,
        *,
        vectors: bool,
    ) -> Iterator[Sequence[models.Record]]:
        """The points of ``doc_ids`` (the payload of ``selector``, which holds the doc_id),
        retrieved ``batch_size`` ids at a time, in scroll order; a point whose stored doc_id
        is none of ``doc_ids`` any more is left out (and the map read again next time)."""
        wanted = set(doc_ids)
        if not wanted:
            return
        found = self._ids_of(wanted)
        for start in range(0, len(found), batch_size):
            part = found[start : start + batch_size]
            with self._reading("retrieving points by id"):
                records = self.client.retrieve(
                    self.collection, ids=part, with_payload=selector, with_vectors=vectors
                )
            kept = [
                record
                for record in records
                if any(owner in wanted for owner in owners(self._doc_id(record.payload)))
            ]
            if len(kept) < len(part):  # (written behind the adapter's back)
                self.ids.forget()
            yield kept

    def ready(self) -> None:
        """The map read unless it holds as many points as the collection."""
        with self._reading("counting points"):
            total = int(self.client.count(self.collection, exact=True).count)
        if self.ids.size != total:
            self._load(total)

    def _ids_of(self, wanted: Collection[str]) -> list[Any]:
        self.ready()
        return self.ids.ids_of(wanted)

    def _load(self, total: int) -> None:
        """Every point's id and doc_id, in one scroll page (local mode sorts every id and
        masks every point again for each page: one page is the cheapest)."""

        def fetch(offset: Any) -> tuple[list[models.Record], Any]:
            with self._reading("reading every point's doc_id"):
                return self.client.scroll(
                    self.collection,
                    limit=max(total, 1),
                    offset=offset,
                    with_payload=self._selector,
                    with_vectors=False,
                )

        read = [(r.id, self._doc_id(r.payload)) for page in pages(fetch) for r in page]
        self.ids.load(read)
