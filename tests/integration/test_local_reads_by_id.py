"""qdrant-client local mode reads documents' points by id (issue 39): a scroll, lean scan or
whole-point scan under ``doc_ids`` retrieves the points its map of ids names instead of
scrolling under a doc_id filter (which local mode tests on every point, for each page), and
reads what the filter reads, whatever was written through the adapter or behind it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qdrant_client import QdrantClient, models

from reconciler.model import ChunkRecord, PayloadWrite
from reconciler.payload import KeyMap
from reconciler.ports.index import StoredPoint
from reconciler.stores.qdrant.ids import LocalIds, canonical, owners
from reconciler.stores.qdrant.index import QdrantChunkIndex
from tests.hypothesis_kit import examples
from tests.integration.test_qdrant_index import Proxy

DIM = 4
DOCS = [f"src:doc-{n}" for n in range(5)]


def pid(n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"point-{n}"))


def record(n: int, doc_id: str) -> ChunkRecord:
    return ChunkRecord(
        point_id=pid(n),
        chunk_id=f"{doc_id}#{n}",
        text=f"text {n}",
        vector=(1.0, float(n % 5), 0.5, 0.25),
        payload={"doc_id": doc_id, "doc_version": 1, "version_state": "current"},
    )


def filtered(client: Any, collection: str, doc_ids: list[str], path: str) -> set[str]:
    """What local mode's own doc_id filter selects (the reads' reference)."""
    flt = models.Filter(must=[models.FieldCondition(key=path, match=models.MatchAny(any=doc_ids))])
    points, _ = client.scroll(collection, scroll_filter=flt, limit=10_000, with_payload=False)
    return {str(p.id) for p in points}


def read_all_ways(index: QdrantChunkIndex, doc_ids: list[str], batch: int) -> list[set[str]]:
    return [
        {str(s.point_id) for s in index.scroll(batch_size=batch, doc_ids=doc_ids)},
        {
            str(page.point_id(i))
            for page in index.scan_managed(batch_size=batch, doc_ids=doc_ids)
            for i in range(len(page))
        },
        {
            str(p.point_id)
            for page in index.scan_points(batch_size=batch, doc_ids=doc_ids)
            for p in page.points
        },
    ]


@pytest.fixture
def local(tmp_path: Path) -> Iterator[tuple[QdrantClient, Proxy, QdrantChunkIndex]]:
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    proxy = Proxy(client)
    index = QdrantChunkIndex(proxy, collection="chunks")  # type: ignore[arg-type]
    index.ensure_collection(dim=DIM)
    try:
        yield client, proxy, index
    finally:
        client.close()


def test_a_scoped_read_retrieves_by_id_and_never_scrolls_under_a_filter(
    local: tuple[QdrantClient, Proxy, QdrantChunkIndex],
) -> None:
    client, proxy, index = local
    index.upsert_chunks(record(n, DOCS[n % 5]) for n in range(40))
    wanted = [DOCS[1], DOCS[3]]

    first = read_all_ways(index, wanted, batch=3)
    again = read_all_ways(index, wanted, batch=3)

    expected = filtered(client, "chunks", wanted, "doc_id")
    assert len(expected) == 16
    assert first == again == [expected] * 3
    scrolls = [kwargs for name, kwargs in proxy.calls if name == "scroll"]
    assert all(kwargs.get("scroll_filter") is None for kwargs in scrolls)
    assert len(scrolls) == 1  # every point's doc_id, read once, then kept
    assert proxy.count_of("retrieve") == 6 * 6  # 16 points, 3 a call, 6 reads


def test_the_map_is_read_once_from_an_opened_collection(tmp_path: Path) -> None:
    with closing(QdrantClient(path=str(tmp_path / "qdrant"))) as client:
        ingestion = QdrantChunkIndex(client, collection="chunks")
        ingestion.ensure_collection(dim=DIM)
        ingestion.upsert_chunks(record(n, DOCS[n % 5]) for n in range(25))
    with closing(QdrantClient(path=str(tmp_path / "qdrant"))) as client:  # (nothing kept)
        proxy = Proxy(client)
        index = QdrantChunkIndex(proxy, collection="chunks")  # type: ignore[arg-type]
        reads = [read_all_ways(index, [DOCS[0]], batch=2) for _ in range(3)]

        assert reads == [[{pid(n) for n in range(0, 25, 5)}] * 3] * 3
        (scroll,) = [kwargs for name, kwargs in proxy.calls if name == "scroll"]
        assert scroll.get("scroll_filter") is None  # every point's doc_id, once, unfiltered


def test_ready_reads_reads_the_map_ahead_of_the_first_read(
    local: tuple[QdrantClient, Proxy, QdrantChunkIndex],
) -> None:
    _client, proxy, index = local
    index.upsert_chunks(record(n, DOCS[n % 5]) for n in range(10))
    assert proxy.count_of("scroll") == 0

    index.ready_reads()
    index.ready_reads()  # (the map holds every point: not read again)

    assert proxy.count_of("scroll") == 1
    assert read_all_ways(index, [DOCS[4]], batch=1) == [{pid(4), pid(9)}] * 3
    assert proxy.count_of("scroll") == 1


def test_a_documents_chunks_are_deleted_by_id(
    local: tuple[QdrantClient, Proxy, QdrantChunkIndex],
) -> None:
    client, proxy, index = local
    index.upsert_chunks(record(n, DOCS[n % 5]) for n in range(20))

    assert index.delete_document_chunks(DOCS[3]) == 4
    assert index.delete_document_chunks(DOCS[3]) == 0

    assert filtered(client, "chunks", [DOCS[3]], "doc_id") == set()
    assert index.count() == 16
    filters = [kw.get("scroll_filter") or kw.get("count_filter") for _n, kw in proxy.calls]
    assert filters == [None] * len(proxy.calls)  # (no pass over every point)
    (delete,) = [kw for name, kw in proxy.calls if name == "delete"]
    assert isinstance(delete["points_selector"], models.PointIdsList)


def test_points_deleted_or_added_behind_the_adapter_are_seen(
    local: tuple[QdrantClient, Proxy, QdrantChunkIndex],
) -> None:
    client, _proxy, index = local
    index.upsert_chunks(record(n, DOCS[n % 5]) for n in range(20))
    assert {str(s.point_id) for s in index.scroll(doc_ids=[DOCS[2]])} == {
        pid(n) for n in (2, 7, 12, 17)
    }
    # a damaged store: points gone, one added, through the raw client
    client.delete("chunks", points_selector=models.PointIdsList(points=[pid(7), pid(12)]))
    assert read_all_ways(index, [DOCS[2]], batch=5) == [{pid(2), pid(17)}] * 3
    client.upsert(
        "chunks",
        points=[models.PointStruct(id=pid(99), vector=[1, 0, 0, 0], payload={"doc_id": DOCS[2]})],
    )
    assert read_all_ways(index, [DOCS[2]], batch=5) == [{pid(2), pid(17), pid(99)}] * 3
    # a point re-keyed to another document away from the one read
    client.set_payload("chunks", payload={"doc_id": DOCS[4]}, points=[pid(17)])
    assert read_all_ways(index, [DOCS[2]], batch=5) == [{pid(2), pid(99)}] * 3
    assert pid(17) in read_all_ways(index, [DOCS[4]], batch=5)[0]


def test_a_nested_layout_is_read_by_its_stored_path(tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        keys = KeyMap(prefix="meta.")
        index = QdrantChunkIndex(client, collection="chunks", keys=keys)
        index.ensure_collection(dim=DIM)
        index.upsert_chunks(record(n, DOCS[n % 3]) for n in range(12))
        reopened = QdrantChunkIndex(client, collection="chunks", keys=keys)

        found = read_all_ways(reopened, [DOCS[1]], batch=2)

        assert found == [filtered(client, "chunks", [DOCS[1]], "meta.doc_id")] * 3
        assert len(found[0]) == 4
    finally:
        client.close()


def test_ids_in_scroll_order_and_a_list_doc_id_matched_by_each_element() -> None:
    ids = LocalIds()
    assert ids.size is None
    ids.put([(1, "a")])  # (unread: nothing kept)
    assert ids.size is None
    ids.load([(7, "a"), ("b" * 8, "a"), (3, ["a", "b"]), (pid(1).upper(), "b"), (5, None)])

    assert ids.ids_of(["a"]) == [3, 7, "b" * 8]
    assert ids.ids_of(["b"]) == [3, pid(1)]
    assert ids.size == 5
    ids.drop([3, pid(1).upper()])
    assert (ids.ids_of(["a", "b"]), ids.size) == ([7, "b" * 8], 3)
    assert owners({"x": 1}) == ()
    assert owners(["a", {"b": 1}]) == ("a",)
    assert canonical(pid(2).replace("-", "")) == pid(2)
    assert canonical("not-a-uuid") == "not-a-uuid"


# -- the property: through any writes, a scoped read reads what the doc_id filter selects --
# (the adapter's writes in any number between two reads; behind its back, one raw write
# between two reads, a point added or deleted: what the map's count check sees)

_adapter_op = st.one_of(
    st.tuples(st.just("ingest"), st.integers(0, 30), st.sampled_from(DOCS)),
    st.tuples(st.just("copy"), st.integers(0, 30), st.sampled_from(DOCS)),
    st.tuples(st.just("delete"), st.integers(0, 30), st.just("")),
    st.tuples(st.just("delete_doc"), st.just(0), st.sampled_from(DOCS)),
    st.tuples(st.just("managed"), st.integers(0, 30), st.just("")),
)
_raw_op = st.one_of(
    st.tuples(st.just("raw_add"), st.just(0), st.sampled_from(DOCS)),
    st.tuples(st.just("raw_delete"), st.integers(0, 30), st.just("")),
)
_step = st.tuples(
    st.lists(_adapter_op, max_size=4),
    st.none() | _raw_op,
    st.integers(1, 7),
    st.lists(st.sampled_from(DOCS), max_size=3),
)


def _apply(client: QdrantClient, index: QdrantChunkIndex, op: tuple[Any, ...], at: int) -> None:
    kind, n, doc = op
    if kind == "ingest":
        index.upsert_chunks([record(n, doc)])
    elif kind == "copy":
        point = StoredPoint(pid(n), [0.0, 1.0, 0.0, 0.0], {"doc_id": doc, "text": "copied"})
        index.copy_points([point])
    elif kind == "delete":
        index.delete_points([pid(n)])
    elif kind == "delete_doc":
        index.delete_document_chunks(doc)
    elif kind == "managed":
        if client.retrieve("chunks", [pid(n)]):
            index.set_payloads([PayloadWrite(point_ids=(pid(n),), payload={"doc_version": 2})])
    elif kind == "raw_add":  # (a new point)
        point = models.PointStruct(id=pid(100 + at), vector=[1, 0, 0, 0], payload={"doc_id": doc})
        client.upsert("chunks", points=[point])
    else:
        client.delete("chunks", points_selector=models.PointIdsList(points=[pid(n)]))


@settings(max_examples=examples(40))
@given(steps=st.lists(_step, max_size=8))
def test_a_scoped_read_reads_what_the_doc_id_filter_selects(
    steps: list[tuple[Any, ...]],
) -> None:
    # (":memory:" is local mode's same collection, without the folder: quick per example)
    client = QdrantClient(location=":memory:")
    try:
        index = QdrantChunkIndex(client, collection="chunks")
        index.ensure_collection(dim=DIM)
        index.upsert_chunks(record(n, DOCS[n % 5]) for n in range(15))
        for at, (ops, raw, batch, doc_ids) in enumerate([*steps, ([], None, 4, DOCS)]):
            for op in [*ops, *([raw] if raw else [])]:
                _apply(client, index, op, at)
            expected = filtered(client, "chunks", list(doc_ids), "doc_id") if doc_ids else set()
            assert read_all_ways(index, list(doc_ids), batch) == [expected] * 3
    finally:
        client.close()
