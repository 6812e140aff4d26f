"""The chunk index's contract suites (``reconciler.testing``) run on every adapter of this
package, over every payload key layout: the dict-backed fake, real qdrant-client local mode and
a real Qdrant Edge shard, with top-level keys, LangChain's ``metadata.`` prefix, renames, and a
two-level prefix with renames. A third party's adapter runs them the same way: import the
suites and the kit's fixtures into a test module and give them a ``harness`` fixture.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe
from qdrant_client import QdrantClient, models

from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.testing import index_kit
from reconciler.testing.index_contract import TestChunkIndexContract
from reconciler.testing.index_kit import ON_EVERY_LAYOUT, Harness, Layout
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.testing.points_contract import TestSplitStore, TestWholePoints

__all__ = ["TestChunkIndexContract", "TestSplitStore", "TestWholePoints"]

# The kit's fixtures and hook, where pytest finds them for the suites above.
layout = index_kit.layout
seeded = index_kit.seeded
pytest_generate_tests = index_kit.pytest_generate_tests


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


@pytest.fixture(params=list(ADAPTERS), ids=list(ADAPTERS))
def harness(request: pytest.FixtureRequest, layout: Layout, tmp_path: Path) -> Iterator[Harness]:
    yield from ADAPTERS[request.param](layout, tmp_path)


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
