"""The promise to a corpus that other writers share: whatever JSON they leave in a chunk's
payload (any managed key, the doc_id, the chunk_id, the content hash, a key of their own; a
number, a text, an object, a list of lists; a key removed), every check reads it without a
crash, one apply converges (a second writes nothing) and every registered document's chunk ends
with its row's payload or quarantined. Over random corpora, on a real SQLite table and the
in-memory index, a real Qdrant Edge shard and qdrant-client's local mode; and on a split store,
where ``split`` and ``--merge`` then move every point whole."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import migrated_table, one_chunk_doc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from qdrant_client import QdrantClient

from reconciler.app import splitting
from reconciler.checks import CHECKS
from reconciler.model import MANAGED_KEYS, ChunkRecord, Document, VersionState
from reconciler.payload import chunk_payload, payload_for, same_payload
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options
from reconciler.settings import Settings
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.split import SplitChunkIndex
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.moving import Mover

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    # (values of the right kind, so a foreign value also lands on another row's or state's)
    st.sampled_from(["current", "superseded", "retired", "2026-01-01T00:00:00Z", "kb:a", "kb:b"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
KEYS = [*MANAGED_KEYS, "doc_id", "chunk_id", "content_hash", "text", "theirs"]
GUARD = Guard(max_changed_fraction=1.0)
CHECKED = frozenset(CHECKS) - {"index"}  # (payload indexes: not this promise's business)


@st.composite
def shared_corpora(draw: st.DrawFn) -> tuple[list[Document], list[dict[str, Any]]]:
    """Three documents of any state, up to two chunks each, each chunk's payload touched by
    another writer at up to three keys (a value of any JSON shape, or the key removed)."""
    docs = [one_chunk_doc(name, draw(st.sampled_from(list(VersionState)))) for name in "abc"]
    payloads = []
    for doc in docs:
        for c in range(draw(st.integers(0, 2))):
            payload = chunk_payload(doc, chunk_id=f"{doc.doc_id}#{c}")
            for key in draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True)):
                if draw(st.booleans()):
                    payload[key] = draw(JSON)
                else:
                    payload.pop(key, None)
            payloads.append(payload)
    return docs, payloads


@contextmanager
def engine(kind: str, rows: list[Document], payloads: list[dict[str, Any]]) -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as folder:
        table = migrated_table(Path(folder) / "t.db")
        client = QdrantClient(path=str(Path(folder) / "q")) if kind == "local" else None
        index: Any = (
            InMemoryChunkIndex()
            if kind == "memory"
            else EdgeChunkIndex(Path(folder) / "e")
            if kind == "edge"
            else QdrantChunkIndex(client, collection="c")  # type: ignore[arg-type]
        )
        index.ensure_collection(dim=2)
        try:
            table.upsert_documents(rows)
            index.upsert_chunks(
                ChunkRecord(n, f"c{n}", f"text {n}", (float(n), 0.5), p)  # type: ignore[arg-type]
                for n, p in enumerate(payloads)
            )
            yield Reconciler(table=table, index=index, sources=[]), table, index
        finally:
            index.close()
            if client is not None:
                client.close()
            table.close()


@pytest.mark.parametrize(("kind", "count"), [("memory", 80), ("edge", 40), ("local", 15)])
def test_whatever_another_writer_leaves_is_checked_and_one_apply_converges(
    kind: str, count: int
) -> None:
    @settings(max_examples=examples(count), deadline=None, suppress_health_check=list(HealthCheck))
    @given(corpus=shared_corpora())
    def holds(corpus: tuple[list[Document], list[dict[str, Any]]]) -> None:
        rows, payloads = corpus
        with engine(kind, rows, payloads) as (runner, table, index):
            runner.run(Options(mode="check", checks=CHECKED))
            runner.run(Options(mode="apply", checks=CHECKED, guard=GUARD))
            again = runner.run(Options(mode="apply", checks=CHECKED, guard=GUARD))
            assert again.to_json()["writes"]["payload"] == 0, [f.to_json() for f in again.findings]
            # (the rows as the apply left them: it may settle a row's state too)
            wanted = {row.doc_id: payload_for(row) for row in table.iter_documents()}
            for state in index.scroll():
                row = wanted.get(state.doc_id) if type(state.doc_id) is str else None
                if state.payload.get("quarantined") is True:
                    continue  # (an orphan, or a chunk its row no longer vouches for)
                assert row is not None, state  # every chunk without a row is quarantined
                assert same_payload({k: state.payload.get(k) for k in MANAGED_KEYS}, row), (
                    state.point_id,
                    state.payload,
                    row,
                )

    holds()


@contextmanager
def split_engine(
    kind: str, rows: list[Document], payloads: list[dict[str, Any]], archived: list[bool]
) -> Iterator[Any]:
    """A split store (two collections of ``kind``), each chunk in the archive where
    ``archived`` says."""
    with tempfile.TemporaryDirectory() as folder:
        table = migrated_table(Path(folder) / "t.db")
        parts: list[Any] = [
            InMemoryChunkIndex(collection=name)
            if kind == "memory"
            else EdgeChunkIndex(Path(folder) / name)
            for name in ("corpus", "corpus_archive")
        ]
        try:
            table.upsert_documents(rows)
            for part in parts:
                part.ensure_collection(dim=2)
            for n, payload in enumerate(payloads):
                record = ChunkRecord(n, f"c{n}", f"text {n}", (float(n), 0.5), payload)  # type: ignore[arg-type]
                parts[archived[n % len(archived)]].upsert_chunks([record])
            split = SplitChunkIndex(*parts)
            yield Reconciler(table=table, index=split, sources=[]), table, split
        finally:
            for part in parts:
                part.close()
            table.close()


def _split_run(table: Any, split: SplitChunkIndex, merge: bool = False) -> int:
    """What ``reconciler split`` (``--merge``) moves, as its run does."""
    run_id = table.start_run(mode="split", actor="test", shard="0/1")
    mover = Mover(table=table, split=split, run_id=run_id, actor="test")
    if merge:
        mover.move_all(to_archive=False, reason="reconciler split --merge")
    else:
        ways = {True: splitting._Way(), False: splitting._Way()}
        for targets in splitting._placements(Settings(), table, split, ways, None):
            for to_archive in (True, False):
                mover.move_targets(targets, to_archive=to_archive)
    mover.finish()
    return mover.moved


@pytest.mark.parametrize(("kind", "count"), [("memory", 60), ("edge", 40)])
def test_on_a_split_store_apply_converges_and_split_and_merge_move_every_point_whole(
    kind: str, count: int
) -> None:
    """The same, on a split store whose chunks start in either collection: one apply converges
    (moves included), ``split`` then finds nothing more to move, and ``--merge`` brings every
    point back to the main collection, each copy confirmed (payload and vector read back)."""

    @settings(max_examples=examples(count), deadline=None, suppress_health_check=list(HealthCheck))
    @given(corpus=shared_corpora(), archived=st.lists(st.booleans(), min_size=1, max_size=6))
    def holds(corpus: tuple[list[Document], list[dict[str, Any]]], archived: list[bool]) -> None:
        rows, payloads = corpus
        with split_engine(kind, rows, payloads, archived) as (runner, table, split):
            guard = Guard(max_changed_fraction=1.0, max_moved_fraction=1.0)
            runner.run(Options(mode="apply", checks=CHECKED, guard=guard))
            again = runner.run(Options(mode="apply", checks=CHECKED, guard=guard))
            written = again.to_json()["writes"]
            assert (written["payload"], written["points"]) == (0, 0), written
            assert _split_run(table, split) == 0
            _split_run(table, split, merge=True)
            assert split.main.count() == len(payloads)
            assert not split.archive.exists() or split.archive.count() == 0
            assert table.verify_audit().ok

    holds()


#: Doubles Qdrant Edge reads back as a neighbour (the first two met by the property above).
ROUNDED = [1.8716251708340478e102, 123456789.12345679, 4.520087423683831e186]


def test_a_payload_float_edge_rounds_on_each_write_still_moves() -> None:
    """Regression: ``split`` refused every move of a point whose payload held such a float
    (``IndexWriteError``: the copy did not read back as read), on every run."""
    doc = one_chunk_doc("a", VersionState.SUPERSEDED)
    payload = {**chunk_payload(doc, chunk_id="kb:a#0"), "score": ROUNDED, "doc_class": ROUNDED[0]}
    with split_engine("edge", [doc], [payload], [False]) as (_runner, table, split):
        (first,) = split.main.read_points([0])
        assert first.payload["score"] != ROUNDED  # (Edge's own rounding, as ingested)
        assert _split_run(table, split) == 1  # to the archive (a superseded version)
        assert _split_run(table, split, merge=True) == 1
        (back,) = split.main.read_points([0])
        for was, now in zip(first.payload["score"], back.payload["score"], strict=True):
            assert math.isclose(was, now, rel_tol=4 * 2**-52)
