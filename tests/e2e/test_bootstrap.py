"""``reconciler bootstrap``: adopting collections built by LangChain's and LlamaIndex's own
Qdrant stores (their real payload shapes, local mode, fake embeddings: no model, no network),
then reconciling them with a payload-only ``apply`` that leaves every vector and text as it was.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from qdrant_client import QdrantClient, models
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from reconciler.cli import cli
from reconciler.errors import ConfigError
from reconciler.settings import load_settings
from reconciler.stores.sql.schema import DocumentRow, IdentityRow

OPEN_END = "9999-12-31T00:00:00Z"
DIM = 8


# -- plumbing ---------------------------------------------------------------------------------


def write_config(root: Path, collection: str, bootstrap: str) -> Path:
    config = root / "reconciler.toml"
    config.write_text(
        "\n".join(
            [
                "[table]",
                'url = "sqlite:///reconciler.db"',
                "[index]",
                'path = "qdrant"',
                f'collection = "{collection}"',
                "[guard]",
                "max_changed_fraction = 1.0",
                "[bootstrap]",
                bootstrap,
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return config


def run(config: Path, *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(cli, ["--config", str(config), "--format", "json", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    try:
        return result.exit_code, json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not JSON (exit {result.exit_code}): {result.output!r}") from exc


def points(root: Path, collection: str) -> dict[str, tuple[list[float], dict[str, Any]]]:
    """Every point, physically: id -> (vector, whole payload)."""
    client = QdrantClient(path=str(root / "qdrant"))
    try:
        records, _ = client.scroll(collection, limit=10_000, with_payload=True, with_vectors=True)
    finally:
        client.close()
    out = {}
    for record in records:
        assert isinstance(record.vector, list)
        out[str(record.id)] = (list(record.vector), dict(record.payload or {}))
    return out


def rows(root: Path) -> dict[str, DocumentRow]:
    engine = create_engine(f"sqlite:///{root / 'reconciler.db'}")
    try:
        with Session(engine) as session:
            return {r.doc_id: r for r in session.scalars(select(DocumentRow))}
    finally:
        engine.dispose()


def identities(root: Path) -> set[tuple[str, str, str]]:
    engine = create_engine(f"sqlite:///{root / 'reconciler.db'}")
    try:
        with Session(engine) as session:
            return {
                (r.source, r.source_key, r.doc_family_id)
                for r in session.scalars(select(IdentityRow))
            }
    finally:
        engine.dispose()


def unmapped(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [entry for entry in data["unmapped"] if entry["kind"] == kind]


def reconcile_and_compare(
    root: Path, config: Path, collection: str, text_key: str
) -> tuple[dict[str, Any], dict[str, tuple[list[float], dict[str, Any]]]]:
    """``apply`` after bootstrap; assert vectors and text are untouched; return the after-state."""
    before = points(root, collection)
    code, report = run(config, "apply")
    assert code == 0, report
    assert report["writes"]["points"] == len(before)
    after = points(root, collection)
    assert after.keys() == before.keys()
    for pid, (vector, payload) in before.items():
        assert after[pid][0] == vector, f"vector of {pid} changed"
        assert json.dumps(after[pid][1][text_key]) == json.dumps(payload[text_key])
    return report, after


def assert_converged(config: Path) -> None:
    """A second bootstrap creates nothing; the reconciled corpus plans no write."""
    code, again = run(config, "bootstrap")
    assert code == 0, again
    assert again["created"] == 0
    assert again["already_registered"] == again["documents_seen"]
    code, plan = run(config, "plan")
    assert code == 0, plan
    assert not any(plan["writes"].values()), plan["writes"]
    assert plan["plan"]["rows"] == []
    assert plan["plan"]["payloads"] == []
    code, check = run(config, "check")
    repairing = [f for f in check["findings"] if not f["action"].startswith("none")]
    assert repairing == [], repairing
    assert not [f for f in check["findings"] if f["check"] == "payload"]


# -- LangChain --------------------------------------------------------------------------------

#: (source, chunks, metadata beyond "source") of the LangChain-built corpus.
LANGCHAIN_DOCS: list[tuple[str | None, list[dict[str, Any]]]] = [
    (
        "handbook/expenses-2023.md",
        [{"family": "expenses", "version_state": "superseded", "doc_version": 1}] * 2,
    ),
    (
        "handbook/expenses-2024.md",
        [
            {
                "family": "expenses",
                "version_state": "current",
                "doc_version": 2,
                "effective_from": "2024-01-01T00:00:00Z",
            }
        ]
        * 3,
    ),
    ("handbook/onboarding.md", [{}, {}]),
    (
        "handbook/runbook.md",
        [{"version_state": "current"}, {"version_state": "current"}, {"version_state": "draft"}],
    ),
    ("handbook/datasheet.md", [{"version_state": "obsolete", "effective_from": "last spring"}]),
    (None, [{"note": "a chunk someone added by hand"}]),
]


@pytest.fixture
def langchain_corpus(tmp_path: Path) -> Path:
    """A collection written by ``langchain_qdrant.QdrantVectorStore.add_texts``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        embeddings = pytest.importorskip("langchain_core.embeddings")
        langchain_qdrant = pytest.importorskip("langchain_qdrant")
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        client.create_collection(
            "lc", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        )
        store = langchain_qdrant.QdrantVectorStore(
            client=client,
            collection_name="lc",
            embedding=embeddings.DeterministicFakeEmbedding(size=DIM),
        )
        texts, metadatas = [], []
        for source, chunks in LANGCHAIN_DOCS:
            for n, extra in enumerate(chunks):
                texts.append(f"{source or 'loose'} part {n}: some policy text")
                metadatas.append({**({"source": source} if source else {}), **extra})
        store.add_texts(texts, metadatas=metadatas)
    finally:
        client.close()
    return tmp_path


def test_langchain_collection_is_adopted_then_reconciled(langchain_corpus: Path) -> None:
    root = langchain_corpus
    config = write_config(root, "lc", 'preset = "langchain"\nfamily_key = "metadata.family"')
    original = points(root, "lc")
    assert all(set(p) == {"page_content", "metadata"} for _, p in original.values())

    code, dry = run(config, "bootstrap", "--dry-run")
    assert code == 0, dry
    assert dry["created"] == 5
    assert dry["run_id"] is None
    assert not (root / "reconciler.db").exists()  # a dry run creates no table either

    code, data = run(config, "bootstrap")
    assert code == 0, data
    assert data["layout"]["doc_id"] == "metadata.source"
    assert data["chunks_scanned"] == 12
    assert data["created"] == 5
    assert data["families"] == 4
    table = rows(root)
    assert {d: (r.version_state, r.doc_family_id, r.doc_version) for d, r in table.items()} == {
        "handbook/expenses-2023.md": ("superseded", "expenses", 1),
        "handbook/expenses-2024.md": ("current", "expenses", 2),
        "handbook/onboarding.md": ("unknown", "handbook/onboarding.md", 1),
        "handbook/runbook.md": ("current", "handbook/runbook.md", 1),
        "handbook/datasheet.md": ("unknown", "handbook/datasheet.md", 1),
    }
    for doc_id, row in table.items():
        assert row.source == "adopted"
        assert row.source_key == doc_id
        assert row.chunk_count == len(dict(LANGCHAIN_DOCS)[doc_id])
    assert table["handbook/expenses-2024.md"].effective_from is not None
    assert table["handbook/datasheet.md"].effective_from is None
    assert ("adopted", "handbook/expenses-2023.md", "expenses") in identities(root)
    # What could not be mapped is said, not guessed at silently.
    (loose,) = unmapped(data, "no_doc_id")
    assert loose["points"] == 1
    (conflict,) = unmapped(data, "conflicting_values")
    assert conflict["doc_id"] == "handbook/runbook.md"
    assert conflict["field"] == "version_state"
    assert conflict["values"] == {"current": 2, "draft": 1}
    assert conflict["chosen"] == "current"
    invalid = {(e["doc_id"], e["field"]) for e in unmapped(data, "invalid_value")}
    assert invalid == {
        ("handbook/datasheet.md", "version_state"),
        ("handbook/datasheet.md", "effective_from"),
    }
    assert points(root, "lc") == original  # bootstrap never writes a payload

    _, after = reconcile_and_compare(root, config, "lc", "page_content")
    for pid, (_, payload) in after.items():
        assert set(payload) == {"page_content", "metadata"}  # nothing written at the top level
        metadata = payload["metadata"]
        assert metadata.get("source") == original[pid][1]["metadata"].get("source")
        row = table.get(metadata.get("source", ""))
        if row is None:  # the loose chunk: quarantined as an orphan, never deleted
            assert metadata["quarantined"] is True
            assert metadata["quarantine_reason"] == "orphan_chunks"
            continue
        assert metadata["version_state"] == row.version_state
        assert metadata["doc_family_id"] == row.doc_family_id
        assert metadata["doc_version"] == row.doc_version
        assert metadata["effective_to"] == OPEN_END
        assert metadata["quarantined"] is False
        assert "family" in metadata or row.doc_family_id == row.doc_id  # own keys kept
    assert_converged(config)


def test_adopted_rows_are_declared_by_their_own_ids_and_a_prefixed_id_says_so(
    langchain_corpus: Path,
) -> None:
    """docs/adopting.md: a row adopted by bootstrap keeps the collection's id (issue 34: the
    doc's ``adopted:X`` failed with a message that said ids are '<source>:<id>')."""
    config = write_config(langchain_corpus, "lc", 'preset = "langchain"')
    assert run(config, "bootstrap")[0] == 0
    old, new = "handbook/datasheet.md", "handbook/onboarding.md"
    code, refused = run(config, "declare", "--supersede", f"adopted:{old}", "--by", new)
    assert code == 1
    assert refused["error"] == "undeclarable"
    assert f"did you mean {old!r}?" in refused["message"]
    code, data = run(config, "declare", "--supersede", old, "--by", new)
    assert code == 0, data
    assert rows(langchain_corpus)[old].superseded_by == new


# -- LlamaIndex -------------------------------------------------------------------------------


@pytest.fixture
def llamaindex_corpus(tmp_path: Path) -> Path:
    """A collection written by ``llama_index.vector_stores.qdrant.QdrantVectorStore.add``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schema = pytest.importorskip("llama_index.core.schema")
        qdrant_store = pytest.importorskip("llama_index.vector_stores.qdrant")
    source = schema.NodeRelationship.SOURCE

    def node(n: int, doc: str | None, **metadata: Any) -> Any:
        relationships = {source: schema.RelatedNodeInfo(node_id=doc)} if doc else {}
        return schema.TextNode(
            text=f"{doc} passage {n}",
            embedding=[float((n + i) % 5) + 0.5 for i in range(DIM)],
            metadata=metadata,
            relationships=relationships,
        )

    nodes = [
        node(0, "salary-bands-2023", version_state="retired", doc_family_id="salary-bands"),
        node(1, "salary-bands-2023", version_state="retired", doc_family_id="salary-bands"),
        node(2, "salary-bands-2024", version_state="current", doc_family_id="salary-bands"),
        node(3, "salary-bands-2024", version_state="current", doc_family_id="salary-bands"),
        node(4, "deploy-runbook", doc_class="ops"),
        node(5, "deploy-runbook", doc_class="ops", effective_to="not a date"),
        node(6, None, topic="stray"),
    ]
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        with warnings.catch_warnings():  # local mode warns that payload indexes do nothing
            warnings.simplefilter("ignore")
            store = qdrant_store.QdrantVectorStore(client=client, collection_name="li")
            store.add(nodes)
    finally:
        client.close()
    return tmp_path


def test_suggest_takes_the_source_bootstrap_registered_the_rows_under(
    langchain_corpus: Path,
) -> None:
    """adopting.md: `reconciler suggest --class X` "or --source NAME", and `--vectors` for "a
    collection adopted by bootstrap with no source to read bodies from". The adopted rows'
    source is `[bootstrap] source` (`adopted`), which no `[[sources]]` entry names: `suggest
    --source adopted` was refused as "no source named 'adopted' in the config" (exit 1), so
    the adopted rows could not be scoped apart from the rows of configured sources."""
    config = write_config(langchain_corpus, "lc", 'preset = "langchain"')
    assert run(config, "bootstrap")[0] == 0
    code, everything = run(config, "suggest", "--no-bodies")
    assert code == 0, everything
    code, adopted = run(config, "suggest", "--no-bodies", "--source", "adopted")
    assert code == 0, adopted
    assert adopted["documents"] == everything["documents"] > 0
    code, refused = run(config, "suggest", "--source", "nowhere")
    assert code == 1
    assert "adopted" in refused["message"]


def test_a_family_key_no_chunk_holds_is_said(langchain_corpus: Path) -> None:
    """`[bootstrap] family_key` names the payload path of a family id. Mistyped (or a path
    no chunk carries), every document was registered in a family of its own and the output
    said nothing of it: a configuration that reads nothing of a field must say so."""
    config = write_config(
        langchain_corpus, "lc", 'preset = "langchain"\nfamily_key = "metadata.serie"'
    )
    code, data = run(config, "bootstrap", "--dry-run")
    assert code == 0
    (unread,) = [u for u in data["unmapped"] if u["kind"] == "family_key_unread"]
    assert "'metadata.serie'" in unread["message"]


def test_llamaindex_collection_is_adopted_then_reconciled(llamaindex_corpus: Path) -> None:
    root = llamaindex_corpus
    config = write_config(root, "li", 'preset = "llamaindex"')
    original = points(root, "li")
    assert all("_node_content" in p and "ref_doc_id" in p for _, p in original.values())

    code, data = run(config, "bootstrap")
    assert code == 0, data
    assert data["layout"] == {
        "payload_prefix": "",
        "text_key": "_node_content",
        "doc_id": "doc_id",
        "family": "doc_family_id",
    }
    assert data["chunks_scanned"] == 7
    assert data["created"] == 3
    table = rows(root)
    assert {d: (r.version_state, r.doc_family_id, r.doc_class) for d, r in table.items()} == {
        "salary-bands-2023": ("retired", "salary-bands", None),
        "salary-bands-2024": ("current", "salary-bands", None),
        "deploy-runbook": ("unknown", "deploy-runbook", "ops"),
    }
    assert table["deploy-runbook"].effective_to.year == 9999
    assert [e["points"] for e in unmapped(data, "no_doc_id")] == [1]
    assert {(e["doc_id"], e["field"]) for e in unmapped(data, "invalid_value")} == {
        ("deploy-runbook", "effective_to")
    }

    _, after = reconcile_and_compare(root, config, "li", "_node_content")
    for pid, (_, payload) in after.items():
        for key in ("doc_id", "ref_doc_id", "document_id", "_node_type"):
            assert payload.get(key) == original[pid][1].get(key)
        row = table.get(payload.get("doc_id") or "")
        if row is None:
            assert payload["quarantined"] is True
            continue
        assert payload["version_state"] == row.version_state
        assert payload["doc_family_id"] == row.doc_family_id
        assert payload["effective_to"] == OPEN_END
        assert "metadata" not in payload  # flattened, as LlamaIndex lays it out
    assert_converged(config)


# -- the framework's collection, adopted by its layout, read by its retriever -------------------


def served_doc_ids(root: Path, collection: str, config: Path) -> set[str]:
    """The documents ``default_filter()`` admits in the collection now, laid out as configured."""
    from reconciler import default_filter  # noqa: PLC0415

    keys = load_settings(config, environ={}).index.key_map
    client = QdrantClient(path=str(root / "qdrant"))
    try:
        found, _ = client.scroll(
            collection, scroll_filter=default_filter(keys=keys), limit=10_000, with_payload=True
        )
    finally:
        client.close()
    return {keys.from_point(p.payload)["doc_id"] for p in found}


@pytest.mark.parametrize(
    ("framework", "collection", "bootstrap"),
    [("langchain", "lc", 'family_key = "metadata.family"'), ("llamaindex", "li", "")],
)
def test_adopted_by_index_layout_and_read_by_the_version_aware_retriever(
    request: pytest.FixtureRequest, framework: str, collection: str, bootstrap: str
) -> None:
    """A collection the framework wrote: ``[index] layout`` alone (no key mapping by hand),
    ``bootstrap``, ``apply``; the framework's own store then feeds the retriever, which
    returns exactly what the filter admits, never a superseded, retired or orphan chunk."""
    root: Path = request.getfixturevalue(f"{framework}_corpus")
    config = write_config(root, collection, bootstrap)
    config.write_text(
        config.read_text(encoding="utf-8").replace(
            f'collection = "{collection}"', f'collection = "{collection}"\nlayout = "{framework}"'
        ),
        encoding="utf-8",
    )
    code, data = run(config, "bootstrap")
    assert code == 0, data
    assert data["preset"] == framework
    reconcile_and_compare(root, config, collection, load_settings(config).index.text_key)
    assert_converged(config)
    wanted = served_doc_ids(root, collection, config)
    assert wanted
    assert not wanted & {"handbook/expenses-2023.md", "salary-bands-2023"}
    settings = load_settings(config, environ={})
    client = QdrantClient(path=str(root / "qdrant"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if framework == "langchain":
                from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: PLC0415
                from langchain_qdrant import QdrantVectorStore  # noqa: PLC0415

                from reconciler.integrations.langchain import VersionAwareRetriever  # noqa: PLC0415

                store = QdrantVectorStore(
                    client=client,
                    collection_name=collection,
                    embedding=DeterministicFakeEmbedding(size=DIM),
                )
                retriever = VersionAwareRetriever.from_vector_store(store, settings=settings, k=100)
                got = {d.metadata["source"] for d in retriever.invoke("policy")}
            else:
                from llama_index.core import MockEmbedding  # noqa: PLC0415
                from llama_index.vector_stores.qdrant import QdrantVectorStore  # noqa: PLC0415

                from reconciler.integrations import llamaindex  # noqa: PLC0415

                li_store = QdrantVectorStore(client=client, collection_name=collection)
                li = llamaindex.VersionAwareRetriever.from_vector_store(
                    li_store,
                    embed_model=MockEmbedding(embed_dim=DIM),
                    settings=settings,
                    similarity_top_k=100,
                )
                got = {h.node.ref_doc_id for h in li.retrieve("policy")}
    finally:
        client.close()
    assert got == wanted


# -- settings ---------------------------------------------------------------------------------


def test_presets_set_index_defaults_and_explicit_config_wins(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[bootstrap]\npreset = "langchain"\n', encoding="utf-8")
    index = load_settings(config, environ={}).index
    assert (index.payload_prefix, index.text_key, index.keys) == (
        "metadata.",
        "page_content",
        {"doc_id": "source"},
    )
    config.write_text(
        '[index]\ntext_key = "body"\n[bootstrap]\npreset = "langchain"\ndoc_id_key = "url"\n',
        encoding="utf-8",
    )
    index = load_settings(config, environ={}).index
    assert (index.payload_prefix, index.text_key, index.keys) == (
        "metadata.",
        "body",
        {"doc_id": "url"},
    )
    index = load_settings(config, environ={"RECONCILER_BOOTSTRAP__PRESET": "native"}).index
    assert (index.payload_prefix, index.keys) == ("", {"doc_id": "url"})


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[bootstrap]\npreset = "haystack"\n', "bootstrap.preset"),
        ("[bootstrap]\nfamilykey = 'x'\n", "bootstrap.familykey"),
        ('[bootstrap]\ndoc_id_key = "a.b"\n', "bootstrap.doc_id_key"),
        ('[index.keys]\ndoc_id = "a"\n[bootstrap]\ndoc_id_key = "b"\n', "(top level)"),
    ],
)
def test_bad_bootstrap_settings_are_refused(tmp_path: Path, text: str, where: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, environ={})
    assert where in str(caught.value)


def test_a_missing_collection_is_an_error_not_an_empty_adoption(tmp_path: Path) -> None:
    config = write_config(tmp_path, "nowhere", 'preset = "native"')
    result = CliRunner().invoke(cli, ["--config", str(config), "bootstrap"])
    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_a_dry_run_on_a_missing_collection_creates_nothing(tmp_path: Path) -> None:
    """``bootstrap --dry-run`` writes nothing (adopting.md), so pointing it at a local-mode
    folder that does not exist (a mistyped ``index.path``) must not create that folder, and
    the run that writes must not create the table for a collection it cannot adopt. Before,
    opening the index in local mode created the folder, and the table came first."""
    config = write_config(tmp_path, "docs", 'preset = "langchain"')
    for args in (("bootstrap", "--dry-run"), ("bootstrap",)):
        code, data = run(config, *args)
        assert code == 1
        assert data["error"] == "collection_missing"
        assert "does not exist" in data["message"]
        assert not (tmp_path / "qdrant").exists()
        assert not (tmp_path / "reconciler.db").exists()


def test_native_collection_ids_in_source_form_keep_their_key(tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        client.create_collection(
            "corpus", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        )
        client.upsert(
            "corpus",
            points=[
                models.PointStruct(
                    id=n,
                    vector=[1.0 + n] * DIM,
                    payload={"text": f"part {n}", "doc_id": doc_id, "version_state": state},
                )
                for n, (doc_id, state) in enumerate(
                    [("hb:a.md", "current"), ("hb:a.md", "current"), ("legacy-7", "pending")]
                )
            ],
        )
    finally:
        client.close()
    config = write_config(tmp_path, "corpus", 'source = "hb"')
    code, data = run(config, "bootstrap")
    assert code == 0, data
    assert data["unmapped"] == []
    assert data["created"] == 2
    table = rows(tmp_path)
    assert {d: (r.source, r.source_key, r.version_state) for d, r in table.items()} == {
        "hb:a.md": ("hb", "a.md", "current"),
        "legacy-7": ("hb", "legacy-7", "pending"),
    }
    assert run(config, "bootstrap")[1]["created"] == 0
