"""Defects found by an adversarial review of the retrieval side (issue 33), each held here.

- ``reconciler.filters.query_points`` on the historical route of a split store whose archive
  is not created yet (no move so far; ``docs/retrieval.md``'s own example) raised "collection
  not found" instead of searching the main collection.
- ``query_points`` took no filter of the caller's: a ``query_filter=`` (its docs send other
  keyword arguments to ``client.query_points``) failed on a duplicate keyword.
- A retriever built with ``from_client`` (and ``reconciler search``, whose route is the
  settings') over a Euclid or Manhattan collection, which ``bootstrap`` adopts, ranked the
  hits worst first, and a split store's merge kept the worst ``k``.
- Per-call options were not read as the fields of the same names: ``as_of`` given as text or
  a date failed with an AttributeError, and ``include_historical="false"`` (text, truthy)
  took the historical route and served superseded versions.
"""

from __future__ import annotations

import asyncio
import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from reconciler.app.evaluating import evaluate
from reconciler.clock import ManualClock
from reconciler.embedding import HashingEmbedder
from reconciler.filters import query_points
from reconciler.integrations.retrieving import Route, search
from reconciler.model import Document, VersionState
from reconciler.payload import KeyMap, chunk_id_for, chunk_payload, point_id_for
from reconciler.settings import Settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from llama_index.core.schema import MetadataMode, TextNode
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from reconciler.integrations import langchain, llamaindex

DIM = 16
EMBEDDER = HashingEmbedder(dim=DIM)
T = datetime(2026, 6, 1, tzinfo=UTC)
OLD = datetime(2025, 1, 1, tzinfo=UTC)


def row(doc_id: str, family: str, state: VersionState, start: datetime, **values: Any) -> Document:
    return Document(
        doc_id=doc_id,
        source="hb",
        source_key=doc_id,
        doc_family_id=family,
        doc_version=int(doc_id[-1]),
        version_state=state,
        effective_from=start,
        **values,
    )


def put(
    client: QdrantClient, name: str, rows: dict[str, Document], distance: models.Distance
) -> None:
    """A collection of one chunk per row, text the key of ``rows``, as ingestion writes it."""
    if not client.collection_exists(name):
        client.create_collection(
            name, vectors_config=models.VectorParams(size=DIM, distance=distance)
        )
    points = []
    for text, document in rows.items():
        chunk_id = chunk_id_for(document.doc_id, 0)
        payload = chunk_payload(document, chunk_id=chunk_id)
        payload["text"] = text
        vector = list(EMBEDDER.embed([text])[0])
        points.append(models.PointStruct(id=point_id_for(chunk_id), vector=vector, payload=payload))
    client.upsert(name, points=points)


#: A handover at T, and two documents of other families, all in force at T.
HANDOVER = {
    "meals up to 40": row("hb:v1", "hb:meals", VersionState.CURRENT, OLD, effective_to=T),
    "meals up to 55": row("hb:v2", "hb:meals", VersionState.PENDING, T),
    "train travel rules": row("tr:v1", "tr", VersionState.CURRENT, OLD),
    "leave days per year": row("lv:v1", "lv", VersionState.CURRENT, OLD),
}


def lc(client: QdrantClient, clock: ManualClock, **fields: Any) -> Any:
    return langchain.VersionAwareRetriever.from_client(
        client, "corpus", embeddings=langchain.EmbedderEmbeddings(EMBEDDER), clock=clock, **fields
    )


def li(client: QdrantClient, clock: ManualClock, **options: Any) -> Any:
    return llamaindex.VersionAwareRetriever.from_client(
        client, "corpus", embed_model=llamaindex.EmbedderEmbedding(EMBEDDER), clock=clock, **options
    )


def test_query_points_on_the_historical_route_before_the_archive_exists() -> None:
    """docs/retrieval.md's ``query_points`` example on a split store before its first move."""
    client = QdrantClient(location=":memory:")
    put(client, "corpus", HANDOVER, models.Distance.COSINE)
    vector = list(EMBEDDER.embed(["meals"])[0])
    hits = query_points(
        client,
        vector,
        collection="corpus",
        archive="corpus_archive",
        as_of=T - timedelta(days=1),
        include_historical=True,
        limit=10,
        with_payload=True,
    )
    assert {p.payload["doc_id"] for p in hits if p.payload} == {"hb:v1", "tr:v1", "lv:v1"}


@pytest.mark.parametrize("as_dict", [False, True], ids=["models.Filter", "dict"])
def test_query_points_ands_a_filter_of_the_callers(as_dict: bool) -> None:
    client = QdrantClient(location=":memory:")
    put(client, "corpus", HANDOVER, models.Distance.COSINE)
    vector = list(EMBEDDER.embed(["meals"])[0])
    mine: Any = models.Filter(
        should=[
            models.FieldCondition(key="doc_family_id", match=models.MatchValue(value="hb:meals")),
            # a condition of the caller's on a version key narrows, never widens
            models.FieldCondition(key="version_state", match=models.MatchValue(value="retired")),
        ]
    )
    if as_dict:
        mine = mine.model_dump(exclude_none=True)
    for at, served in ((T - timedelta(microseconds=1), "hb:v1"), (T, "hb:v2")):
        hits = query_points(
            client, vector, collection="corpus", as_of=at, query_filter=mine, with_payload=True
        )
        assert [p.payload["doc_id"] for p in hits if p.payload] == [served]


@pytest.mark.parametrize("distance", [models.Distance.EUCLID, models.Distance.MANHATTAN])
def test_from_client_ranks_best_first_whatever_the_distance(distance: models.Distance) -> None:
    client = QdrantClient(location=":memory:")
    put(client, "corpus", HANDOVER, distance)
    clock = ManualClock(T)
    raw = client.query_points(
        "corpus", query=list(EMBEDDER.embed(["train travel rules"])[0]), limit=10
    ).points
    best = raw[0].id  # Qdrant's own order: the nearest first
    [first, *_] = lc(client, clock).invoke("train travel rules")
    assert first.metadata["_id"] == str(best)
    [top] = lc(client, clock).invoke("train travel rules", k=1)
    assert top.metadata["_id"] == str(best)
    [node, *_] = li(client, clock).retrieve("train travel rules")
    assert node.node.metadata["doc_id"] == "tr:v1"
    # reconciler search's route (Route.from_settings) leaves the distance to the collection too
    hits = search(client, Route("corpus"), list(EMBEDDER.embed(["train travel rules"])[0]))
    assert hits[0].point_id == str(best)


def test_a_split_store_merge_keeps_the_nearest_on_a_euclid_collection() -> None:
    """The historical route over both collections, merged: the nearest ``k`` of the two, not
    the farthest."""
    client = QdrantClient(location=":memory:")
    main = {k: v for k, v in HANDOVER.items() if v.doc_id != "hb:v1"}
    archived = {
        "meals up to 40": row(
            "hb:v1", "hb:meals", VersionState.SUPERSEDED, OLD, effective_to=T, superseded_by="hb:v2"
        )
    }
    put(client, "corpus", main, models.Distance.EUCLID)
    put(client, "corpus_archive", archived, models.Distance.EUCLID)
    retriever = lc(client, ManualClock(T), archive="corpus_archive", include_historical=True)
    [doc] = retriever.invoke("meals up to 40", k=1)
    assert doc.metadata["doc_id"] == "hb:v1"  # the exact text, in the archive
    ranked = retriever.invoke("meals up to 40", k=4)
    assert ranked[0].metadata["doc_id"] == "hb:v1"
    scores = [d.metadata["_score"] for d in ranked]
    assert scores == sorted(scores)  # distances: the nearest first


@pytest.mark.parametrize(
    "as_of",
    ["2026-05-31T23:59:59.999999Z", "2026-05-31T12:00:00+02:00", date(2026, 5, 31)],
    ids=["rfc3339", "offset", "date"],
)
def test_as_of_given_per_call_as_text_or_a_date_is_read_as_the_field_reads_it(
    as_of: Any,
) -> None:
    client = QdrantClient(location=":memory:")
    put(client, "corpus", HANDOVER, models.Distance.COSINE)
    clock = ManualClock(T + timedelta(days=30))
    docs = lc(client, clock).invoke("meals up to", k=1, as_of=as_of)
    assert [d.metadata["doc_id"] for d in docs] == ["hb:v1"]
    docs = asyncio.run(lc(client, clock).ainvoke("meals up to", k=1, as_of=as_of))
    assert [d.metadata["doc_id"] for d in docs] == ["hb:v1"]
    nodes = li(client, clock, similarity_top_k=1, as_of=as_of).retrieve("meals up to")
    assert [n.node.metadata["doc_id"] for n in nodes] == ["hb:v1"]


def test_include_historical_given_as_text_never_opens_the_historical_route() -> None:
    """``"false"`` is truthy: taken as it is, it served superseded versions."""
    client = QdrantClient(location=":memory:")
    rows = dict(HANDOVER)
    rows["meals up to 40"] = row(
        "hb:v1", "hb:meals", VersionState.SUPERSEDED, OLD, effective_to=T, superseded_by="hb:v2"
    )
    put(client, "corpus", rows, models.Distance.COSINE)
    clock = ManualClock(T + timedelta(days=1))
    served = {"hb:v2", "tr:v1", "lv:v1"}
    docs = lc(client, clock).invoke("meals up to 40", k=10, include_historical="false")
    assert {d.metadata["doc_id"] for d in docs} == served
    field = lc(client, clock, include_historical="false")
    assert {d.metadata["doc_id"] for d in field.invoke("meals up to 40", k=10)} == served
    with pytest.raises(TypeError, match="include_historical"):
        li(client, clock, include_historical="false").retrieve("meals up to 40")


def test_a_llamaindex_node_carries_renamed_version_keys_as_the_payload_holds_them_now() -> None:
    """A collection LlamaIndex wrote, its own names for the version keys (``[index.keys]``):
    the copy of the metadata in ``_node_content`` is the node's when written, and the prompt
    showed both the stale ``valid_to`` and the payload's ``effective_to``."""
    embed = llamaindex.EmbedderEmbedding(EMBEDDER)
    client = QdrantClient(location=":memory:")
    store = QdrantVectorStore(client=client, collection_name="corpus")
    metadata = {
        "state": "current",
        "valid_from": "2025-01-01T00:00:00Z",
        "valid_to": "9999-12-31T00:00:00Z",
        "quarantined": False,
    }
    node = TextNode(text="meals up to 40", metadata=metadata)
    node.embedding = embed.get_text_embedding(node.text)
    with warnings.catch_warnings():  # (local mode: payload indexes have no effect)
        warnings.simplefilter("ignore")
        store.add([node])
    # the reconciler closes the window ahead of its successor's start
    client.set_payload("corpus", {"valid_to": "2026-06-01T00:00:00Z"}, points=[node.node_id])
    keys = KeyMap(
        renames={
            "version_state": "state",
            "effective_from": "valid_from",
            "effective_to": "valid_to",
        }
    )
    retriever = llamaindex.VersionAwareRetriever.from_vector_store(
        store, embed_model=embed, keys=keys, clock=ManualClock(T - timedelta(days=1))
    )
    [hit] = retriever.retrieve("meals")
    assert hit.node.metadata["valid_to"] == "2026-06-01T00:00:00Z"
    assert hit.node.metadata["effective_to"] == "2026-06-01T00:00:00Z"
    assert "9999" not in hit.node.get_content(metadata_mode=MetadataMode.LLM)


def test_a_llamaindex_store_with_an_async_client_alone_says_what_to_do() -> None:
    """It failed with "'NoneType' object has no attribute 'get_collection'"."""
    store = QdrantVectorStore(aclient=AsyncQdrantClient(location=":memory:"), collection_name="c")
    with pytest.raises(ValueError, match=r"no synchronous client .* client=QdrantClient"):
        llamaindex.VersionAwareRetriever.from_vector_store(
            store, embed_model=llamaindex.EmbedderEmbedding(EMBEDDER)
        )


def test_eval_searches_a_collection_whose_dense_vector_is_named(tmp_path: Path) -> None:
    """``reconciler search`` found the collection's one named vector; ``reconciler eval``
    queried the unnamed one and failed ("Dense vector  is not found")."""
    settings = Settings.model_validate(
        {"index": {"path": str(tmp_path / "q")}, "ingest": {"embedder": "hashing", "dim": DIM}}
    )
    client = QdrantClient(path=str(tmp_path / "q"))
    params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    client.create_collection("corpus", vectors_config={"text-dense": params})
    points = []
    for text, document in HANDOVER.items():
        chunk_id = chunk_id_for(document.doc_id, 0)
        payload = {**chunk_payload(document, chunk_id=chunk_id), "text": text}
        vector = {"text-dense": list(EMBEDDER.embed([text])[0])}
        points.append(models.PointStruct(id=point_id_for(chunk_id), vector=vector, payload=payload))
    client.upsert("corpus", points=points)
    client.close()
    golden = tmp_path / "golden.yaml"
    golden.write_text("cases:\n  - query: meals up to 55\n    expect: hb:v2\n", encoding="utf-8")
    result = evaluate(settings, golden, k=3)
    assert result["ok"]
