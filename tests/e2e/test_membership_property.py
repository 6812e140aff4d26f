"""The promise of membership repair, as a property: a vault that changes over time (documents
published, ``superseded_by`` links added between versions registered apart, explicit
``family`` keys added later), ingested and reconciled after every change, ends with the same
families and serves the same documents as a fresh ingest of its last state.

Each example is a real vault read by the real vault connector, a real SQLite table and a
Qdrant collection (local mode, in memory), the reference ingestion and the real engine.
Families are compared as partitions of the documents (an id chosen fresh may differ from the
one a family kept since it was registered), explicit ones by id too; what is served is
compared at the run's instant and at every document's start.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from acceptance_kit import migrated_sqlite
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from qdrant_client import QdrantClient

from connectors.vault import VaultSource
from reconciler import default_filter
from reconciler.embedding import HashingEmbedder
from reconciler.ingesting import Ingestor
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.sql import SqlDocumentTable

T = datetime(2026, 6, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
EVERYTHING = Guard(max_changed_fraction=1.0)


@dataclass(frozen=True)
class Doc:
    """One document: when it appears, when it starts, and its status when nothing links it."""

    name: str
    appears: int
    start: int
    status: str | None


@dataclass(frozen=True)
class History:
    """Documents, and when each link (predecessor -> successor) and explicit family appears."""

    docs: tuple[Doc, ...]
    links: tuple[tuple[str, str, int], ...]
    families: tuple[tuple[str, str, int], ...]
    steps: int

    def vault(self, step: int) -> dict[str, str]:
        """The vault at ``step``: path -> text."""
        present = {d.name for d in self.docs if d.appears <= step}
        successor = {a: b for a, b, at in self.links if at <= step and {a, b} <= present}
        family = {d: f for d, f, at in self.families if at <= step}
        notes = {}
        for doc in self.docs:
            if doc.name not in present:
                continue
            front = {
                "id": doc.name,
                "effective_from": (T - doc.start * DAY).date().isoformat(),
                "status": "superseded" if doc.name in successor else doc.status,
                "superseded_by": successor.get(doc.name),
                "family": family.get(doc.name),
            }
            head = "\n".join(f"{k}: {v}" for k, v in front.items() if v is not None)
            notes[f"{doc.name}.md"] = f"---\n{head}\n---\n# {doc.name}\n\nThe text of {doc.name}.\n"
        return notes


@st.composite
def histories(draw: st.DrawFn) -> History:
    """3-6 documents over 2-3 snapshots; links join versions, oldest first, into chains and
    fan-ins (each version declares one successor at most)."""
    steps = draw(st.integers(min_value=2, max_value=3))
    count = draw(st.integers(min_value=3, max_value=6))
    starts = draw(
        st.lists(
            st.integers(min_value=1, max_value=900), min_size=count, max_size=count, unique=True
        )
    )
    docs = tuple(
        Doc(
            name=f"d{i}",
            appears=draw(st.integers(min_value=0, max_value=steps - 1)),
            start=start,
            status=draw(st.sampled_from((None, "current"))),
        )
        for i, start in enumerate(starts)
    )
    # Each document names at most one successor, started later than itself.
    by_start = sorted(docs, key=lambda d: -d.start)
    links = []
    taken: set[str] = set()
    for i, doc in enumerate(by_start[:-1]):
        if not draw(st.booleans()):
            continue
        fan_in = draw(st.booleans())  # (several versions closing into one successor)
        later = [d for d in by_start[i + 1 :] if fan_in or d.name not in taken]
        if not later:
            continue
        successor = draw(st.sampled_from(later))
        taken.add(successor.name)
        first = max(doc.appears, successor.appears)
        links.append(
            (doc.name, successor.name, draw(st.integers(min_value=first, max_value=steps - 1)))
        )
    families = [
        (doc.name, draw(st.sampled_from(("p", "q"))), draw(st.integers(doc.appears, steps - 1)))
        for doc in docs
        if draw(st.integers(min_value=0, max_value=3)) == 0
    ]
    return History(docs, tuple(links), tuple(families), steps)


@contextmanager
def deployed() -> Iterator[tuple[Path, SqlDocumentTable, QdrantChunkIndex, VaultSource]]:
    folder = Path(tempfile.mkdtemp(prefix="reconciler-membership-"))
    try:
        (folder / "vault").mkdir()
        shutil.copy(migrated_sqlite(), folder / "table.db")
        table = SqlDocumentTable.from_url(f"sqlite:///{folder / 'table.db'}")
        index = QdrantChunkIndex(QdrantClient(location=":memory:"), collection="corpus")
        try:
            yield (
                folder / "vault",
                table,
                index,
                VaultSource("hb", folder / "vault", clock=lambda: T),
            )
        finally:
            index.close()
            table.close()
    finally:
        shutil.rmtree(folder)


def write(vault: Path, notes: dict[str, str]) -> None:
    for old in vault.glob("*.md"):
        if old.name not in notes:
            old.unlink()
    for name, text in notes.items():
        (vault / name).write_text(text, encoding="utf-8")


def step(table: SqlDocumentTable, index: QdrantChunkIndex, source: VaultSource) -> Reconciler:
    """``ingest``, then ``run`` (as a cron deployment does after each change)."""
    assert (
        Ingestor(table=table, index=index, embedder=HashingEmbedder(dim=8)).run([source], now=T).ok
    )
    engine = Reconciler(table=table, index=index, sources=[source])
    report = engine.run(Options(mode="run", now=T, guard=EVERYTHING))
    assert not report.refused
    assert report.error is None
    return engine


def outcome(
    table: SqlDocumentTable, index: QdrantChunkIndex, instants: list[datetime]
) -> tuple[set[frozenset[str]], dict[str, str], dict[datetime, set[str]]]:
    """The families as a partition, the explicit ones by id, and what is served when."""
    members: dict[str, set[str]] = defaultdict(set)
    for row in table.iter_documents():
        members[row.doc_family_id].add(row.doc_id)
    # Every chunk carries its row's family.
    points, _ = index.client.scroll(index.collection, limit=10_000, with_payload=True)
    for point in points:
        payload = point.payload or {}
        assert payload["doc_id"] in members[payload["doc_family_id"]], payload
    explicit = {
        doc_id: family
        for family, ids in members.items()
        if family in ("hb:p", "hb:q")
        for doc_id in ids
    }
    served = {}
    for t in instants:
        found, _ = index.client.scroll(
            index.collection, scroll_filter=default_filter(t), limit=10_000, with_payload=True
        )
        served[t] = {(p.payload or {})["doc_id"] for p in found}
    return {frozenset(ids) for ids in members.values()}, explicit, served


def check_convergence(history: History) -> None:
    last = history.vault(history.steps - 1)
    instants = [T] + [T - d.start * DAY for d in history.docs]
    with deployed() as (vault, table, index, source):
        for at in range(history.steps):
            write(vault, history.vault(at))
            engine = step(table, index, source)
        again = engine.run(Options(mode="run", now=T, guard=EVERYTHING))
        assert again.plan.empty, [f.to_json() for f in again.findings]
        incremental = outcome(table, index, instants)
    with deployed() as (vault, table, index, source):
        write(vault, last)
        step(table, index, source)
        fresh = outcome(table, index, instants)
    assert incremental == fresh


#: The shapes of issue 27: a chain registered as two families and then linked; an explicit
#: family added to a version registered on its own.
SPLIT_THEN_LINKED = History(
    docs=(Doc("d0", 0, 300, None), Doc("d1", 0, 200, None), Doc("d2", 0, 100, "current")),
    links=(("d0", "d1", 0), ("d1", "d2", 1)),
    families=(),
    steps=2,
)
FAMILY_ADDED_LATER = History(
    docs=(Doc("d0", 0, 300, None), Doc("d1", 0, 200, None), Doc("d2", 1, 100, None)),
    links=(("d0", "d1", 0),),
    families=(("d2", "p", 1), ("d0", "p", 1)),
    steps=2,
)


@example(SPLIT_THEN_LINKED)
@example(FAMILY_ADDED_LATER)
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(histories())
def test_an_incremental_history_converges_to_a_fresh_ingest(history: History) -> None:
    check_convergence(history)
