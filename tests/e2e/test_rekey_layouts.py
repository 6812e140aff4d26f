"""Issue 34, re-keying a collection written in a framework's layout (``[index] layout``):
every payload key the framework reads its document id from takes the new id (LangChain's
``metadata.source``; LlamaIndex's ``doc_id``, ``document_id``, ``ref_doc_id`` and the source
of the node serialised under ``_node_content``), so both the framework's own store and the
version-aware retrievers name the new ids (SQLite, Qdrant local mode)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from acceptance_kit import Deployment, body, day
from test_layouts import EMBEDDER, QUERY, client_of

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langchain_qdrant import QdrantVectorStore as LangChainStore
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaIndexStore

    from reconciler.integrations import langchain, llamaindex

NEW = {"hb:POL-1", "hb:POL-2"}


def rekeyed(root: Path, layout: str) -> Deployment:
    """Expenses v1 (superseded) and v2 (current) ingested in ``layout`` under path ids, then
    re-keyed to the ids their ``ref`` carries."""
    deploy = Deployment(root)
    text = deploy.config.read_text(encoding="utf-8")
    deploy.config.write_text(
        text.replace('collection = "corpus"', f'collection = "corpus"\nlayout = "{layout}"'),
        encoding="utf-8",
    )
    for v in (1, 2):
        deploy.note(
            f"expenses-v{v}",
            body(f"expenses v{v}", f"expenses meals rule of version {v}."),
            ref=f"POL-{v}",
            family="expenses",
            version=str(v),
            status="current" if v == 2 else "superseded",
            superseded_by=None if v == 2 else "expenses-v2",
            effective_from=day(-300 + 100 * v),
        )
    deploy.init_ingest()
    text = deploy.config.read_text(encoding="utf-8")
    deploy.config.write_text(
        text.replace("[guard]", '[sources.options.fields]\nid = "ref"\n[guard]'), encoding="utf-8"
    )
    code, done = deploy.json("rekey")
    assert code == 0, done
    assert {p["new_id"] for p in done["pairs"]} == NEW
    with client_of(deploy) as client:
        records, _ = client.scroll("corpus", limit=100, with_payload=True)
    assert records
    for record in records:  # (the serialised node is JSON in JSON: its ids are in there too)
        assert "hb:expenses-v" not in json.dumps(record.payload), record.payload
    return deploy


def test_langchain_reads_the_new_ids(tmp_path: Path) -> None:
    deploy = rekeyed(tmp_path, "langchain")
    with client_of(deploy) as client, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = LangChainStore(
            client=client,
            collection_name="corpus",
            embedding=langchain.EmbedderEmbeddings(EMBEDDER),
        )
        assert {d.metadata["source"] for d in store.similarity_search(QUERY, k=100)} == NEW
        retriever = langchain.VersionAwareRetriever.from_vector_store(
            store, settings=deploy.settings, k=100
        )
        assert {d.metadata["source"] for d in retriever.invoke(QUERY)} == {"hb:POL-2"}


def test_llamaindex_reads_the_new_ids(tmp_path: Path) -> None:
    deploy = rekeyed(tmp_path, "llamaindex")
    with client_of(deploy) as client, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = LlamaIndexStore(client=client, collection_name="corpus")
        found = store.query(
            VectorStoreQuery(query_embedding=list(EMBEDDER.embed([QUERY])[0]), similarity_top_k=9)
        )
        assert found.nodes
        assert {node.ref_doc_id for node in found.nodes} == NEW
        retriever = llamaindex.VersionAwareRetriever.from_vector_store(
            store,
            embed_model=llamaindex.EmbedderEmbedding(EMBEDDER),
            settings=deploy.settings,
            similarity_top_k=9,
        )
        hits = retriever.retrieve(QUERY)
        assert {h.node.ref_doc_id for h in hits} == {"hb:POL-2"}
        assert {h.node.metadata["doc_id"] for h in hits} == {"hb:POL-2"}
