"""A chunk index kept in two collections (``[index] archive_collection``): the main one holds
the chunks of servable versions (current, unknown, pending: ``rules.time_rule.kept_in_main``),
the archive every other one, so a retrieval path that forgets ``default_filter()`` on the
main collection still finds no superseded chunk.

``SplitChunkIndex`` is the ``ChunkIndex`` port over both, built from two adapters of one
engine (qdrant-client collections on one client, two Qdrant Edge shards side by side, two
in-memory fakes). No driver here:

* reads see both: a scroll and the check's lean scan read the main collection, then the
  archive (its pages flagged ``ManagedPage.archived``, which is how the check tells a chunk in
  the wrong collection); ``retrieve``, ``read_points``, ``count`` and ``facet`` add both up, ``scan_points``
  reads the main collection, then the archive;
* a payload write goes where its point is (the archive's points are looked up by id, a batch
  at a time; every other id is the main collection's);
* the reference ingestion writes a new chunk where its payload puts it (creating the archive
  with the main collection's layout and payload indexes when it is first needed), and
  deletes a document's chunks from both;
* payload indexes: those both collections have; a new one is created in each that lacks it.

Moves between the two are not made here: ``reconciler.writing.moving`` makes them through
the parts (``main``, ``archive``), audited a batch of point ids at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from reconciler.model import ChunkRecord, ChunkState, ManagedPage, PayloadWrite
from reconciler.ports import ChunkIndex
from reconciler.ports.index import PointCopy, PointPage, StoredPoint, VectorPage, read_back_by_id
from reconciler.rules.time_rule import kept_in_main
from reconciler.stores.chunking_rules import facet_counts

__all__ = ["SplitChunkIndex"]

#: Point ids looked up in the archive at once, to route payload writes.
LOOKUP = 1000

_Item = TypeVar("_Item")


class SplitChunkIndex:
    """The ``ChunkIndex`` port over a main collection and its archive (``SplitIndex``)."""

    def __init__(self, main: ChunkIndex, archive: ChunkIndex) -> None:
        self.main = main
        self.archive = archive
        self.keys = main.keys

    def __repr__(self) -> str:
        return f"SplitChunkIndex(main={self.main!r}, archive={self.archive!r})"

    @property
    def collections(self) -> tuple[str, str]:
        """The names of the main collection and of the archive."""
        return _name(self.main), _name(self.archive)

    @property
    def supports_payload_indexes(self) -> bool:
        """Whether payload indexes exist in this engine."""
        return self.main.supports_payload_indexes

    def close(self) -> None:
        """Close both parts (each releases its own lock)."""
        try:
            self.main.close()
        finally:
            self.archive.close()

    def ready_reads(self) -> None:
        """Each part's reads by document made ready."""
        for part in self._parts():
            part.ready_reads()

    def archive_conflict(self) -> str | None:
        """Why the archive cannot be this store's: it exists and its vectors differ from the
        main collection's (size, distance, type or names: someone else made it first), said
        naming both collections and what differs; None when it fits or does not exist."""
        if not self.archive.exists() or not self.main.exists():
            return None
        ours = _vector_traits(self.main.vector_layout())
        theirs = _vector_traits(self.archive.vector_layout())
        if ours == theirs:
            return None
        main, archive = self.collections
        differs = [
            f"{key} {theirs.get(key, 'absent')} (in {main!r}: {ours.get(key, 'absent')})"
            for key in sorted(set(ours) | set(theirs), key=str)
            if ours.get(key) != theirs.get(key)
        ]
        return (
            f"the archive collection {archive!r} exists and cannot hold the chunks of "
            f"{main!r}: {'; '.join(differs)}. It was not made by `reconciler split` for this "
            f"collection: drop or rename it, or set index.archive_collection to another name"
        )

    # -- reads: both collections -------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the main collection exists (the archive is created by the first move)."""
        return self.main.exists()

    def _parts(self) -> list[ChunkIndex]:
        return [self.main, self.archive] if self.archive.exists() else [self.main]

    def scroll(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ChunkState]:
        """Every chunk of the main collection, then of the archive."""
        for part in self._parts():
            yield from part.scroll(batch_size=batch_size, doc_ids=doc_ids)

    def scan_managed(
        self,
        *,
        batch_size: int = 1000,
        doc_ids: Collection[str] | None = None,
        placement: bool = False,
    ) -> Iterator[ManagedPage]:
        """The lean scan of the main collection, then of the archive (pages flagged)."""
        for part in self._parts():
            archived = part is self.archive
            only_where = {"placement": True} if placement else {}  # (as ``scan`` asks)
            pages = part.scan_managed(batch_size=batch_size, doc_ids=doc_ids, **only_where)
            for page in pages:
                page.archived = archived
                yield page

    def scan_vectors(self, *, batch_size: int = 1000) -> Iterator[VectorPage]:
        """The chunk vectors of the main collection, then of the archive (a superseded
        document's chunks are compared as much as a current one's)."""
        for part in self._parts():
            yield from part.scan_vectors(batch_size=batch_size)

    def scan_points(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[PointPage]:
        """Whole points of the main collection, then of the archive."""
        for part in self._parts():
            yield from part.scan_points(batch_size=batch_size, doc_ids=doc_ids)

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        """The points found in the main collection, then those found in the archive."""
        found = self.main.retrieve(point_ids)
        if self.archive.exists() and len(found) < len(point_ids):
            seen = {str(state.point_id) for state in found}
            rest = [pid for pid in point_ids if str(pid) not in seen]
            found += self.archive.retrieve(rest)
        return found

    def retrieve_managed(self, point_ids: Sequence[str | int]) -> ManagedPage:
        """The points found in the main collection, then those found in the archive."""
        found = self.main.retrieve_managed(point_ids)
        if not self.archive.exists() or len(found) >= len(point_ids):
            return found
        ids = [found.point_id(at) for at in range(len(found))]
        seen = {str(pid) for pid in ids}
        more = self.archive.retrieve_managed([p for p in point_ids if str(p) not in seen])
        ids += [more.point_id(at) for at in range(len(more))]
        return ManagedPage([*found.rows, *more.rows], ids.__getitem__)

    def read_points(self, point_ids: Sequence[str | int]) -> list[StoredPoint]:
        """Whole points, from the main collection, then from the archive."""
        found = self.main.read_points(point_ids)
        if self.archive.exists() and len(found) < len(point_ids):
            seen = {str(point.point_id) for point in found}
            found += self.archive.read_points([p for p in point_ids if str(p) not in seen])
        return found

    def vector_layout(self) -> Mapping[str, Any]:
        """The main collection's layout (the archive is created with it)."""
        return self.main.vector_layout()

    def count(self, *, query_filter: Any | None = None) -> int:
        """Points in both collections (under a filter of the engine's, when given)."""
        return sum(part.count(query_filter=query_filter) for part in self._parts())

    def facet(self, *, key: str, limit: int = 100) -> dict[Any, int]:
        """Counts of a key's values over both collections, most common first."""
        counts: dict[Any, int] = {}
        for part in self._parts():
            for value, count in part.facet(key=key, limit=limit).items():
                counts[value] = counts.get(value, 0) + count
        return facet_counts(
            itertools.chain.from_iterable(itertools.repeat(v, n) for v, n in counts.items()),
            limit=limit,
        )

    def payload_indexes(self) -> Mapping[str, str]:
        """The payload indexes both collections have (the main one's while alone)."""
        indexes = dict(self.main.payload_indexes())
        if self.archive.exists():
            archived = self.archive.payload_indexes()
            indexes = {k: v for k, v in indexes.items() if archived.get(k) == v}
        return indexes

    # -- writes: where each point is ----------------------------------------------------------

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        """Set payloads by point id, each in the collection that holds the point."""
        if not self.archive.exists():
            return self.main.set_payloads(writes, batch_size=batch_size)
        ids = [pid for write in writes for pid in write.point_ids]
        archived: set[str] = set()
        for start in range(0, len(ids), LOOKUP):
            archived.update(
                str(s.point_id) for s in self.archive.retrieve(ids[start : start + LOOKUP])
            )
        here: list[PayloadWrite] = []
        there: list[PayloadWrite] = []
        for write in writes:
            inside = tuple(p for p in write.point_ids if str(p) in archived)
            outside = tuple(p for p in write.point_ids if str(p) not in archived)
            if outside:
                here.append(PayloadWrite(outside, write.payload, write.doc_id))
            if inside:
                there.append(PayloadWrite(inside, write.payload, write.doc_id))
        written = self.main.set_payloads(here, batch_size=batch_size) if here else 0
        return written + (self.archive.set_payloads(there, batch_size=batch_size) if there else 0)

    def create_payload_index(self, *, key: str, schema: str) -> None:
        """Create the index in each collection that lacks it."""
        for part in self._parts():
            if part.payload_indexes().get(key) != schema:
                part.create_payload_index(key=key, schema=schema)

    # -- moves: made through the parts (``writing.moving``); as a whole, the main one's -------

    def ensure_layout(
        self, layout: Mapping[str, Any], *, indexes: Mapping[str, str] | None = None
    ) -> None:
        """Create the main collection with ``layout`` unless it exists."""
        self.main.ensure_layout(layout, indexes=indexes)

    def copy_points(self, points: Sequence[StoredPoint]) -> int:
        """Write whole points into the collection their payload puts them in."""
        state = self.keys.from_point
        return self._place(
            points,
            lambda p: state(p.payload).get("version_state"),
            self.main.copy_points,
            self.archive.copy_points,
        )

    def delete_stored(self, points: Sequence[StoredPoint]) -> int:
        """Delete whole points by id from both collections (``delete_points``)."""
        return self.delete_points([p.point_id for p in points])

    def read_back(self, points: Sequence[StoredPoint]) -> list[PointCopy | None]:
        """The given points as either collection holds them now, by id (``read_back_by_id``)."""
        return read_back_by_id(self, points)

    def delete_points(self, point_ids: Sequence[str | int]) -> int:
        """Delete points by id from both collections."""
        if self.archive.exists():
            self.archive.delete_points(point_ids)
        return self.main.delete_points(point_ids)

    def _ensure_archive(self) -> None:
        """Create the archive with the main collection's layout and payload indexes."""
        if not self.archive.exists():
            self.archive.ensure_layout(
                self.main.vector_layout(), indexes=self.main.payload_indexes()
            )

    # -- the reference ingestion ------------------------------------------------------------

    def ensure_collection(self, *, dim: int) -> None:
        """Create the main collection if it does not exist."""
        self.main.ensure_collection(dim=dim)

    def upsert_chunks(self, records: Iterable[ChunkRecord]) -> int:
        """Write new chunks where their payload puts them (``kept_in_main``)."""
        return self._place(
            list(records),
            lambda r: r.payload.get("version_state"),
            self.main.upsert_chunks,
            self.archive.upsert_chunks,
        )

    def delete_document_chunks(self, doc_id: str) -> int:
        """Delete a document's chunks from both collections."""
        deleted = self.main.delete_document_chunks(doc_id)
        if self.archive.exists():
            deleted += self.archive.delete_document_chunks(doc_id)
        return deleted

    def _place(
        self,
        items: Sequence[_Item],
        state: Callable[[_Item], object],
        main: Callable[[list[_Item]], int],
        archive: Callable[[list[_Item]], int],
    ) -> int:
        """Hand each item to the main collection's writer or the archive's, as the
        ``version_state`` in its payload puts it."""
        kept: list[_Item] = []
        moved: list[_Item] = []
        for item in items:
            (kept if kept_in_main(state(item)) else moved).append(item)
        written = main(kept) if kept else 0
        if moved:
            self._ensure_archive()
            written += archive(moved)
        return written


#: What a collection's vectors must agree on for a point of one to be copied into the other.
_TRAITS = frozenset({"size", "distance", "datatype", "multivector_config", "modifier"})


def _vector_traits(layout: Mapping[str, Any]) -> dict[str, Any]:
    """A vector layout (``ChunkIndex.vector_layout``) as dotted keys, keeping the vector names
    and what a copy depends on (``_TRAITS``); tuning (HNSW, on-disk) is left out."""
    traits: dict[str, Any] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            if not value:
                traits[path or "vectors"] = "none"
            for key, item in value.items():
                name = str(key) or "(unnamed)"
                if key in _TRAITS:
                    traits[f"{path}.{key}" if path else str(key)] = item
                elif isinstance(item, Mapping):
                    walk(item, f"{path}.{name}" if path else name)
        elif value is None and path:
            traits[path] = "none"

    walk(layout, "")
    return traits


def _name(part: ChunkIndex) -> str:
    """A part's collection name (an Edge shard's folder name)."""
    return str(getattr(part, "collection", None) or part)
