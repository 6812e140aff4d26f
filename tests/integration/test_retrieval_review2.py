"""Defects found by a second review of the retrieval side, each held here.

- The LangChain retriever read ``as_of`` with pydantic's datetime alone, which takes a text of
  digits for a count of seconds since 1970: ``as_of="20250301"`` (ISO 8601's basic format,
  which docs/retrieval.md's "an ISO 8601 text" admits and the LlamaIndex retriever reads as
  1 March 2025) asked what was in force on 23 August 1970, and served nothing, silently.
- The LlamaIndex retriever's ``from_vector_store`` asked the collection for its vector and
  distance when built: over a store that had not made its collection yet (LlamaIndex's does so
  at its first add), a retriever built at an app's start-up failed there.
- Over a collection with several named vectors the retrievers said "name the one to search
  (vector_name=...)", which neither ``from_client`` took (LangChain's dropped it silently, and
  failed the same way; LlamaIndex's raised a TypeError), and LlamaIndex's ``from_vector_store``
  did not take the store's own ``dense_vector_name``.
- The LangChain retriever, a pydantic model of LangChain's that ignores extra fields, dropped
  what it does not take when built: a ``filter=`` or ``search_kwargs={"filter": ...}`` (what a
  vector store's ``as_retriever`` takes), meant to narrow it to one tenant, was dropped
  silently and every tenant's chunks were served; ``similarity_top_k=1`` left ``k`` at 4.
- ``default_filter(as_of=some_date)`` (README's own line) raised AttributeError for a ``date``,
  which the retrievers take (its midnight, UTC); ``query_points`` and ``default_edge_filter``
  with it.
- A retriever handed an ``AsyncQdrantClient`` failed at its first query with
  "'coroutine' object has no attribute 'config'" (and a coroutine never awaited).
"""

from __future__ import annotations

import asyncio
import warnings
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from reconciler.clock import ManualClock
from reconciler.embedding import HashingEmbedder
from reconciler.filters import default_filter, query_points
from reconciler.model import Document, VersionState
from reconciler.payload import chunk_id_for, chunk_payload, point_id_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from reconciler.integrations import langchain, llamaindex

DIM = 16
EMBEDDER = HashingEmbedder(dim=DIM)
T = datetime(2026, 6, 1, tzinfo=UTC)
OLD = datetime(2025, 1, 1, tzinfo=UTC)


def row(doc_id: str, state: VersionState, start: datetime, **values: Any) -> Document:
    return Document(
        doc_id=doc_id,
        source="hb",
        source_key=doc_id,
        doc_family_id="hb:meals",
        doc_version=int(doc_id[-1]),
        version_state=state,
        effective_from=start,
        **values,
    )


HANDOVER = {
    "meals up to 40": row("hb:v1", VersionState.CURRENT, OLD, effective_to=T),
    "meals up to 55": row("hb:v2", VersionState.PENDING, T),
}


def corpus() -> QdrantClient:
    client = QdrantClient(location=":memory:")
    params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    client.create_collection("corpus", vectors_config=params)
    points = []
    for text, document in HANDOVER.items():
        chunk_id = chunk_id_for(document.doc_id, 0)
        payload = {**chunk_payload(document, chunk_id=chunk_id), "text": text}
        vector = list(EMBEDDER.embed([text])[0])
        points.append(models.PointStruct(id=point_id_for(chunk_id), vector=vector, payload=payload))
    client.upsert("corpus", points=points)
    return client


def lc(client: Any, clock: ManualClock, **fields: Any) -> Any:
    return langchain.VersionAwareRetriever.from_client(
        client, "corpus", embeddings=langchain.EmbedderEmbeddings(EMBEDDER), clock=clock, **fields
    )


def li(client: Any, clock: ManualClock, **options: Any) -> Any:
    return llamaindex.VersionAwareRetriever.from_client(
        client, "corpus", embed_model=llamaindex.EmbedderEmbedding(EMBEDDER), clock=clock, **options
    )


def test_as_of_in_iso_basic_format_is_the_date_it_names_on_both_frameworks() -> None:
    client = corpus()
    clock = ManualClock(T + timedelta(days=30))
    as_of = "20260301"  # ISO 8601 basic: 1 March 2026, when hb:v1 was in force
    assert [d.metadata["doc_id"] for d in lc(client, clock).invoke("meals", as_of=as_of)] == [
        "hb:v1"
    ]
    assert [d.metadata["doc_id"] for d in lc(client, clock, as_of=as_of).invoke("meals")] == [
        "hb:v1"
    ]
    assert [n.node.metadata["doc_id"] for n in li(client, clock, as_of=as_of).retrieve("m")] == [
        "hb:v1"
    ]


def test_as_of_as_a_count_of_seconds_is_refused_not_read_as_an_instant() -> None:
    """docs/retrieval.md: a datetime, a date or an ISO 8601 text; 1700000000 is none."""
    client = corpus()
    with pytest.raises((TypeError, ValueError), match="as_of"):
        lc(client, ManualClock(T)).invoke("meals", as_of=1_700_000_000)
    with pytest.raises((TypeError, ValueError), match="as_of"):
        lc(client, ManualClock(T)).invoke("meals", as_of="1700000000")


def test_an_async_client_says_what_to_do() -> None:
    client = AsyncQdrantClient(location=":memory:")
    with pytest.raises(TypeError, match=r"AsyncQdrantClient .* pass a QdrantClient"):
        asyncio.run(lc(client, ManualClock(T)).ainvoke("meals"))
    with pytest.raises(TypeError, match=r"AsyncQdrantClient .* pass a QdrantClient"):
        li(client, ManualClock(T)).retrieve("meals")


def test_a_llamaindex_retriever_built_before_its_store_made_the_collection() -> None:
    """LlamaIndex's store makes its collection at its first add: a retriever built at an
    app's start-up, before any document, failed there ("Collection corpus not found")."""
    embed = llamaindex.EmbedderEmbedding(EMBEDDER)
    client = QdrantClient(location=":memory:")
    store = QdrantVectorStore(client=client, collection_name="corpus")
    retriever = llamaindex.VersionAwareRetriever.from_vector_store(
        store, embed_model=embed, clock=ManualClock(T)
    )
    metadata = {
        "version_state": "current",
        "effective_from": "2025-01-01T00:00:00Z",
        "effective_to": "9999-12-31T00:00:00Z",
    }
    node = TextNode(text="meals up to 55", metadata=metadata)
    node.embedding = embed.get_text_embedding(node.text)
    with warnings.catch_warnings():  # (local mode: payload indexes have no effect)
        warnings.simplefilter("ignore")
        store.add([node])
    [hit] = retriever.retrieve("meals")
    assert hit.node.get_content() == "meals up to 55"


def test_a_collection_with_several_named_vectors_is_searched_on_the_one_named() -> None:
    client = QdrantClient(location=":memory:")
    params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    client.create_collection("corpus", vectors_config={"dense": params, "title": params})
    points = []
    for text, document in HANDOVER.items():
        chunk_id = chunk_id_for(document.doc_id, 0)
        payload = {**chunk_payload(document, chunk_id=chunk_id), "text": text}
        vector = list(EMBEDDER.embed([text])[0])
        points.append(
            models.PointStruct(
                id=point_id_for(chunk_id),
                vector={"dense": vector, "title": vector},
                payload=payload,
            )
        )
    client.upsert("corpus", points=points)
    clock = ManualClock(T)
    with pytest.raises(ValueError, match=r"name the one to search \(vector_name=...\)"):
        lc(client, clock).invoke("meals")
    docs = lc(client, clock, vector_name="dense").invoke("meals")
    assert [d.metadata["doc_id"] for d in docs] == ["hb:v2"]
    nodes = li(client, clock, vector_name="dense").retrieve("meals")
    assert [n.node.metadata["doc_id"] for n in nodes] == ["hb:v2"]
    store = QdrantVectorStore(client=client, collection_name="corpus", dense_vector_name="dense")
    retriever = llamaindex.VersionAwareRetriever.from_vector_store(
        store, embed_model=llamaindex.EmbedderEmbedding(EMBEDDER), clock=clock
    )
    assert [n.node.metadata["doc_id"] for n in retriever.retrieve("meals")] == ["hb:v2"]


def test_a_langchain_retriever_refuses_a_field_it_does_not_take() -> None:
    client = corpus()
    tenant = {"must": [{"key": "doc_family_id", "match": {"value": "another"}}]}
    for extra in (
        {"filter": tenant},
        {"search_kwargs": {"filter": tenant}},
        {"similarity_top_k": 1},
    ):
        with pytest.raises(TypeError, match="builds its own filter"):
            lc(client, ManualClock(T), **extra)
    retriever = lc(client, ManualClock(T), k=1, tags=["mine"], metadata={"app": "x"})
    assert [d.metadata["doc_id"] for d in retriever.invoke("meals")] == ["hb:v2"]
    assert [d.metadata["doc_id"] for d in retriever.with_config(tags=["t"]).invoke("meals")] == [
        "hb:v2"
    ]


def test_the_filter_takes_a_date_as_the_retrievers_do() -> None:
    """README's ``default_filter(as_of=some_date, ...)``: a ``date`` raised AttributeError
    ("'datetime.date' object has no attribute 'tzinfo'"), in ``default_filter``,
    ``default_edge_filter`` and ``query_points``; the retrievers read it as its midnight, UTC."""
    client = corpus()
    vector = list(EMBEDDER.embed(["meals"])[0])
    for at, served in ((date(2026, 5, 31), "hb:v1"), (date(2026, 6, 1), "hb:v2")):
        hits = query_points(client, vector, collection="corpus", as_of=at, with_payload=True)
        assert [p.payload["doc_id"] for p in hits if p.payload] == [served]
        scrolled, _ = client.scroll("corpus", scroll_filter=default_filter(as_of=at))
        assert len(scrolled) == 1
    historical = default_filter(as_of=date(2026, 5, 31), include_historical=True)
    assert historical == default_filter(
        as_of=datetime(2026, 5, 31, tzinfo=UTC), include_historical=True
    )
