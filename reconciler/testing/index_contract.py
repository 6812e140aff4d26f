"""The contract every ``ChunkIndex`` adapter honours (``TestChunkIndexContract``), over every
payload key layout, seen through the port and through the raw access a ``Harness`` gives.

An adapter's test module imports the suites (this one and ``points_contract``'s), the kit's
``layout`` and ``seeded`` fixtures and its ``pytest_generate_tests`` hook
(``reconciler.testing.index_kit``), and provides a ``harness`` fixture that yields a
``Harness`` over an empty collection of the adapter for the ``layout`` it is given
(``tests/integration/test_chunk_index_contract.py`` does so for the fake, qdrant-client local
mode and Qdrant Edge).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from reconciler.errors import IndexUnavailable, IndexWriteError
from reconciler.model import (
    ALL_KEYS,
    MANAGED_KEYS,
    PLACEMENT_KEYS,
    ChunkRecord,
    PayloadWrite,
)
from reconciler.payload import chunk_payload
from reconciler.ports.index import ABSENT, StoredPoint
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.testing.index_kit import (
    CHUNKS,
    DIM,
    DOCS,
    Harness,
    Seeded,
    _rows,
    _strip_managed,
    _unit,
    document,
    physical_payload,
    point_id,
    snapshot,
)


class TestChunkIndexContract:
    def test_exists_only_after_ensure_collection(self, harness: Harness) -> None:
        assert harness.index.exists() is False
        harness.index.ready_reads()  # (nothing to make ready: no error)
        with pytest.raises(IndexUnavailable):
            list(harness.index.scroll())
        with pytest.raises(IndexUnavailable):
            list(harness.index.scan_vectors())
        harness.index.ensure_collection(dim=DIM)
        harness.index.ensure_collection(dim=DIM)
        assert harness.index.exists() is True
        assert harness.index.count() == 0

    def test_scroll_returns_every_point_once_with_logical_keys_only(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        states = list(harness.index.scroll(batch_size=5))

        assert sorted(str(s.point_id) for s in states) == sorted(seeded.logical)
        for state in states:
            expected = seeded.logical[str(state.point_id)]
            assert dict(state.payload) == expected
            assert set(state.payload) <= set(ALL_KEYS)
            assert state.doc_id == expected["doc_id"]
            assert state.chunk_id == expected["chunk_id"]
            assert not {"source_url", "page", "source", harness.layout.text_key} & set(
                state.payload
            )

    def test_scroll_by_doc_ids(self, harness: Harness, seeded: Seeded) -> None:
        wanted = ["handbook:doc-0", "handbook:doc-2"]

        states = list(harness.index.scroll(batch_size=3, doc_ids=wanted))

        assert sorted(str(s.point_id) for s in states) == sorted(
            seeded.by_doc[wanted[0]] + seeded.by_doc[wanted[1]]
        )
        assert {s.doc_id for s in states} == set(wanted)
        assert list(harness.index.scroll(doc_ids=[])) == []
        assert list(harness.index.scroll(doc_ids=["handbook:nope"])) == []

    def test_reads_by_document_once_made_ready_see_the_writes_since(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        wanted = ["handbook:doc-1", "handbook:doc-2"]
        ids = seeded.by_doc[wanted[0]] + seeded.by_doc[wanted[1]]
        harness.index.ready_reads()
        harness.index.ready_reads()  # (again: nothing changes)
        before = sorted(str(s.point_id) for s in harness.index.scroll(doc_ids=wanted))
        moved = harness.index.read_points(seeded.by_doc["handbook:doc-0"][:1])
        harness.index.copy_points(
            [
                StoredPoint(p.point_id, p.vector, _of_doc(harness, p.payload, wanted[1]))
                for p in moved
            ]
        )
        harness.index.delete_points(ids[:1])

        after = sorted(str(s.point_id) for s in harness.index.scroll(batch_size=2, doc_ids=wanted))

        assert before == sorted(ids)
        assert after == sorted([*ids[1:], str(moved[0].point_id)])
        assert str(moved[0].point_id) not in {
            str(s.point_id) for s in harness.index.scroll(doc_ids=["handbook:doc-0"])
        }

    def test_a_doc_id_filter_selects_the_chunks_whose_doc_id_is_one_of_the_texts(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        # Qdrant's keyword filter also matches an array holding one of the ids; no document
        # owns such a chunk (the check reports it as an orphan), so no read under it returns it.
        wanted = ["handbook:doc-0"]
        held = harness.index.read_points(seeded.by_doc["handbook:doc-1"][:1])
        odd = [StoredPoint(p.point_id, p.vector, _of_doc(harness, p.payload, wanted)) for p in held]  # type: ignore[arg-type]
        harness.index.copy_points(odd)
        mine = sorted(seeded.by_doc[wanted[0]])

        assert sorted(str(s.point_id) for s in harness.index.scroll(doc_ids=wanted)) == mine
        rows = list(_rows(harness.index.scan_managed(doc_ids=wanted)))
        assert sorted(str(r[0]) for r in rows) == mine
        assert {r[1] for r in rows} == set(wanted)
        points = [p for page in harness.index.scan_points(doc_ids=wanted) for p in page.points]
        assert sorted(str(p.point_id) for p in points) == mine
        # (nor does re-ingestion's delete take it)
        assert harness.index.delete_document_chunks(wanted[0]) == len(mine)
        assert harness.index.read_points([odd[0].point_id]) != []

    def test_scan_managed_yields_raw_managed_values_in_scroll_order(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        pages = list(harness.index.scan_managed(batch_size=5))
        rows = [row for page in pages for row in page.chunks()]

        assert all(0 < len(page) <= 5 for page in pages)
        assert [pid for pid, _doc, _values in rows] == [
            s.point_id for s in harness.index.scroll(batch_size=5)
        ]
        for pid, doc_id, values in rows:
            expected = seeded.logical[str(pid)]
            assert doc_id == expected["doc_id"]
            # MANAGED_KEYS order, an absent key (superseded_by, quarantine_reason) as None.
            assert values == tuple(expected.get(key) for key in MANAGED_KEYS)
            assert isinstance(values, tuple)

    def test_a_placement_scan_reads_doc_id_and_family_only_in_scroll_order(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        stray = str(uuid.uuid5(uuid.NAMESPACE_URL, "stray"))
        harness.put(stray, [0.0, 0.0, 1.0, 0.0], {harness.layout.text_key: "no metadata"})
        full = list(harness.index.scan_managed(batch_size=5))
        pages = list(harness.index.scan_managed(batch_size=5, placement=True))

        assert [len(page) for page in pages] == [len(page) for page in full]
        assert all(page.contents is None for page in pages)  # (no content hash read)
        whole = [row for page in full for row in page.chunks()]
        for (pid, doc_id, values), (same_pid, same_doc, read) in zip(
            (row for page in pages for row in page.chunks()), whole, strict=True
        ):
            assert (pid, doc_id) == (same_pid, same_doc)
            # doc_family_id as stored; every other managed value read as absent
            assert values == tuple(
                value if key in PLACEMENT_KEYS else None
                for key, value in zip(MANAGED_KEYS, read, strict=True)
            )
        wanted = ["handbook:doc-1"]
        by_doc = list(_rows(harness.index.scan_managed(doc_ids=wanted, placement=True)))
        assert sorted(str(pid) for pid, _d, _v in by_doc) == sorted(seeded.by_doc[wanted[0]])

    def test_scan_vectors_reads_every_chunks_vector_once_with_its_doc_id(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        pages = list(harness.index.scan_vectors(batch_size=5))

        assert [len(page) for page in pages] == [5, 5, 2]
        assert all(page.skipped == 0 for page in pages)
        doc_ids = [doc_id for page in pages for doc_id in page.doc_ids]
        vectors = [list(v) for page in pages for v in page.vectors]
        # in scroll order, so chunk i of the scan is point i of the scroll
        order = [str(s.point_id) for s in harness.index.scroll(batch_size=5)]
        assert doc_ids == [seeded.logical[pid]["doc_id"] for pid in order]
        for pid, vector in zip(order, vectors, strict=True):
            # a cosine collection keeps the direction (Qdrant stores it normalised)
            assert _unit(vector) == pytest.approx(_unit(harness.raw(pid)[0]), abs=1e-6)
            assert len(vector) == DIM
        assert list(harness.index.scroll()) == list(harness.index.scroll())  # nothing written

    def test_scan_vectors_counts_the_points_it_leaves_out(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        stray = str(uuid.uuid5(uuid.NAMESPACE_URL, "stray"))
        harness.put(stray, [0.0, 0.0, 1.0, 0.0], {harness.layout.text_key: "no metadata"})
        numbered = str(uuid.uuid5(uuid.NAMESPACE_URL, "numbered"))
        harness.put(numbered, [0.0, 1.0, 0.0, 0.0], harness.layout.keys.to_point({"doc_id": 7}))

        pages = list(harness.index.scan_vectors(batch_size=4))

        assert sum(page.skipped for page in pages) == 2
        assert sum(len(page) for page in pages) == DOCS * CHUNKS
        assert sorted({d for page in pages for d in page.doc_ids}) == sorted(seeded.by_doc)

    def test_scan_managed_returns_stored_values_unnormalised(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        pid = seeded.by_doc["handbook:doc-1"][0]
        odd = {
            **seeded.logical[pid],
            "doc_version": 1.0,
            "effective_from": "2024-01-02T00:00:00+00:00",
            "quarantined": 0,
        }
        del odd["doc_class"]
        harness.put(pid, [1.0, 1.0, 0.5, 0.25], physical_payload(harness.layout, odd, 0))

        (row,) = [r for r in _rows(harness.index.scan_managed()) if str(r[0]) == pid]

        values = dict(zip(MANAGED_KEYS, row[2], strict=True))
        assert values["doc_version"] == 1.0
        assert isinstance(values["doc_version"], float)
        assert values["effective_from"] == "2024-01-02T00:00:00+00:00"
        assert values["quarantined"] == 0
        assert not isinstance(values["quarantined"], bool)
        assert values["doc_class"] is None

    def test_scan_managed_by_doc_ids(self, harness: Harness, seeded: Seeded) -> None:
        wanted = ["handbook:doc-0", "handbook:doc-2"]

        rows = list(_rows(harness.index.scan_managed(batch_size=3, doc_ids=wanted)))

        assert sorted(str(pid) for pid, _d, _v in rows) == sorted(
            seeded.by_doc[wanted[0]] + seeded.by_doc[wanted[1]]
        )
        assert {doc for _p, doc, _v in rows} == set(wanted)
        assert list(harness.index.scan_managed(doc_ids=[])) == []
        assert list(harness.index.scan_managed(doc_ids=["handbook:nope"])) == []

    def test_doc_ids_in_filters_of_a_few_ids_each_select_each_point_once(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        # Engines with a payload index select documents' points a few doc ids per filter
        # (``doc_filter_batch``); the fake and local mode take them all at once.
        if hasattr(harness.index, "doc_filter_batch"):
            harness.index.doc_filter_batch = 2
        # (doc-1 twice: sorted without its duplicate dropped, it would span two batches)
        wanted = [f"handbook:doc-{n}" for n in range(DOCS)] + ["handbook:nope", "handbook:doc-1"]
        expected = sorted(pid for pids in seeded.by_doc.values() for pid in pids)

        states = list(harness.index.scroll(batch_size=2, doc_ids=wanted))
        rows = list(_rows(harness.index.scan_managed(batch_size=2, doc_ids=wanted)))

        assert sorted(str(s.point_id) for s in states) == expected
        assert sorted(str(pid) for pid, _d, _v in rows) == expected
        for pid, doc_id, _values in rows:
            assert doc_id == seeded.logical[str(pid)]["doc_id"]

    def test_scan_managed_of_a_point_without_the_keys(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        stray = str(uuid.uuid5(uuid.NAMESPACE_URL, "stray"))
        harness.put(stray, [0.0, 0.0, 1.0, 0.0], {harness.layout.text_key: "no metadata"})

        (row,) = [r for r in _rows(harness.index.scan_managed()) if str(r[0]) == stray]

        assert row[1:] == (None, (None,) * len(MANAGED_KEYS))

    def test_retrieve_managed_reads_raw_values_by_id_an_absent_key_apart_from_a_null(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        pid, other = seeded.by_doc["handbook:doc-1"][:2]
        odd = {**seeded.logical[pid], "doc_version": 1.0, "quarantined": 0}
        odd["superseded_by"] = None  # stored as null
        del odd["doc_class"]  # absent
        physical = physical_payload(harness.layout, odd, 0)
        harness.put(pid, [1.0, 1.0, 0.5, 0.25], physical)
        gone = str(uuid.uuid5(uuid.NAMESPACE_URL, "gone"))

        page = harness.index.retrieve_managed([gone, pid, other])

        found = {str(page.point_id(at)): row for at, row in enumerate(page.rows)}
        assert sorted(found) == sorted([pid, other])
        by_state = {str(s.point_id): s for s in harness.index.retrieve([pid, other])}
        for point, row in found.items():
            state = by_state[point]
            assert row[0] == state.doc_id
            assert row[1:] == tuple(state.payload.get(key, ABSENT) for key in MANAGED_KEYS)
        values = dict(zip(MANAGED_KEYS, found[pid][1:], strict=True))
        assert (type(values["doc_version"]), type(values["quarantined"])) == (float, int)
        assert values["doc_class"] is ABSENT
        assert values["superseded_by"] is None
        assert found[other][1 + MANAGED_KEYS.index("superseded_by")] is ABSENT  # (never stored)
        assert len(harness.index.retrieve_managed([])) == 0

    def test_set_payloads_changes_only_managed_keys_on_the_given_ids(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        target = seeded.by_doc["handbook:doc-1"]
        others = [pid for pid in seeded.logical if pid not in target]
        before = snapshot(harness, list(seeded.logical))
        change = {
            "version_state": "superseded",
            "superseded_by": "handbook:doc-9",
            "effective_to": "2025-03-01T00:00:00Z",
            "quarantined": True,
            "quarantine_reason": "in_place_edit",
        }

        written = harness.index.set_payloads(
            [PayloadWrite(point_ids=tuple(target), payload=change, doc_id="handbook:doc-1")]
        )

        assert written == len(target)
        after = snapshot(harness, list(seeded.logical))
        for pid in others:
            assert after[pid] == before[pid]
        keys = harness.layout.keys
        for pid in target:
            vector, payload = after[pid]
            old_vector, old_payload = before[pid]
            assert vector == old_vector
            assert keys.from_point(payload) == {**seeded.logical[pid], **change}
            # everything that is not a managed key stays exactly as it was
            assert _strip_managed(payload, keys) == _strip_managed(old_payload, keys)
        scanned = {str(s.point_id): dict(s.payload) for s in harness.index.scroll()}
        assert scanned[target[0]]["version_state"] == "superseded"
        assert scanned[others[0]] == seeded.logical[others[0]]

    def test_set_payloads_null_removes_the_key(self, harness: Harness, seeded: Seeded) -> None:
        target = seeded.by_doc["handbook:doc-0"]
        harness.index.set_payloads(
            [PayloadWrite(point_ids=tuple(target), payload={"superseded_by": "handbook:doc-1"})]
        )
        harness.index.set_payloads(
            [PayloadWrite(point_ids=tuple(target), payload={"superseded_by": None})]
        )

        scanned = {str(s.point_id): dict(s.payload) for s in harness.index.scroll()}
        assert "superseded_by" not in scanned[target[0]]
        assert scanned[target[0]]["version_state"] == "current"

    def test_set_payloads_batches_across_calls(self, harness: Harness, seeded: Seeded) -> None:
        writes = [
            PayloadWrite(point_ids=tuple(ids), payload={"doc_version": 2}, doc_id=doc_id)
            for doc_id, ids in seeded.by_doc.items()
        ]
        before = harness.update_calls()

        written = harness.index.set_payloads(writes, batch_size=5)

        assert written == DOCS * CHUNKS
        assert harness.update_calls() - before == 3  # 5 + 5 + 2 points
        assert all(s.payload["doc_version"] == 2 for s in harness.index.scroll())

    def test_a_write_larger_than_the_batch_is_split_by_ids(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        before = harness.update_calls()

        written = harness.index.set_payloads(
            [PayloadWrite(point_ids=tuple(seeded.logical), payload={"doc_class": "manual"})],
            batch_size=4,
        )

        assert written == DOCS * CHUNKS
        assert harness.update_calls() - before == 3
        assert harness.index.facet(key="doc_class") == {"manual": DOCS * CHUNKS}

    def test_empty_writes_make_no_call(self, harness: Harness, seeded: Seeded) -> None:
        before = harness.update_calls()

        written = harness.index.set_payloads(
            [PayloadWrite(point_ids=(), payload={"doc_version": 3})]
        )

        assert written == 0
        assert harness.update_calls() == before

    def test_missing_point_fails_with_points_written(
        self, harness: Harness, seeded: Seeded
    ) -> None:
        ids = seeded.by_doc["handbook:doc-0"]
        missing = str(uuid.uuid5(uuid.NAMESPACE_URL, "never-ingested"))
        writes = [
            PayloadWrite(point_ids=tuple(ids[:2]), payload={"quarantined": True}),
            PayloadWrite(point_ids=(ids[2], missing), payload={"quarantined": True}),
        ]

        with pytest.raises(IndexWriteError) as caught:
            harness.index.set_payloads(writes, batch_size=2)

        assert caught.value.points_written == 2
        assert missing in str(caught.value)

    def test_count_and_facet(self, harness: Harness, seeded: Seeded) -> None:
        harness.index.set_payloads(
            [
                PayloadWrite(
                    point_ids=tuple(seeded.by_doc["handbook:doc-2"]),
                    payload={"version_state": "retired", "quarantined": True},
                )
            ]
        )

        assert harness.index.count() == DOCS * CHUNKS
        assert harness.index.facet(key="version_state") == {
            "current": (DOCS - 1) * CHUNKS,
            "retired": CHUNKS,
        }
        assert harness.index.facet(key="quarantined") == {
            False: (DOCS - 1) * CHUNKS,
            True: CHUNKS,
        }
        assert harness.index.facet(key="doc_version") == {1: DOCS * CHUNKS}
        assert len(harness.index.facet(key="doc_family_id", limit=2)) == 2

    def test_payload_index_creation(self, harness: Harness, seeded: Seeded) -> None:
        harness.index.create_payload_index(key="version_state", schema="keyword")
        harness.index.create_payload_index(key="effective_from", schema="datetime")

        expected = {"version_state": "keyword", "effective_from": "datetime"}
        if harness.index.supports_payload_indexes:
            assert dict(harness.index.payload_indexes()) == expected
        else:
            assert isinstance(harness.index, QdrantChunkIndex)
            assert dict(harness.index.payload_indexes()) == {}
        with pytest.raises(ValueError, match="schema"):
            harness.index.create_payload_index(key="version_state", schema="geo")
        with pytest.raises(ValueError, match="key"):
            harness.index.create_payload_index(key="colour", schema="keyword")

    def test_delete_document_chunks(self, harness: Harness, seeded: Seeded) -> None:
        deleted = harness.index.delete_document_chunks("handbook:doc-1")

        assert deleted == CHUNKS
        assert harness.index.count() == (DOCS - 1) * CHUNKS
        assert "handbook:doc-1" not in {s.doc_id for s in harness.index.scroll()}
        assert harness.index.delete_document_chunks("handbook:doc-1") == 0

    def test_upsert_chunks_writes_the_layout(self, harness: Harness) -> None:
        harness.index.ensure_collection(dim=DIM)
        doc = document(7)
        records = [
            ChunkRecord(
                point_id=point_id(doc.doc_id, n),
                chunk_id=f"{doc.doc_id}#{n}",
                text=f"text {n}",
                vector=(1.0, float(n), 0.0, 0.5),
                payload=chunk_payload(doc, chunk_id=f"{doc.doc_id}#{n}"),
            )
            for n in range(300)
        ]

        assert harness.index.upsert_chunks(iter(records)) == 300

        assert harness.index.count() == 300
        _, payload = harness.raw(records[5].point_id)
        keys = harness.layout.keys
        assert payload[harness.layout.text_key] == "text 5"
        assert payload == {
            **keys.to_point(records[5].payload),
            harness.layout.text_key: "text 5",
        }
        assert keys.from_point(payload) == dict(records[5].payload)
        assert {s.chunk_id for s in harness.index.scroll(doc_ids=[doc.doc_id])} == {
            r.chunk_id for r in records
        }


def _of_doc(harness: Harness, payload: Mapping[str, Any], doc_id: str) -> dict[str, Any]:
    """A stored payload made one of ``doc_id``'s chunks (in the harness's key layout)."""
    keys = harness.layout.keys
    return {**payload, **keys.to_point({**keys.from_point(payload), "doc_id": doc_id})}
