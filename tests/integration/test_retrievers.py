"""The retrievers of ``reconciler.integrations`` with the real frameworks over a real Qdrant
(local mode in memory): what they pass through (``k``, a score threshold, per-call options,
async), what they hand back (metadata that names the version whatever the payload layout), and
that the core imports without either framework while each module names the extra it needs."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient, models

from reconciler.clock import ManualClock
from reconciler.embedding import HashingEmbedder
from reconciler.model import Document, VersionState
from reconciler.payload import DEFAULT_KEYS, KeyMap, chunk_id_for, chunk_payload, point_id_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langchain_qdrant import QdrantVectorStore as LangChainStore

    from reconciler.integrations import langchain, llamaindex

DIM = 16
T = datetime(2026, 6, 1, tzinfo=UTC)
EMBEDDER = HashingEmbedder(dim=DIM)


def row(doc_id: str, state: VersionState, start: datetime, **values: Any) -> Document:
    return Document(
        doc_id=doc_id,
        source="hb",
        source_key=doc_id,
        doc_family_id="hb:expenses",
        doc_version=int(doc_id[-1]),
        version_state=state,
        effective_from=start,
        **values,
    )


#: Two versions of one policy handing over at T, and a quarantined third document.
ROWS = [
    row("hb:v1", VersionState.CURRENT, datetime(2025, 1, 1, tzinfo=UTC), effective_to=T),
    row("hb:v2", VersionState.PENDING, T),
    row("hb:q3", VersionState.CURRENT, datetime(2025, 1, 1, tzinfo=UTC), quarantined=True),
]
TEXTS = {
    "hb:v1": "expenses policy: meals up to 40",
    "hb:v2": "expenses policy: meals up to 55",
    "hb:q3": "expenses policy: meals quarantined",
}


def collection(
    keys: KeyMap = DEFAULT_KEYS, text_key: str = "text", rows: list[Document] = ROWS
) -> QdrantClient:
    """A collection laid out as ``keys`` say, written with the project's own payloads (what
    the reference ingestion writes)."""
    client = QdrantClient(location=":memory:")
    client.create_collection(
        "corpus", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    points = []
    for document in rows:
        chunk_id = chunk_id_for(document.doc_id, 0)
        payload = keys.to_point(chunk_payload(document, chunk_id=chunk_id))
        payload[text_key] = TEXTS[document.doc_id]
        vector = list(EMBEDDER.embed([TEXTS[document.doc_id]])[0])
        points.append(models.PointStruct(id=point_id_for(chunk_id), vector=vector, payload=payload))
    client.upsert("corpus", points=points)
    return client


def lc_store(client: QdrantClient, text_key: str) -> LangChainStore:
    """LangChain's own Qdrant store over the collection (its text under ``text_key``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LangChainStore(
            client=client,
            collection_name="corpus",
            embedding=langchain.EmbedderEmbeddings(EMBEDDER),
            content_payload_key=text_key,
        )


def lc_retriever(client: QdrantClient, clock: ManualClock, **fields: Any) -> Any:
    return langchain.VersionAwareRetriever.from_client(
        client, "corpus", embeddings=langchain.EmbedderEmbeddings(EMBEDDER), clock=clock, **fields
    )


def li_retriever(client: QdrantClient, clock: ManualClock, **options: Any) -> Any:
    return llamaindex.VersionAwareRetriever.from_client(
        client, "corpus", embed_model=llamaindex.EmbedderEmbedding(EMBEDDER), clock=clock, **options
    )


def test_each_query_reads_its_own_instant() -> None:
    client = collection()
    clock = ManualClock(datetime(2026, 5, 31, tzinfo=UTC))
    lc, li = lc_retriever(client, clock), li_retriever(client, clock)
    assert [d.metadata["doc_id"] for d in lc.invoke("meals")] == ["hb:v1"]
    assert [n.node.metadata["doc_id"] for n in li.retrieve("meals")] == ["hb:v1"]
    clock.advance_to(T)  # the successor comes into force: no run, no new retriever
    assert [d.metadata["doc_id"] for d in lc.invoke("meals")] == ["hb:v2"]
    assert [n.node.metadata["doc_id"] for n in li.retrieve("meals")] == ["hb:v2"]
    assert [d.metadata["doc_id"] for d in asyncio.run(lc.ainvoke("meals"))] == ["hb:v2"]
    assert [n.node.metadata["doc_id"] for n in asyncio.run(li.aretrieve("meals"))] == ["hb:v2"]


def test_as_of_and_the_historical_route_per_call_and_per_retriever() -> None:
    client = collection()
    clock = ManualClock(T)
    lc = lc_retriever(client, clock)
    before = datetime(2026, 3, 1, tzinfo=UTC)
    assert [d.metadata["doc_id"] for d in lc.invoke("meals", as_of=before)] == ["hb:v1"]
    every = lc.invoke("meals", include_historical=True)
    assert {d.metadata["doc_id"] for d in every} == {"hb:v1", "hb:v2"}  # never the quarantined
    li = li_retriever(client, clock, as_of=before, include_historical=True)
    assert [n.node.metadata["doc_id"] for n in li.retrieve("meals")] == ["hb:v1"]


def test_k_and_the_score_threshold_are_passed_through() -> None:
    client = collection()
    clock = ManualClock(T)
    lc = lc_retriever(client, clock, include_historical=True)
    assert len(lc.invoke("meals", k=1)) == 1
    scores = [d.metadata["_score"] for d in lc.invoke("meals up to 55")]
    assert scores == sorted(scores, reverse=True)
    assert len(scores) == 2
    strict = lc.invoke("meals up to 55", score_threshold=(scores[0] + scores[1]) / 2)
    assert [d.metadata["doc_id"] for d in strict] == ["hb:v2"]
    li = li_retriever(client, clock, include_historical=True, similarity_top_k=1)
    assert len(li.retrieve("meals")) == 1
    with pytest.raises(TypeError, match="builds its own filter"):
        lc.invoke("meals", filter={"must": []})


@pytest.mark.parametrize(
    ("keys", "text_key"),
    [
        (DEFAULT_KEYS, "text"),
        (KeyMap(prefix="metadata.", renames={"doc_id": "source"}), "page_content"),
    ],
    ids=["default-layout", "langchain-layout"],
)
def test_metadata_names_the_version_whatever_the_layout(keys: KeyMap, text_key: str) -> None:
    client = collection(keys, text_key)
    clock = ManualClock(T)
    store = lc_store(client, text_key)
    lc = langchain.VersionAwareRetriever.from_vector_store(store, keys=keys, clock=clock)
    [doc] = lc.invoke("meals")
    assert doc.page_content == TEXTS["hb:v2"]
    assert doc.metadata["doc_id"] == "hb:v2"
    assert doc.metadata["version_state"] == "pending"
    assert doc.metadata["effective_from"] == "2026-06-01T00:00:00Z"
    assert doc.metadata["effective_to"] == "9999-12-31T00:00:00Z"
    li = li_retriever(client, clock, keys=keys, text_key=text_key)
    [hit] = li.retrieve("meals")
    assert hit.node.get_content() == TEXTS["hb:v2"]
    assert hit.node.metadata["version_state"] == "pending"


def test_the_core_imports_without_the_frameworks_and_each_module_names_its_extra() -> None:
    script = """
import sys
for name in ("langchain_core", "langchain_qdrant", "llama_index", "llama_index.core"):
    sys.modules[name] = None  # as if not installed
import reconciler, reconciler.filters, reconciler.integrations.retrieving, reconciler.cli
for module, extra in (("langchain", "langchain"), ("llamaindex", "llamaindex")):
    try:
        __import__(f"reconciler.integrations.{module}")
    except ImportError as exc:
        assert f"pip install 'corpus-reconciler[{extra}]'" in str(exc), exc
    else:
        raise AssertionError(module)
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_a_missing_collection_says_what_to_do() -> None:
    client = QdrantClient(location=":memory:")
    lc = lc_retriever(client, ManualClock(T))
    with pytest.raises(ValueError, match=r"collection 'corpus' does not exist: point"):
        lc.invoke("meals")


ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_lines_run_as_written() -> None:
    """README's three lines, over a LangChain store on a collection in LangChain's layout,
    at the real instant: a version that ended yesterday is gone, its successor is served."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    opening = readme.split("## Two commands", 1)[0]
    [snippet] = re.findall(r"```python\n(.*?)```", opening, flags=re.DOTALL)
    yesterday = datetime.now(UTC) - timedelta(days=1)
    rows = [
        row("hb:v1", VersionState.CURRENT, yesterday - timedelta(days=300), effective_to=yesterday),
        row("hb:v2", VersionState.CURRENT, yesterday),
    ]
    keys = KeyMap(prefix="metadata.")
    client = collection(keys, "page_content", rows)
    scope: dict[str, Any] = {"vector_store": lc_store(client, "page_content")}
    exec(snippet, scope)
    assert [d.metadata["doc_id"] for d in scope["docs"]] == ["hb:v2"]


def test_no_doc_builds_a_retriever_around_a_kept_filter() -> None:
    """The docs show the filter built per query only: no vector store's retriever with a
    filter in its search arguments, no filter handed to LlamaIndex's store once."""
    for path in [
        ROOT / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "examples").rglob("*.py"),
    ]:
        text = path.read_text(encoding="utf-8")
        assert "as_retriever(" not in text, path
        assert "search_kwargs" not in text, path
        assert "qdrant_filters=" not in text, path
