"""``[index] layout = "langchain" | "llamaindex"``: the reference ingestion writes what the
framework reads, the checks and repairs read and write it in place, and both the framework's
own Qdrant store and the version-aware retriever read the reconciled collection (a vault
deployment through the CLI: SQLite, Qdrant local mode)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, body, day
from qdrant_client import QdrantClient

from reconciler.embedding import HashingEmbedder
from reconciler.settings import load_settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langchain_qdrant import QdrantVectorStore as LangChainStore
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaIndexStore

    from reconciler.integrations import langchain, llamaindex

EMBEDDER = HashingEmbedder(dim=384)  # the default [ingest] embedder
QUERY = "expenses meals rule"


def deployed(root: Path, layout: str) -> Deployment:
    """Expenses v1 (superseded) and v2 (current), a retired note; ingested in ``layout``,
    then applied."""
    deploy = Deployment(root)
    deploy.config.write_text(
        deploy.config.read_text(encoding="utf-8").replace(
            'collection = "corpus"', f'collection = "corpus"\nlayout = "{layout}"'
        ),
        encoding="utf-8",
    )
    deploy.family("expenses")
    deploy.note(
        "old-travel",
        body("old travel", "expenses meals rule for travel, withdrawn."),
        id="old-travel",
        family="travel",
        status="retired",
        effective_from=day(-50),
    )
    deploy.init_ingest()
    code, data = deploy.json("apply")
    assert code == 0, data
    code, check = deploy.json("check")
    assert code == 0, check["findings"]  # nothing to repair: the layout is read as written
    return deploy


@contextmanager
def client_of(deploy: Deployment) -> Iterator[QdrantClient]:
    client = QdrantClient(path=str(deploy.root / "qdrant"))
    try:
        yield client
    finally:
        client.close()


def test_langchain_reads_what_the_reference_ingestion_wrote(tmp_path: Path) -> None:
    deploy = deployed(tmp_path, "langchain")
    with client_of(deploy) as client:
        records, _ = client.scroll("corpus", limit=1000, with_payload=True)
        assert records
        assert all(set(r.payload or {}) == {"page_content", "metadata"} for r in records)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = LangChainStore(
                client=client,
                collection_name="corpus",
                embedding=langchain.EmbedderEmbeddings(EMBEDDER),
            )
        # LangChain's own search (no filter): every Document names its origin and its state
        docs = store.similarity_search(QUERY, k=100)
        assert len(docs) == len(records)
        for doc in docs:
            assert doc.metadata["source"].startswith("hb:")
            assert doc.metadata["version_state"] in ("current", "superseded", "retired")
            assert doc.page_content.startswith("#")
        retriever = langchain.VersionAwareRetriever.from_vector_store(
            store, settings=deploy.settings, k=100
        )
        served = {d.metadata["source"] for d in retriever.invoke(QUERY)}
        assert served == {"hb:expenses-v2"}
        every = retriever.invoke(QUERY, include_historical=True)
        assert {d.metadata["source"] for d in every} == {
            "hb:expenses-v1",
            "hb:expenses-v2",
            "hb:old-travel",
        }


def test_llamaindex_reads_what_the_reference_ingestion_wrote(tmp_path: Path) -> None:
    deploy = deployed(tmp_path, "llamaindex")
    with client_of(deploy) as client:
        records, _ = client.scroll("corpus", limit=1000, with_payload=True)
        payloads: dict[str, dict[str, Any]] = {str(r.id): r.payload or {} for r in records}
        for payload in payloads.values():
            assert payload["doc_id"] == payload["ref_doc_id"] == payload["document_id"]
            assert payload["_node_type"] == "TextNode"
            assert "metadata" not in payload
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = LlamaIndexStore(client=client, collection_name="corpus")
            # LlamaIndex's own query (no filter): every node is its chunk, of its document
            found = store.query(
                VectorStoreQuery(
                    query_embedding=list(EMBEDDER.embed([QUERY])[0]), similarity_top_k=100
                )
            )
        assert found.nodes is not None
        assert len(found.nodes) == len(records)
        for node in found.nodes:
            assert node.node_id in payloads
            assert node.ref_doc_id == payloads[node.node_id]["doc_id"]
            assert node.get_content().startswith("#")  # the text, not the serialised node
        retriever = llamaindex.VersionAwareRetriever.from_vector_store(
            store,
            embed_model=llamaindex.EmbedderEmbedding(EMBEDDER),
            settings=deploy.settings,
            similarity_top_k=100,
        )
        hits = retriever.retrieve(QUERY)
        assert {h.node.ref_doc_id for h in hits} == {"hb:expenses-v2"}
        assert {h.node.metadata["version_state"] for h in hits} == {"current"}
    code, data = deploy.json("search", QUERY)
    assert code == 0
    assert {h["doc_id"] for h in data["hits"]} == {"hb:expenses-v2"}
    assert all(h["text"].startswith("#") for h in data["hits"])  # not the node's JSON


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[index]\npath = "q"\nlayout = "langchain"\n[bootstrap]\npreset = "llamaindex"\n',
            "index.layout 'langchain' differs from bootstrap.preset 'llamaindex'",
        ),
        ('[index]\npath = "q"\nlayout = "haystack"\n', "index.layout"),
    ],
)
def test_a_layout_that_cannot_be_is_refused(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(Exception, match=message.replace("(", r"\(")):
        load_settings(config, environ={})


def test_a_layout_sets_the_keys_and_the_old_preset_name_still_works(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    for text in ('[index]\nlayout = "langchain"\n', '[bootstrap]\npreset = "langchain"\n'):
        config.write_text(text, encoding="utf-8")
        settings = load_settings(config, environ={})
        index = settings.index
        assert (index.layout, settings.bootstrap.preset) == ("langchain", "langchain")
        assert (index.payload_prefix, index.text_key) == ("metadata.", "page_content")
        assert index.key_map.path("doc_id") == "metadata.source"
    config.write_text('[index]\nlayout = "llamaindex"\ntext_key = "text"\n', encoding="utf-8")
    index = load_settings(config, environ={}).index
    assert (index.text_key, index.payload_prefix) == ("text", "")  # explicit keys win
    assert json.loads(json.dumps(index.keys)) == {}
