"""The engine's stages called one by one: each takes the earlier stages' values and returns a
frozen value of its own, and chained by hand they give what ``Reconciler.run`` gives."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from acceptance_kit import Deployment, migrated_table

from connectors.vault import VaultSource
from reconciler.check_inputs import CheckContext, SourceState
from reconciler.clock import ManualClock
from reconciler.embedding import make_embedder
from reconciler.ingesting import Ingestor
from reconciler.model import Document, PayloadWrite, RunMode, VersionState
from reconciler.pipeline.assessing import view_after_scan
from reconciler.pipeline.checking import check_family
from reconciler.pipeline.guarding import decide
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, GuardDecision, Options, Totals
from reconciler.planning import Plan, RowUpdate
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Reconciler]:
    """Three families ingested into SQLite and an in-memory index, then one document's chunks
    set back to ``current`` (payload drift) and one row set to ``retired`` (table drift)."""
    deploy = Deployment(tmp_path)
    for name in ("expenses", "travel", "leave"):
        deploy.family(name, 2)
    table = migrated_table(tmp_path / "stages.db")
    index = InMemoryChunkIndex()
    sources = [VaultSource("hb", deploy.vault)]
    Ingestor(table=table, index=index, embedder=make_embedder("hashing", dim=16, model="")).run(
        sources
    )
    drifted = [c.point_id for c in index.scroll() if c.doc_id == "hb:expenses-v1"]
    index.set_payloads([PayloadWrite(tuple(drifted), {"version_state": "current"})])
    row = table.get_documents(["hb:travel-v2"])["hb:travel-v2"]
    table.upsert_documents([dataclasses.replace(row, version_state=VersionState.RETIRED)])
    try:
        yield Reconciler(table=table, index=index, sources=sources)
    finally:
        table.close()


def test_stages_chained_by_hand_give_what_run_gives(engine: Reconciler) -> None:
    options = Options(mode="check", now=NOW)
    sources = engine.read_sources(options, NOW)
    scan = engine.scan(options, engine.scope(options, sources))
    assessment = engine.assess(options, NOW, sources, scan)
    decision = decide(options, scan.totals, assessment.plan, sources.states)

    report = engine.run(options)
    assert [f.to_json() for f in assessment.findings] == [f.to_json() for f in report.findings]
    assert assessment.plan == report.plan
    assert {k: dict(v) for k, v in assessment.summary.items()} == report.summary
    assert decision.to_json() == report.guard
    assert scan.totals.chunks == report.chunks_scanned == engine.index.count()
    # The drift is found, by the stage that should find it.
    found = {(f.check, f.kind, f.doc_id) for f in assessment.findings}
    assert ("payload", "payload_drift", "hb:expenses-v1") in found
    assert ("family", "state_mismatch", "hb:travel-v2") in found
    rows = {f"hb:{name}-v{v}" for name in ("expenses", "travel", "leave") for v in (1, 2)}
    assert len(scan.expected) == len(rows)
    assert all(doc_id in scan.expected for doc_id in rows)
    assert "hb:expenses-v3" not in scan.expected
    assert sources.states["hb"].documents == 6


def test_the_summary_is_counted_from_the_findings_and_the_families(engine: Reconciler) -> None:
    """Every family is checked once, with its chunks, and counted once; each check's
    findings are counted from the findings the assessment returns."""
    options = Options(mode="check", now=NOW)
    sources = engine.read_sources(options, NOW)
    scan = engine.scan(options, None)
    assert sorted(scan.chunks.drifted_ids()) == ["hb:expenses-v1", "hb:travel-v2"]
    assessment = engine.assess(options, NOW, sources, scan)
    assert assessment.summary["family"]["checked"] == 3  # expenses, travel, leave
    assert assessment.summary["payload"]["checked"] == scan.totals.chunks
    for check, counts in assessment.summary.items():
        assert counts["findings"] == sum(1 for f in assessment.findings if f.check == check)
    assert isinstance(assessment.findings, tuple)


def test_every_stage_value_is_frozen(engine: Reconciler) -> None:
    options = Options(mode="check", now=NOW)
    sources = engine.read_sources(options, NOW)
    scan = engine.scan(options, None)
    assessment = engine.assess(options, NOW, sources, scan)
    decision = decide(options, scan.totals, assessment.plan, sources.states)
    report = engine.run(options)
    for value in (options, sources, scan, scan.totals, assessment, assessment.plan, decision):
        field = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.refused = True  # type: ignore[misc]


def test_a_family_is_checked_alone_from_its_view(engine: Reconciler) -> None:
    """``check_family`` needs no store: the view holds everything, including which
    successors have a row."""
    options = Options(mode="check", now=NOW)
    sources = engine.read_sources(options, NOW)
    scan = engine.scan(options, None)
    rows = tuple(r for r in engine.table.iter_documents() if r.doc_family_id.endswith("travel"))
    view = view_after_scan(engine.table, rows[0].doc_family_id, rows, sources, scan, [])
    assert view.registered == {"hb:travel-v2"}
    ctx = CheckContext(now=NOW, sources=sources.states)
    outcome = check_family(view, ctx, ["family", "siblings", "dates", "payload"])
    assert {(f.kind, f.doc_id) for f in outcome.findings} >= {("state_mismatch", "hb:travel-v2")}
    assert [u.doc_id for u in outcome.plan.row_updates] == ["hb:travel-v2"]
    assert outcome.plan.row_updates[0].after.version_state is VersionState.CURRENT
    # Without the successor's row, the old version's successor is "not ingested".
    alone = dataclasses.replace(view, registered=frozenset())
    kinds = {f.kind for f in check_family(alone, ctx, ["family"]).findings}
    assert "successor_not_ingested" in kinds


@pytest.mark.parametrize(
    ("mode", "force", "changed", "refused", "forced", "tripped"),
    [
        ("check", False, 30, False, False, ["blast_radius"]),
        ("apply", False, 30, True, False, ["blast_radius"]),
        ("apply", True, 30, False, True, ["blast_radius"]),
        ("apply", False, 10, False, False, None),  # at the floor: never trips
        ("apply", False, 19, False, False, None),  # 19 of 100: under 20 %
    ],
)
def test_the_guard_decides_from_values_alone(
    mode: str, force: bool, changed: int, refused: bool, forced: bool, tripped: list[str] | None
) -> None:
    options = Options(mode=mode, force=force)
    plan = Plan(row_updates=tuple(_update(i) for i in range(changed)))
    readable = {"s": SourceState("s", readable=True, scanned=True, documents=100)}
    decision = decide(options, Totals(100, {"s": 100}, 1000), plan, readable)
    assert (decision.refused, decision.forced) == (refused, forced)
    assert decision.to_json().get("tripped") == tripped
    assert decision.changed_families == changed
    assert isinstance(decision, GuardDecision)


def test_the_guard_refuses_a_source_that_returned_nothing() -> None:
    empty = {"s": SourceState("s", readable=True, scanned=True, documents=0)}
    decision = decide(Options(mode="apply"), Totals(5, {"s": 5}, 50), Plan(), empty)
    assert [r.kind for r in decision.reasons] == ["source_empty"]
    assert decision.refused
    # An unreadable source is not an empty one.
    down = {"s": SourceState("s", readable=False, scanned=True, error="refused")}
    assert not decide(Options(mode="apply"), Totals(5, {"s": 5}, 50), Plan(), down).reasons


def test_modes_are_an_enum_and_a_bad_mode_is_refused() -> None:
    assert Options(mode="apply").mode is RunMode.APPLY
    assert [m for m in RunMode if m.writes] == [
        RunMode.APPLY,
        RunMode.RUN,
        RunMode.REPAIR,
        RunMode.DECLARE,
    ]
    with pytest.raises(ValueError, match="delete"):
        Options(mode="delete")
    with pytest.raises(ValueError, match="not a reconciliation mode"):
        Options(mode="ingest")


def _update(i: int) -> RowUpdate:
    doc = Document(
        doc_id=f"s:d{i}",
        doc_family_id=f"s:f{i}",
        doc_version=1,
        version_state=VersionState.CURRENT,
        source="s",
        source_key=f"d{i}",
    )
    after = dataclasses.replace(doc, version_state=VersionState.RETIRED)
    return RowUpdate(doc.doc_id, doc.doc_family_id, doc, after, ("family/missing_in_source",))


def test_the_run_takes_its_now_and_its_times_from_the_engines_clock(engine: Reconciler) -> None:
    """Without ``--now``, the time rule is judged at the clock's instant, and the run's start,
    end and duration are the clock's: a run on a clock that stands still takes no time."""
    engine.clock = ManualClock(NOW)
    report = engine.run(Options(mode="apply", guard=Guard(max_changed_fraction=1.0)))
    assert report.started_at == report.finished_at == NOW
    run = engine.table.get_run(report.run_id)
    assert run is not None
    assert run.duration_seconds == 0.0
    # The repair judged "now" at the clock: the rows were written as of NOW.
    assert report.applied is not None
    assert report.writes()["table"] == 1


class CountingTable:
    """A table that counts the ``get_documents`` calls made through it."""

    def __init__(self, table: SqlDocumentTable) -> None:
        self._table = table
        self.lookups = 0

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        self.lookups += 1
        return self._table.get_documents(doc_ids)

    def __getattr__(self, name: str) -> object:
        return getattr(self._table, name)


def test_new_documents_are_looked_up_in_batches_not_one_query_each(tmp_path: Path) -> None:
    """A first check of a source of 1,200 documents that has none registered: whether each
    has a row (in another shard, say) is asked 500 at a time (it was one query a document)."""
    deploy = Deployment(tmp_path)
    for n in range(1200):
        deploy.note(f"n{n:04d}", id=f"n{n:04d}", status="current")
    table = migrated_table(tmp_path / "batches.db")
    counting = CountingTable(table)
    index = InMemoryChunkIndex()
    index.ensure_collection(dim=16)
    try:
        engine = Reconciler(
            table=counting,  # type: ignore[arg-type]
            index=index,
            sources=[VaultSource("hb", deploy.vault)],
        )
        report = engine.run(Options(mode="check", now=NOW))
    finally:
        table.close()
    assert sum(1 for f in report.findings if f.kind == "not_ingested") == 1200
    assert counting.lookups <= 4  # ceil(1200 / 500) = 3, and the scope's own
