"""Membership through the engine's stages: the table pass finds the rows that belong to another
family now, and checking every family after the scan (no first pass) finds the same moves, the
same findings and the same plan; a run of the siblings check alone moves nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from acceptance_kit import Deployment, day

from connectors.vault import VaultSource
from reconciler.embedding import make_embedder
from reconciler.ingesting import Ingestor
from reconciler.pipeline.assessing import family_views
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Options
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Reconciler]:
    """Two versions registered as two families, then linked; a third family left alone; and a
    note given an explicit family after registration."""
    deploy = Deployment(tmp_path)
    deploy.note("policy-2014", id="policy-2014", status="current", effective_from=day(-300))
    deploy.note("policy-2024", id="policy-2024", status="current", effective_from=day(-10))
    deploy.note("travel-old", id="travel-old", status="current", effective_from=day(-200))
    deploy.family("travel", 2)
    deploy.family("leave", 2)
    table = SqlDocumentTable.from_url(f"sqlite:///{tmp_path / 'stages.db'}")
    table.ensure_schema(create=True)
    index = InMemoryChunkIndex()
    sources = [VaultSource("hb", deploy.vault)]
    embedder = make_embedder("hashing", dim=16, model="")
    Ingestor(table=table, index=index, embedder=embedder).run(sources)
    deploy.edit_front("policy-2014", status="superseded", superseded_by="policy-2024")
    deploy.edit_front("travel-old", family="travel")
    try:
        yield Reconciler(table=table, index=index, sources=sources)
    finally:
        table.close()


def test_moves_are_checked_in_the_families_the_sources_give(engine: Reconciler) -> None:
    options = Options(mode="check", now=NOW)
    sources = engine.read_sources(options, NOW)
    scan = engine.scan(options, None)
    views = list(family_views(engine.table, options, sources, scan, moving=True))
    # (policy-2024 and travel-old are checked in the families their sources name now)
    assert {view.family: sorted(row.doc_id for row in view.rows) for view in views} == {
        "hb:leave": ["hb:leave-v1", "hb:leave-v2"],
        "hb:policy-2014": ["hb:policy-2014", "hb:policy-2024"],
        "hb:travel": ["hb:travel-old", "hb:travel-v1", "hb:travel-v2"],
    }
    assessment = engine.assess(options, NOW, sources, engine.scan(options, None))
    moved = {(f.doc_id, f.family) for f in assessment.findings if f.kind == "membership_changed"}
    assert moved == {("hb:policy-2024", "hb:policy-2014"), ("hb:travel-old", "hb:travel")}
    # policy-2014, travel and leave: the families the moves emptied are no longer checked
    assert assessment.summary["family"]["checked"] == 3


def test_a_run_without_the_family_check_moves_nothing(engine: Reconciler) -> None:
    report = engine.run(Options(mode="check", now=NOW, checks=frozenset({"siblings", "dates"})))
    assert not [f for f in report.findings if f.kind == "membership_changed"]
    assert all(u.after.doc_family_id == u.family for u in report.plan.row_updates)
