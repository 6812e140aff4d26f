"""A split store's placement, on plain values: which collection a version's chunks belong in
(the one time rule's ``kept_in_main`` of the state ``payload_for`` derives from the row), the
``payload/misplaced`` finding, the moves a family's plan makes from its desired rows, and the
guard that weighs them (``max_moved_fraction``)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.check_inputs import CheckContext, ChunkAggregate, FamilyView
from reconciler.checks import CHECKS
from reconciler.checks.payload import check_orphan_placement, check_placement
from reconciler.model import Document, Severity, VersionState
from reconciler.payload import payload_for
from reconciler.pipeline.checking import check_family
from reconciler.pipeline.guarding import decide
from reconciler.pipeline.values import Guard, Options, Totals
from reconciler.planning import MoveTarget, Plan, as_planned
from reconciler.rules.time_rule import kept_in_main, settle

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DAY = timedelta(days=1)
SPLIT = ("corpus", "corpus_archive")


def version(n: int, state: VersionState, **fields: object) -> Document:
    values: dict[str, object] = {
        "doc_id": f"kb:v{n}",
        "source": "kb",
        "source_key": f"v{n}",
        "doc_family_id": "kb:f",
        "doc_version": n,
        "version_state": state,
        "effective_from": NOW - (10 - n) * DAY,
        **fields,
    }
    return Document(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "main"),
    [
        (VersionState.CURRENT, True),
        (VersionState.UNKNOWN, True),
        (VersionState.PENDING, True),
        (VersionState.SUPERSEDED, False),
        (VersionState.RETIRED, False),
        (VersionState.DRAFT, False),
    ],
)
def test_the_servable_states_are_kept_in_the_main_collection(
    state: VersionState, main: bool
) -> None:
    assert kept_in_main(state) is main
    assert kept_in_main(payload_for(version(1, state))["version_state"]) is main


def test_a_version_whose_successor_has_not_started_stays_until_its_window_closes() -> None:
    """v1 is closed by v2, which starts tomorrow: today the rule leaves v1 in force (only its
    effective_to written early), so it stays in the main collection; from tomorrow the rule
    supersedes it, and it moves."""
    v1 = version(1, VersionState.CURRENT, effective_from=NOW - 30 * DAY)
    v2 = version(2, VersionState.PENDING, effective_from=NOW + DAY)
    today = settle([v1, v2], NOW)
    tomorrow = settle([v1, v2], NOW + 2 * DAY)

    assert today["kb:v1"].effective_to == NOW + DAY
    assert kept_in_main(payload_for(today["kb:v1"])["version_state"])
    assert kept_in_main(payload_for(today["kb:v2"])["version_state"])
    assert not kept_in_main(payload_for(tomorrow["kb:v1"])["version_state"])
    assert kept_in_main(payload_for(tomorrow["kb:v2"])["version_state"])


def test_chunks_in_the_other_collection_are_misplaced() -> None:
    current = version(2, VersionState.CURRENT)
    old = version(1, VersionState.SUPERSEDED, superseded_by="kb:v2")

    hidden = check_placement(
        current, ChunkAggregate(count=3, matching=3, archived=2), "kb:f", SPLIT
    )
    stale = check_placement(old, ChunkAggregate(count=3, matching=3, archived=2), "kb:f", SPLIT)

    assert hidden is not None
    assert (hidden.kind, hidden.severity) == ("misplaced", Severity.CRITICAL)
    assert hidden.expected == {"collection": "corpus", "version_state": "current"}
    assert hidden.actual == {"collection": "corpus_archive", "chunks": 2, "of": 3}
    assert stale is not None
    assert stale.severity is Severity.WARNING
    assert stale.actual == {"collection": "corpus", "chunks": 1, "of": 3}
    assert check_placement(current, ChunkAggregate(count=3, archived=0), "kb:f", SPLIT) is None
    assert check_placement(old, ChunkAggregate(count=3, archived=3), "kb:f", SPLIT) is None
    orphan = check_orphan_placement("kb:gone", ChunkAggregate(count=2, archived=1), SPLIT)
    assert orphan is not None
    assert orphan.actual == {"collection": "corpus", "chunks": 1, "of": 2}
    assert check_orphan_placement("kb:gone", ChunkAggregate(count=2, archived=2), SPLIT) is None


def _view(rows: tuple[Document, ...], chunks: dict[str, ChunkAggregate]) -> FamilyView:
    return FamilyView(family="kb:f", rows=rows, chunks=chunks)


def test_a_family_plan_moves_what_its_desired_rows_put_elsewhere() -> None:
    """Two versions in force (no source read): the siblings check supersedes v1 by v2, and
    the plan moves v1's chunks to the archive in the same run; v2's stay."""
    v1 = version(1, VersionState.CURRENT)
    v2 = version(2, VersionState.CURRENT)
    chunks = {"kb:v1": ChunkAggregate(count=2, matching=2), "kb:v2": ChunkAggregate(1, 1)}
    checks = [c for c in CHECKS if c in ("siblings", "dates", "payload")]

    split = check_family(
        _view((v1, v2), chunks), CheckContext(now=NOW, sources={}, split=SPLIT), checks
    )
    one = check_family(_view((v1, v2), chunks), CheckContext(now=NOW, sources={}), checks)

    assert [u.doc_id for u in split.plan.row_updates] == ["kb:v1"]
    assert split.plan.moves == (MoveTarget("kb:v1", "kb:f", True, 2, ("siblings/live_siblings",)),)
    assert one.plan.moves == ()  # one collection: nothing moves
    planned = as_planned(_view((v1, v2), chunks), split.plan)
    assert planned.chunks["kb:v1"].archived == 2


def test_a_version_brought_back_moves_back_and_a_misplaced_one_alone_moves_too() -> None:
    back = version(1, VersionState.CURRENT)  # in force again; its chunks still archived
    old = version(0, VersionState.SUPERSEDED, superseded_by="kb:v1")  # one chunk left in main
    chunks = {
        "kb:v1": ChunkAggregate(count=2, matching=2, archived=2),
        "kb:v0": ChunkAggregate(count=3, matching=3, archived=2),
    }
    outcome = check_family(
        _view((old, back), chunks),
        CheckContext(now=NOW, sources={}, split=SPLIT),
        ["payload"],
    )

    assert {(f.kind, f.doc_id) for f in outcome.findings} == {
        ("misplaced", "kb:v1"),
        ("misplaced", "kb:v0"),
    }
    assert set(outcome.plan.moves) == {
        MoveTarget("kb:v1", "kb:f", False, 2, ("payload/misplaced",)),
        MoveTarget("kb:v0", "kb:f", True, 1, ("payload/misplaced",)),
    }
    assert outcome.plan.row_updates == ()
    assert outcome.plan.payload_targets == ()


def _moves(families: int, chunks: int) -> Plan:
    return Plan(
        moves=tuple(
            MoveTarget(f"kb:d{n}", f"kb:f{n % families}", True, chunks // 10, ("x",))
            for n in range(10)
        )
    )


def test_the_guard_weighs_moves_against_max_moved_fraction() -> None:
    totals = Totals(families=20, rows_by_source={}, chunks=1000)
    options = Options(mode="apply", split=SPLIT, guard=Guard(max_moved_fraction=0.2))

    small = decide(options, totals, _moves(2, 100), {}, NOW)
    large = decide(options, totals, _moves(10, 500), {}, NOW)
    forced = decide(dataclasses.replace(options, force=True), totals, _moves(10, 500), {}, NOW)
    alone = decide(dataclasses.replace(options, split=None), totals, _moves(10, 500), {}, NOW)

    assert not small.refused
    assert small.to_json()["moving_chunks"] == 100
    assert large.refused
    assert large.over == ("moved",)
    assert {r.kind for r in large.reasons} == {"blast_radius"}
    assert all(r.actual["direction"] == "moved" for r in large.reasons)
    assert "reconciler split" in large.reasons[0].action
    assert large.to_json()["moving_families"] == 10
    assert (forced.refused, forced.forced) == (False, True)
    assert not alone.refused  # one collection: moves are not weighed, nor shown
    assert "moving_chunks" not in alone.to_json()
