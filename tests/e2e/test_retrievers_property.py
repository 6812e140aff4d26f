"""The retrievers' promise, as a property: a retriever built ONCE, at the start, returns at
every later instant exactly the chunks ``default_filter(as_of=that instant)`` admits.

Each example is a real vault (families of two versions, the second coming into force at a
random instant, before or after the start), read by the real vault connector, ingested by the
reference ingestion into a real SQLite table and Qdrant (qdrant-client's in-memory local
mode; one collection, or a split store of two), repaired by the real engine. Then a random
history: the clock moves on (a successor's ``effective_from`` passes with no run in between),
notes change state or are edited in place (quarantined at the next run), runs apply, earlier
runs are rolled back, and in the split store versions move between the collections. After
each step the LangChain and the LlamaIndex retriever, both built before the first step, are
asked; their answer is set against a scroll of every collection with ``default_filter`` built
at that instant: the same points, none superseded, retired, draft or quarantined, and a hit for
every family whose row in the table is in force then. The historical route (``as_of`` a
random instant, ``include_historical=True``) is set against the same scroll over both
collections.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import migrated_sqlite
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from qdrant_client import QdrantClient

from connectors.vault import VaultSource
from reconciler import default_filter
from reconciler.clock import ManualClock
from reconciler.embedding import HashingEmbedder
from reconciler.errors import ReconcilerError
from reconciler.filters import filter_terms
from reconciler.ingesting import Ingestor
from reconciler.payload import DEFAULT_KEYS, payload_for
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.split import SplitChunkIndex
from reconciler.stores.sql import SqlDocumentTable
from reconciler.writing.rollback import rollback

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langchain_qdrant import QdrantVectorStore as LangChainStore
    from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaIndexStore

    from reconciler.integrations import langchain, llamaindex

START = datetime(2026, 6, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
DIM = 8
FAMILIES = ("expenses", "travel", "leave")
NOTES = tuple(f"{family}-v{n}" for family in FAMILIES for n in (1, 2))
STATES = ("current", "superseded", "retired", "draft", "pending")
EVERYTHING = 10_000  # k above any corpus here: every admitted chunk comes back
QUERY = "policy section"

#: One step of a history.
STEP = st.one_of(
    st.tuples(st.just("advance"), st.floats(0.01, 400), st.just(None)),
    st.tuples(st.just("status"), st.sampled_from(NOTES), st.sampled_from(STATES)),
    st.tuples(st.just("edit"), st.sampled_from(NOTES), st.just(None)),
    st.tuples(st.just("run"), st.just(None), st.just(None)),
    st.tuples(st.just("rollback"), st.integers(0, 10), st.just(None)),
)


def note_text(name: str, *, status: str, start: datetime, edits: int = 0) -> str:
    family, version = name.rsplit("-v", 1)
    front = [
        f"id: {name}",
        f"family: {family}",
        f"version: {version}",
        f"status: {status}",
        f"effective_from: {start.strftime('%Y-%m-%dT%H:%M:%SZ')}",
    ]
    body = f"# {family} policy v{version}\n\nThe {family} policy section, edition {version}."
    body += "".join(f"\n\nAmended ({n})." for n in range(edits))
    return "---\n" + "\n".join(front) + "\n---\n" + body + "\n"


@dataclass
class World:
    """One deployment in one process: the vault, the stores, the engine and a clock."""

    root: Path
    clock: ManualClock
    client: QdrantClient
    table: SqlDocumentTable
    index: Any
    engine: Reconciler
    collections: tuple[str, ...]
    starts: dict[str, datetime]
    statuses: dict[str, str]
    edits: dict[str, int]
    runs: list[str]

    def write(self, name: str) -> None:
        family = name.rsplit("-v", 1)[0]
        path = self.root / "vault" / family / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = note_text(
            name, status=self.statuses[name], start=self.starts[name], edits=self.edits[name]
        )
        path.write_text(text, encoding="utf-8")

    def apply(self) -> None:
        guard = Guard(max_changed_fraction=1.0, max_moved_fraction=1.0)
        report = self.engine.run(Options(mode="apply", now=self.clock.now(), guard=guard))
        assert report.error is None, report.error
        assert not report.refused
        if any(report.writes().values()):
            self.runs.append(report.run_id)

    def roll_back(self, pick: int) -> None:
        if not self.runs:
            return
        run_id = self.runs[pick % len(self.runs)]
        try:
            result = rollback(table=self.table, index=self.index, run_id=run_id, cascade=True)
        except ReconcilerError:  # nothing left to undo
            return
        if result.run_id:
            self.runs.append(result.run_id)


@contextmanager
def world(*, split: bool, successor_offsets: list[float]) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="retrievers-property-"))
    clock = ManualClock(START)
    client = QdrantClient(location=":memory:")
    try:
        shutil.copy(migrated_sqlite(), root / "table.db")
        table = SqlDocumentTable.from_url(f"sqlite:///{root / 'table.db'}")
        main = QdrantChunkIndex(client, collection="corpus")
        index: Any = main
        collections: tuple[str, ...] = ("corpus",)
        if split:
            index = SplitChunkIndex(main, QdrantChunkIndex(client, collection="corpus_archive"))
            collections = ("corpus", "corpus_archive")
        starts, statuses = {}, {}
        for family, offset in zip(FAMILIES, successor_offsets, strict=True):
            starts[f"{family}-v1"] = START - 300 * DAY
            statuses[f"{family}-v1"] = "current"
            starts[f"{family}-v2"] = START + offset * DAY
            statuses[f"{family}-v2"] = "current" if offset <= 0 else "pending"
        source = VaultSource("hb", root / "vault", clock=clock.now)
        engine = Reconciler(table=table, index=index, sources=[source], clock=clock)
        state = World(
            root,
            clock,
            client,
            table,
            index,
            engine,
            collections,
            starts,
            statuses,
            dict.fromkeys(NOTES, 0),
            [],
        )
        for name in NOTES:
            state.write(name)
        report = Ingestor(table=table, index=index, embedder=HashingEmbedder(dim=DIM)).run(
            [source], now=clock.now()
        )
        assert report.ok
        state.apply()
        try:
            yield state
        finally:
            table.close()
    finally:
        client.close()
        shutil.rmtree(root, ignore_errors=True)


def retrievers(state: World) -> dict[str, Any]:
    """Both frameworks' retrievers over the deployment, each built from the framework's own
    Qdrant store, once."""
    archive = "corpus_archive" if len(state.collections) == 2 else None
    embedder = HashingEmbedder(dim=DIM)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # local mode: payload indexes do nothing
        lc_store = LangChainStore(
            client=state.client,
            collection_name="corpus",
            embedding=langchain.EmbedderEmbeddings(embedder),
            content_payload_key="text",
        )
        li_store = LlamaIndexStore(client=state.client, collection_name="corpus")
    return {
        "langchain": langchain.VersionAwareRetriever.from_vector_store(
            lc_store, archive=archive, keys=DEFAULT_KEYS, k=EVERYTHING, clock=state.clock
        ),
        "llamaindex": llamaindex.VersionAwareRetriever.from_vector_store(
            li_store,
            embed_model=llamaindex.EmbedderEmbedding(embedder),
            archive=archive,
            similarity_top_k=EVERYTHING,
            clock=state.clock,
        ),
    }


def ask(
    retriever: Any, *, as_of: datetime | None = None, historical: bool = False
) -> dict[str, dict[str, Any]]:
    """Point id -> the version keys of each chunk a retriever returns."""
    if isinstance(retriever, langchain.VersionAwareRetriever):
        docs = retriever.invoke(QUERY, as_of=as_of, include_historical=historical)
        return {d.metadata["_id"]: d.metadata for d in docs}
    retriever.as_of, retriever.include_historical = as_of, historical
    try:
        nodes = retriever.retrieve(QUERY)
    finally:
        retriever.as_of, retriever.include_historical = None, False
    return {n.node.node_id: n.node.metadata for n in nodes}


def admitted(state: World, *, as_of: datetime, historical: bool = False) -> set[str]:
    """Every point of every collection that the filter built at ``as_of`` admits."""
    found: set[str] = set()
    for name in state.collections:
        if not state.client.collection_exists(name):
            continue
        points, _ = state.client.scroll(
            name,
            scroll_filter=default_filter(as_of, historical),
            limit=EVERYTHING,
            with_payload=False,
        )
        found |= {str(p.id) for p in points}
    return found


def families_in_force(state: World, at: datetime) -> set[str]:
    terms = filter_terms(at)
    return {
        row.doc_family_id
        for row in state.table.iter_documents()
        if row.chunk_count and terms.admits(payload_for(row))
    }


def observe(state: World, built: dict[str, Any], historical_at: datetime) -> None:
    now = state.clock.now()
    wanted = admitted(state, as_of=now)
    in_force = families_in_force(state, now)
    history = admitted(state, as_of=historical_at, historical=True)
    for framework, retriever in built.items():
        got = ask(retriever)
        assert set(got) == wanted, (framework, now)
        for metadata in got.values():
            assert metadata["version_state"] in ("current", "unknown", "pending"), metadata
            assert metadata.get("quarantined") is not True, metadata
        assert {m["doc_family_id"] for m in got.values()} >= in_force, (framework, now)
        then = ask(retriever, as_of=historical_at, historical=True)
        assert set(then) == history, (framework, historical_at)
        assert all(m.get("quarantined") is not True for m in then.values())


def play(split: bool, offsets: list[float], steps: list[tuple[str, Any, Any]], back: float) -> int:
    """Play the steps, observing after each; how many points the archive holds at the end."""
    with world(split=split, successor_offsets=offsets) as state:
        built = retrievers(state)  # once, before anything happens
        observe(state, built, START - back * DAY)
        for what, arg, value in steps:
            if what == "advance":
                state.clock.advance(arg * DAY.total_seconds())
            elif what == "status":
                state.statuses[arg] = value
                state.write(arg)
            elif what == "edit":
                state.edits[arg] += 1
                state.write(arg)
            elif what == "run":
                state.apply()
            else:
                state.roll_back(arg)
            observe(state, built, state.clock.now() - back * DAY)
        if not split or not state.client.collection_exists("corpus_archive"):
            return 0
        return state.client.count("corpus_archive").count


@pytest.mark.parametrize("split", [False, True], ids=["one-collection", "split-store"])
@settings(max_examples=examples(8))
@given(
    offsets=st.lists(st.floats(-200, 200), min_size=3, max_size=3),
    steps=st.lists(STEP, min_size=2, max_size=8),
    back=st.floats(0, 400),
)
def test_a_retriever_built_once_serves_what_the_filter_of_the_instant_admits(
    split: bool, offsets: list[float], steps: list[tuple[str, Any, Any]], back: float
) -> None:
    play(split, offsets, steps, back)


@pytest.mark.parametrize("split", [False, True], ids=["one-collection", "split-store"])
def test_a_handover_then_a_run_then_a_rollback(split: bool) -> None:
    """The shape the issue reported: a successor's start passes with no run (the replaced
    version must stop at once), a run, an in-place edit quarantined, a rollback."""
    archived = play(
        split,
        [5, -20, 40],
        [
            ("advance", 6, None),
            ("run", None, None),
            ("edit", "travel-v2", None),
            ("run", None, None),
            ("status", "leave-v1", "retired"),
            ("run", None, None),
            ("rollback", 1, None),
            ("advance", 40, None),
        ],
        100,
    )
    assert bool(archived) == split  # the split store moved the replaced versions
