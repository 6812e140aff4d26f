"""One contract suite for every ChunkIndex adapter, over every payload key layout.

The same assertions run against the dict-backed fake, real qdrant-client local mode and a real
Qdrant Edge shard, with top-level keys, LangChain's ``metadata.`` prefix, renames, and a two-level prefix with renames.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe
from qdrant_client import QdrantClient, models

from reconciler.errors import IndexUnavailable, IndexWriteError
from reconciler.model import (
    ALL_KEYS,
    MANAGED_KEYS,
    ChunkRecord,
    Document,
    ManagedPage,
    ManagedRow,
    PayloadWrite,
    VersionState,
)
from reconciler.payload import KeyMap, chunk_payload
from reconciler.ports.index import ABSENT, StoredPoint
from reconciler.stores.edge import EdgeChunkIndex
from reconciler.stores.memory import InMemoryChunkIndex
from reconciler.stores.qdrant import QdrantChunkIndex
from reconciler.stores.split import SplitChunkIndex
from reconciler.writing.moving import same_point

DIM = 4
DOCS = 3
CHUNKS = 4


@dataclass(frozen=True)
class Layout:
    keys: KeyMap
    text_key: str


LAYOUTS = {
    "default": Layout(KeyMap(), "text"),
    "langchain": Layout(KeyMap(prefix="metadata."), "page_content"),
    "renamed": Layout(KeyMap(renames={"version_state": "status", "doc_id": "document"}), "text"),
    "two-level": Layout(
        KeyMap(prefix="a.b.", renames={"version_state": "status", "quarantined": "hidden"}),
        "body",
    ),
}


class CountingClient:
    """Forwards to a real QdrantClient and counts the calls the contract cares about."""

    def __init__(self, client: QdrantClient) -> None:
        self._client = client
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attribute(*args, **kwargs)

        return counted


@dataclass
class Harness:
    """An adapter plus the raw access a contract test needs to check what it left alone."""

    index: Any
    layout: Layout
    raw: Callable[[str], tuple[list[float], dict[str, Any]]]
    put: Callable[[str, list[float], dict[str, Any]], None]
    update_calls: Callable[[], int]
    #: Another (not yet created) collection of the same adapter and layout: a split store's
    #: archive beside ``index``.
    sibling: Callable[[], Any] = lambda: None
    #: Whether the engine normalises a cosine vector again as it stores it (qdrant-client
    #: local mode, in memory: what it persists is the vector as handed).
    renormalises: bool = False


def _memory(layout: Layout, tmp_path: Path) -> Iterator[Harness]:
    index = InMemoryChunkIndex(keys=layout.keys, text_key=layout.text_key)

    def raw(point_id: str) -> tuple[list[float], dict[str, Any]]:
        vector, payload = index.point(point_id)
        return list(vector), payload

    def put(point_id: str, vector: list[float], payload: dict[str, Any]) -> None:
        index.put_point(point_id, vector=vector, payload=payload)

    def sibling() -> InMemoryChunkIndex:
        return InMemoryChunkIndex(keys=layout.keys, text_key=layout.text_key, collection="other")

    yield Harness(index, layout, raw, put, lambda: index.update_calls, sibling)


def _qdrant(layout: Layout, tmp_path: Path) -> Iterator[Harness]:
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    counting = CountingClient(client)
    index = QdrantChunkIndex(
        counting,  # type: ignore[arg-type]
        collection="chunks",
        keys=layout.keys,
        text_key=layout.text_key,
    )

    def raw(point_id: str) -> tuple[list[float], dict[str, Any]]:
        (record,) = client.retrieve("chunks", [point_id], with_payload=True, with_vectors=True)
        vector = record.vector
        assert isinstance(vector, list)
        return [float(v) for v in vector if isinstance(v, float | int)], dict(record.payload or {})

    def put(point_id: str, vector: list[float], payload: dict[str, Any]) -> None:
        client.upsert(
            "chunks", points=[models.PointStruct(id=point_id, vector=vector, payload=payload)]
        )

    def sibling() -> QdrantChunkIndex:
        return QdrantChunkIndex(
            client, collection="other", keys=layout.keys, text_key=layout.text_key
        )

    try:
        yield Harness(
            index,
            layout,
            raw,
            put,
            lambda: counting.calls["batch_update_points"],
            sibling,
            renormalises=True,
        )
    finally:
        client.close()


def _edge(layout: Layout, tmp_path: Path) -> Iterator[Harness]:
    index = EdgeChunkIndex(tmp_path / "edge" / "chunks", keys=layout.keys, text_key=layout.text_key)

    def raw(point_id: str) -> tuple[list[float], dict[str, Any]]:
        (record,) = index.shard.retrieve([point_id], True, True)
        vector = record.vector
        assert isinstance(vector, list)
        return [float(v) for v in vector if isinstance(v, float | int)], dict(record.payload or {})

    def put(point_id: str, vector: list[float], payload: dict[str, Any]) -> None:
        index.shard.update(qe.UpdateOperation.upsert_points([qe.Point(point_id, vector, payload)]))

    opened: list[EdgeChunkIndex] = []

    def sibling() -> EdgeChunkIndex:
        other = EdgeChunkIndex(tmp_path / "edge" / "other", keys=layout.keys)
        opened.append(other)
        return other

    try:
        yield Harness(index, layout, raw, put, lambda: index.update_calls, sibling)
    finally:
        index.close()
        for other in opened:
            other.close()


ADAPTERS = {"memory": _memory, "qdrant-local": _qdrant, "edge": _edge}


#: The tests that read or write through the key layout (the physical keys a payload has): run
#: on every layout. The others run on the default one: the layout is the ``KeyMap``'s, which
#: these tests and ``tests/unit`` hold on its own.
ON_EVERY_LAYOUT = frozenset(
    {
        "test_scroll_returns_every_point_once_with_logical_keys_only",
        "test_scan_vectors_counts_the_points_it_leaves_out",
        "test_scan_managed_returns_stored_values_unnormalised",
        "test_scan_managed_of_a_point_without_the_keys",
        "test_retrieve_managed_reads_raw_values_by_id_an_absent_key_apart_from_a_null",
        "test_set_payloads_changes_only_managed_keys_on_the_given_ids",
        "test_upsert_chunks_writes_the_layout",
        "test_a_collection_made_with_the_layout_holds_the_copies_as_they_were",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "layout" in metafunc.fixturenames:
        names = list(LAYOUTS) if metafunc.function.__name__ in ON_EVERY_LAYOUT else ["default"]
        metafunc.parametrize("layout", names, ids=names, indirect=True)


@pytest.fixture
def layout(request: pytest.FixtureRequest) -> Layout:
    return LAYOUTS[request.param]


@pytest.fixture(params=list(ADAPTERS), ids=list(ADAPTERS))
def harness(request: pytest.FixtureRequest, layout: Layout, tmp_path: Path) -> Iterator[Harness]:
    yield from ADAPTERS[request.param](layout, tmp_path)


def document(number: int) -> Document:
    return Document(
        doc_id=f"handbook:doc-{number}",
        source="handbook",
        source_key=f"doc-{number}.md",
        doc_family_id=f"family-{number}",
        doc_version=1,
        version_state=VersionState.CURRENT,
        effective_from=datetime(2024, 1, number + 1, tzinfo=UTC),
        doc_class="policy",
        source_hash=f"sha256:{number:064x}",
    )


def point_id(doc_id: str, chunk: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc_id}#{chunk}"))


@dataclass
class Seeded:
    """What was seeded: logical payload per point id, and point ids per doc id."""

    logical: dict[str, dict[str, Any]]
    by_doc: dict[str, list[str]]


def physical_payload(layout: Layout, logical: dict[str, Any], n: int) -> dict[str, Any]:
    """A whole point payload as another tool built it: foreign keys in and beside the prefix."""
    payload = layout.keys.to_point({**logical, "page": n, "source": f"doc-{n}.md"})
    payload["source_url"] = f"https://example.test/{logical['chunk_id']}"
    payload[layout.text_key] = f"chunk text {logical['chunk_id']} " * 3
    return payload


@pytest.fixture
def seeded(harness: Harness) -> Seeded:
    harness.index.ensure_collection(dim=DIM)
    logical: dict[str, dict[str, Any]] = {}
    by_doc: dict[str, list[str]] = {}
    for number in range(DOCS):
        doc = document(number)
        for chunk in range(CHUNKS):
            pid = point_id(doc.doc_id, chunk)
            payload = chunk_payload(doc, chunk_id=f"{doc.doc_id}#{chunk}")
            vector = [float(number + 1), float(chunk + 1), 0.5, 0.25]
            harness.put(pid, vector, physical_payload(harness.layout, payload, chunk))
            logical[pid] = payload
            by_doc.setdefault(doc.doc_id, []).append(pid)
    return Seeded(logical, by_doc)


def snapshot(harness: Harness, ids: list[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
    return {pid: harness.raw(pid) for pid in ids}


class TestChunkIndexContract:
    def test_exists_only_after_ensure_collection(self, harness: Harness) -> None:
        assert harness.index.exists() is False
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

        assert sorted(str(s.point_id) for s in split.scroll(batch_size=5)) == every
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


def _f32(vector: Any) -> bytes:
    """A dense vector's float32 bytes (what the engine stores)."""
    return struct.pack(f"<{len(vector)}f", *vector)


def _unit(vector: list[float]) -> list[float]:
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


def _strip_managed(payload: dict[str, Any], keys: KeyMap) -> dict[str, Any]:
    """The payload with every managed key removed from the object the keys live in."""
    copied: dict[str, Any] = {k: v for k, v in payload.items()}
    node = copied
    if keys.nest_key:
        parts = keys.nest_key.split(".")
        for part in parts:
            node[part] = dict(node[part])
            node = node[part]
    for key in MANAGED_KEYS:
        node.pop(keys.name(key), None)
    return copied


def _rows(pages: Iterable[ManagedPage]) -> Iterator[ManagedRow]:
    """A lean scan chunk by chunk."""
    for page in pages:
        yield from page.chunks()


def test_scan_vectors_of_named_vectors_reads_the_one_dense_vector(tmp_path: Path) -> None:
    # LlamaIndex's hybrid collections name a dense and a sparse vector; a collection of two
    # dense named vectors says nothing of which one is meant, so its points are left out.
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        client.create_collection(
            "hybrid",
            vectors_config={
                "text-dense": models.VectorParams(size=2, distance=models.Distance.DOT)
            },
            sparse_vectors_config={"text-sparse": models.SparseVectorParams()},
        )
        client.create_collection(
            "two",
            vectors_config={
                name: models.VectorParams(size=2, distance=models.Distance.DOT)
                for name in ("a", "b")
            },
        )
        sparse = models.SparseVector(indices=[3], values=[1.0])
        client.upsert(
            "hybrid",
            [
                models.PointStruct(
                    id=1,
                    vector={"text-dense": [0.5, 2.0], "text-sparse": sparse},
                    payload={"doc_id": "d"},
                )
            ],
        )
        client.upsert(
            "two",
            [models.PointStruct(id=1, vector={"a": [1, 0], "b": [0, 1]}, payload={"doc_id": "d"})],
        )

        (hybrid,) = QdrantChunkIndex(client, collection="hybrid").scan_vectors()
        (two,) = QdrantChunkIndex(client, collection="two").scan_vectors()

        assert (list(hybrid.doc_ids), [list(v) for v in hybrid.vectors]) == (["d"], [[0.5, 2.0]])
        assert (len(two), two.skipped) == (0, 1)
    finally:
        client.close()


def test_the_tests_on_every_layout_are_tests_of_this_suite() -> None:
    tests = {
        name
        for holder in (TestChunkIndexContract, TestWholePoints, TestSplitStore)
        for name in vars(holder)
        if name.startswith("test_")
    }
    assert sorted(ON_EVERY_LAYOUT - tests) == []
