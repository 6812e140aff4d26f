"""The chunk index's contract for a split store's moves (``TestWholePoints``: whole points
read, a collection made with another's layout, copies written as they are, points deleted by
id) and for ``SplitChunkIndex`` over two collections of an adapter (``TestSplitStore``). Run
beside ``index_contract``'s suite, over the same ``harness`` fixture."""

from __future__ import annotations

import dataclasses
import uuid

from reconciler.model import (
    ChunkRecord,
    PayloadWrite,
    VersionState,
)
from reconciler.payload import chunk_payload
from reconciler.ports.index import StoredPoint
from reconciler.stores.split import SplitChunkIndex
from reconciler.testing.index_kit import (
    CHUNKS,
    DOCS,
    Harness,
    Seeded,
    _f32,
    document,
    point_id,
)
from reconciler.writing.moving import same_point


class TestWholePoints:
    """The port's methods for a split store's moves: whole points read, a collection made
    with another's layout, copies written as they are, points deleted by id."""

    def test_read_points_returns_whole_points_and_leaves_missing_ids_out(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        ids = seeded.by_doc["handbook:doc-1"]
        missing = str(uuid.uuid5(uuid.NAMESPACE_URL, "nowhere"))

        points = harness.index.read_points([*ids, missing])

        assert sorted(str(p.point_id) for p in points) == sorted(ids)
        for point in points:
            vector, payload = harness.raw(str(point.point_id))
            assert dict(point.payload) == payload  # text and foreign keys too
            assert list(point.vector) == vector
        assert harness.index.read_points([]) == []

    def test_scan_points_reads_whole_points_in_scroll_order_a_page_at_a_time(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        order = [str(s.point_id) for s in harness.index.scroll(batch_size=4)]

        pages = list(harness.index.scan_points(batch_size=4))

        assert all(0 < len(page) <= 4 for page in pages)
        points = [point for page in pages for point in page.points]
        assert [str(p.point_id) for p in points] == order
        owners = [doc_id for page in pages for doc_id in page.doc_ids]
        assert owners == [seeded.logical[str(p.point_id)]["doc_id"] for p in points]
        for point in points:
            vector, payload = harness.raw(str(point.point_id))
            assert dict(point.payload) == payload  # text and foreign keys too
            assert list(point.vector) == vector
        chosen = ["handbook:doc-2", "handbook:doc-0"]
        some = list(harness.index.scan_points(batch_size=3, doc_ids=chosen))
        assert sorted(str(p.point_id) for page in some for p in page.points) == sorted(
            pid for doc_id in chosen for pid in seeded.by_doc[doc_id]
        )
        assert {d for page in some for d in page.doc_ids} == set(chosen)
        assert list(harness.index.scan_points(doc_ids=["handbook:nobody"])) == []

    def test_a_collection_made_with_the_layout_holds_the_copies_as_they_were(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        other = harness.sibling()
        indexes = {"doc_id": "keyword", "version_state": "keyword"}
        assert not other.exists()

        other.ensure_layout(harness.index.vector_layout(), indexes=indexes)
        other.ensure_layout(harness.index.vector_layout(), indexes=indexes)  # exists: kept
        points = harness.index.read_points(list(seeded.logical))
        assert other.copy_points(points) == len(points) == DOCS * CHUNKS

        assert other.count() == DOCS * CHUNKS
        if other.supports_payload_indexes:
            assert other.payload_indexes() == indexes
        copied = {str(p.point_id): p for p in other.read_points(list(seeded.logical))}
        for point in points:
            copy = copied[str(point.point_id)]
            assert copy.payload == point.payload
            assert same_point(point, copy)
            if not harness.renormalises:
                assert _f32(copy.vector) == _f32(point.vector)  # byte for byte
        assert harness.index.count() == DOCS * CHUNKS  # a copy leaves the source as it is

    def test_a_copy_replaces_a_point_and_a_delete_takes_only_what_it_names(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        ids = seeded.by_doc["handbook:doc-0"]
        (point,) = harness.index.read_points(ids[:1])
        changed = StoredPoint(point.point_id, point.vector, {**point.payload, "extra": 1})

        assert harness.index.copy_points([changed]) == 1
        assert harness.index.read_points(ids[:1])[0].payload == changed.payload
        missing = str(uuid.uuid5(uuid.NAMESPACE_URL, "nowhere"))
        harness.index.delete_points([*ids[:2], missing])

        assert harness.index.count() == DOCS * CHUNKS - 2
        assert harness.index.read_points(ids) == harness.index.read_points(ids[2:])
        assert len(harness.index.read_points(ids[2:])) == CHUNKS - 2
        assert harness.index.delete_points([]) == 0

    def test_read_back_answers_each_point_in_order_and_none_where_it_is_not_held(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        """The confirm of a copy: one answer a point asked, in the order asked, whether the
        points came from a read (their engine's own ids kept) or were made anew (none)."""
        other = harness.sibling()
        other.ensure_layout(harness.index.vector_layout())
        read = [p for page in harness.index.scan_points(batch_size=4) for p in page.points]
        read.reverse()  # (not the order the engine keeps them in)
        held, away = read[: len(read) // 2], read[len(read) // 2 :]
        other.copy_points(held)
        made = [StoredPoint(p.point_id, p.vector, dict(p.payload)) for p in read]  # no native

        for asked in (read, made, made[::3], away, []):
            back = other.read_back(asked)
            assert len(back) == len(asked)
            present = {str(p.point_id) for p in held}
            for point, copy in zip(asked, back, strict=True):
                if str(point.point_id) in present:
                    assert copy is not None
                    assert same_point(point, copy)
                else:
                    assert copy is None
        changed = dataclasses.replace(held[0], payload={**held[0].payload, "extra": 1})
        (copy,) = other.read_back([changed])
        assert copy is not None
        assert not same_point(changed, copy)

    def test_delete_stored_deletes_the_points_read_and_nothing_else(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        ids = seeded.by_doc["handbook:doc-0"]
        (page,) = list(harness.index.scan_points(doc_ids=["handbook:doc-0"]))
        made = StoredPoint(ids[-1], [], {})  # (made anew: no native id)

        assert harness.index.delete_stored([*page.points[:2], made]) == 3
        assert harness.index.delete_stored([]) == 0

        gone = {str(p.point_id) for p in page.points[:2]} | {str(ids[-1])}
        assert harness.index.count() == DOCS * CHUNKS - len(gone)
        left = {str(p.point_id) for p in harness.index.read_points(list(seeded.logical))}
        assert left == set(seeded.logical) - gone


class TestSplitStore:
    """``SplitChunkIndex`` over two collections of each adapter: reads see both, a payload
    write goes where its point is, the ingestion writes where the payload puts a chunk."""

    @staticmethod
    def archived(harness: Harness, seeded: Seeded, doc_id: str) -> SplitChunkIndex:
        """A split store whose archive holds ``doc_id``'s points (moved by hand)."""
        split = SplitChunkIndex(harness.index, harness.sibling())
        split.archive.ensure_layout(harness.index.vector_layout())
        ids = seeded.by_doc[doc_id]
        split.archive.copy_points(harness.index.read_points(ids))
        harness.index.delete_points(ids)
        return split

    def test_reads_see_both_collections_and_the_scan_flags_the_archive(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        split = self.archived(harness, seeded, "handbook:doc-1")
        every = sorted(seeded.logical)
        split.ready_reads()

        assert sorted(str(s.point_id) for s in split.scroll(batch_size=5)) == every
        wanted = ["handbook:doc-1", "handbook:doc-2"]
        assert sorted(
            str(s.point_id) for s in split.scroll(batch_size=3, doc_ids=wanted)
        ) == sorted(seeded.by_doc[wanted[0]] + seeded.by_doc[wanted[1]])
        pages = list(split.scan_managed(batch_size=5))
        archived = {row[1] for page in pages if page.archived for row in page.chunks()}
        main = {row[1] for page in pages if not page.archived for row in page.chunks()}
        assert (archived, main) == ({"handbook:doc-1"}, {"handbook:doc-0", "handbook:doc-2"})
        assert sorted(str(s.point_id) for s in split.retrieve(every)) == every
        page = split.retrieve_managed(every)
        assert sorted(str(page.point_id(at)) for at in range(len(page))) == every
        assert sorted(row[0] for row in page.rows) == sorted(
            doc for doc, ids in seeded.by_doc.items() for _ in ids
        )
        assert sorted(str(p.point_id) for p in split.read_points(every)) == every
        scanned = [p for page in split.scan_points(batch_size=5) for p in page.points]
        assert sorted(str(p.point_id) for p in scanned) == every
        assert {str(p.point_id) for p in scanned[-CHUNKS:]} == set(seeded.by_doc["handbook:doc-1"])
        assert split.count() == DOCS * CHUNKS
        assert split.facet(key="version_state") == {"current": DOCS * CHUNKS}
        assert split.collections[1] == "other"
        vectors = list(split.scan_vectors(batch_size=5))
        assert sorted(d for page in vectors for d in page.doc_ids) == sorted(
            doc for doc, ids in seeded.by_doc.items() for _ in ids
        )
        assert vectors[-1].doc_ids == ["handbook:doc-1"] * CHUNKS  # the archive's, last

    def test_a_payload_write_goes_to_the_collection_that_holds_the_point(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        split = self.archived(harness, seeded, "handbook:doc-1")
        every = sorted(seeded.logical)

        written = split.set_payloads([PayloadWrite(tuple(every), {"doc_class": "memo"})])

        assert written == DOCS * CHUNKS
        assert {s.payload["doc_class"] for s in split.retrieve(every)} == {"memo"}
        assert split.archive.count() == CHUNKS
        assert harness.index.count() == (DOCS - 1) * CHUNKS

    def test_the_ingestion_writes_a_chunk_where_its_payload_puts_it(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        split = SplitChunkIndex(harness.index, harness.sibling())
        old = dataclasses.replace(
            document(8), version_state=VersionState.SUPERSEDED, superseded_by="handbook:doc-9"
        )
        new = document(9)
        records = [
            ChunkRecord(
                point_id=point_id(doc.doc_id, 0),
                chunk_id=f"{doc.doc_id}#0",
                text="text",
                vector=(1.0, 0.5, 0.25, 0.125),
                payload=chunk_payload(doc, chunk_id=f"{doc.doc_id}#0"),
            )
            for doc in (old, new)
        ]

        assert split.upsert_chunks(records) == 2

        assert [s.doc_id for s in split.archive.scroll()] == [old.doc_id]
        assert new.doc_id in {s.doc_id for s in harness.index.scroll()}
        assert split.delete_document_chunks(old.doc_id) == 1
        assert split.archive.count() == 0

    def test_payload_indexes_are_those_both_collections_have(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        harness.index.create_payload_index(key="doc_id", schema="keyword")
        split = self.archived(harness, seeded, "handbook:doc-1")
        assert split.payload_indexes() == {}  # the archive has none yet

        split.create_payload_index(key="doc_id", schema="keyword")

        # (qdrant-client local mode keeps no payload index at all)
        expected = {"doc_id": "keyword"} if harness.index.supports_payload_indexes else {}
        assert split.payload_indexes() == expected
        assert split.archive.payload_indexes() == expected
