"""The blast-radius guard weighs the served set (issue 37; direction since issue 27, item 6):
what ``default_filter()`` would stop or start returning counts against
``max_changed_fraction``; lifting a quarantine whose cause is gone is weighed apart, against
``max_restored_fraction``; relabels and writes to what is unserved never refuse a run. Plain
values only."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.check_inputs import SourceState
from reconciler.model import Document, VersionState
from reconciler.payload import payload_for
from reconciler.pipeline.directions import Direction, payload_direction, row_direction
from reconciler.pipeline.guarding import decide, hold_back, weigh
from reconciler.pipeline.values import Guard, Options, Totals
from reconciler.planning import PayloadTarget, Plan, RowUpdate

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DAY = timedelta(days=1)
SERVED = Document(
    doc_id="s:d",
    source="s",
    source_key="d",
    doc_family_id="s:f",
    doc_version=1,
    version_state=VersionState.CURRENT,
    effective_from=NOW - 100 * DAY,
)
EDITED = dataclasses.replace(SERVED, quarantined=True, quarantine_reason="in_place_edit")
READABLE = {"s": SourceState("s", readable=True, scanned=True, documents=100)}


def change(**fields: object) -> Document:
    return dataclasses.replace(SERVED, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("before", "after", "direction"),
    [
        # Hiding: served now (or later) before, not after.
        (SERVED, EDITED, Direction.HIDE),
        (SERVED, change(quarantined=True, quarantine_reason="ttl_expired"), Direction.HIDE),
        (SERVED, change(quarantined=True, quarantine_reason="manual"), Direction.HIDE),
        (
            SERVED,
            change(version_state=VersionState.SUPERSEDED, superseded_by="s:e"),
            Direction.HIDE,
        ),
        (SERVED, change(version_state=VersionState.RETIRED), Direction.HIDE),
        (SERVED, change(version_state=VersionState.DRAFT), Direction.HIDE),
        (SERVED, change(effective_to=NOW - DAY), Direction.HIDE),  # a window closed before now
        (SERVED, change(effective_from=NOW + DAY), Direction.HIDE),  # not served until tomorrow
        (  # pending, to start tomorrow, retired: never served
            change(version_state=VersionState.PENDING, effective_from=NOW + DAY),
            change(version_state=VersionState.RETIRED, effective_from=NOW + DAY),
            Direction.HIDE,
        ),
        # Restoring: a managed quarantine lifted, nothing else that decides serving moves.
        (EDITED, SERVED, Direction.RESTORE),
        (change(quarantined=True, quarantine_reason="ttl_expired"), SERVED, Direction.RESTORE),
        (EDITED, change(title="Renamed"), Direction.RESTORE),  # metadata beside it: still one
        (  # a superseded version's quarantine lifted: served no more than before, restored
            change(
                version_state=VersionState.SUPERSEDED,
                quarantined=True,
                quarantine_reason="ttl_expired",
            ),
            change(version_state=VersionState.SUPERSEDED),
            Direction.RESTORE,
        ),
        # Revealing: not served before, served after (a person's quarantine is not a restore).
        (change(quarantined=True, quarantine_reason="manual"), SERVED, Direction.REVEAL),
        (change(version_state=VersionState.RETIRED), SERVED, Direction.REVEAL),  # un-retired
        # Relabelling: served before and after.
        (SERVED, change(title="Renamed", doc_class="policy"), Direction.RELABEL),
        (SERVED, change(effective_to=NOW + 10 * DAY), Direction.RELABEL),  # a successor's start
        (SERVED, change(doc_family_id="s:g"), Direction.RELABEL),  # a family merge or move
        (  # pending becomes current at its start (already served: the window has begun)
            change(version_state=VersionState.PENDING),
            SERVED,
            Direction.RELABEL,
        ),
        # Unserved before and after: moved to the archive, relabelled, quarantined.
        (EDITED, change(version_state=VersionState.RETIRED), Direction.UNSERVED),
        (
            change(version_state=VersionState.RETIRED),
            change(version_state=VersionState.SUPERSEDED, superseded_by="s:e"),
            Direction.UNSERVED,
        ),
        (
            change(version_state=VersionState.SUPERSEDED, superseded_by="s:e"),
            change(
                version_state=VersionState.SUPERSEDED,
                superseded_by="s:e",
                quarantined=True,
                quarantine_reason="in_place_edit",
            ),
            Direction.UNSERVED,
        ),
    ],
)
def test_a_row_change_has_one_direction(
    before: Document, after: Document, direction: Direction
) -> None:
    assert row_direction(before, after, NOW) is direction


def test_a_payload_write_without_a_row_change_hides_unless_its_payload_is_served() -> None:
    def target(row: Document, *, partial: bool = False) -> PayloadTarget:
        return PayloadTarget(row.doc_id, row.doc_family_id, payload_for(row), 2, (), partial)

    superseded = change(version_state=VersionState.SUPERSEDED, superseded_by="s:e")
    assert payload_direction(target(superseded), NOW) is Direction.HIDE  # resurrected chunks
    assert payload_direction(target(EDITED, partial=True), NOW) is Direction.HIDE  # orphans
    assert payload_direction(target(SERVED), NOW) is Direction.RELABEL
    # A pending version that starts tomorrow is served from then on.
    tomorrow = change(version_state=VersionState.PENDING, effective_from=NOW + DAY)
    assert payload_direction(target(tomorrow), NOW) is Direction.RELABEL


def _doc(i: int, before: Document, after: Document) -> tuple[RowUpdate, PayloadTarget]:
    ids = {"doc_id": f"s:d{i}", "doc_family_id": f"s:f{i}", "source_key": f"d{i}"}
    old = dataclasses.replace(before, **ids)  # type: ignore[arg-type]
    new = dataclasses.replace(after, **ids)  # type: ignore[arg-type]
    return (
        RowUpdate(old.doc_id, old.doc_family_id, old, new, ("r",)),
        PayloadTarget(new.doc_id, new.doc_family_id, payload_for(new), 2, ("r",)),
    )


def plan_of(*pairs: tuple[Document, Document, int]) -> Plan:
    """A plan with ``n`` documents changing from ``before`` to ``after``, per triple."""
    docs = []
    for before, after, n in pairs:
        for _ in range(n):
            docs.append(_doc(len(docs), before, after))
    return Plan(row_updates=tuple(d[0] for d in docs), payload_targets=tuple(d[1] for d in docs))


def test_the_weights_count_each_direction_apart() -> None:
    weights = weigh(
        plan_of((SERVED, EDITED, 3), (EDITED, SERVED, 5), (SERVED, change(title="T"), 2)), NOW
    )
    assert (weights.changed_families, weights.changed_chunks) == (5, 10)
    assert (weights.hiding_families, weights.hiding_chunks) == (3, 6)
    assert (weights.restoring_families, weights.restoring_chunks) == (5, 10)
    assert (weights.relabelled_families, weights.relabelled_chunks) == (2, 4)
    assert (weights.weighed_families, weights.weighed_chunks) == (3, 6)


def test_restores_do_not_count_against_max_changed_fraction() -> None:
    """60 of 100 families served again after their re-ingest: not refused (the trap)."""
    decision = decide(
        Options(mode="run"),
        Totals(100, {"s": 100}, 1000),
        plan_of((EDITED, SERVED, 60)),
        READABLE,
        NOW,
    )
    assert not decision.refused
    assert decision.reasons == ()
    assert decision.changed_families == 0
    assert decision.to_json()["restoring_families"] == 60
    assert "over" not in decision.to_json()


def test_hiding_over_the_limit_is_refused_and_says_so() -> None:
    decision = decide(
        Options(mode="run"),
        Totals(100, {"s": 100}, 200),
        plan_of((SERVED, EDITED, 30)),
        READABLE,
        NOW,
    )
    assert decision.refused
    assert decision.over == ("changed",)
    assert decision.to_json()["over"] == ["changed"]
    [families, chunks] = decision.reasons
    assert families.actual == {
        "direction": "changed",
        "families": 30,
        "fraction": 0.3,
        "hidden_families": 30,
        "revealed_families": 0,
    }
    assert chunks.actual["hidden_chunks"] == 60
    assert families.expected == {
        "direction": "changed",
        "families": "<= 20% of 100 (max_changed_fraction)",
    }


def test_restores_over_their_own_limit_are_refused_and_say_so() -> None:
    options = Options(mode="run", guard=Guard(max_changed_fraction=0.2, max_restored_fraction=0.5))
    decision = decide(
        options, Totals(100, {"s": 100}, 1000), plan_of((EDITED, SERVED, 60)), READABLE, NOW
    )
    assert decision.refused
    assert decision.over == ("restored",)
    assert {r.actual["direction"] for r in decision.reasons} == {"restored"}
    # Hiding beside it is weighed on its own: 15 of 100 is under 20 %.
    mixed = plan_of((EDITED, SERVED, 40), (SERVED, EDITED, 15))
    assert not decide(options, Totals(100, {"s": 100}, 1000), mixed, READABLE, NOW).refused


def test_the_floor_holds_in_each_direction() -> None:
    """5 families (10 chunks) hidden and 5 restored of 10: each at the floor of 10."""
    options = Options(mode="run", guard=Guard(0.1, 0.1, floor=10))
    plan = plan_of((EDITED, SERVED, 5), (SERVED, EDITED, 5))
    assert not decide(options, Totals(10, {"s": 10}, 20), plan, READABLE, NOW).reasons
    lower = Options(mode="run", guard=Guard(0.1, 0.1, floor=4))
    decision = decide(lower, Totals(10, {"s": 10}, 20), plan, READABLE, NOW)
    assert decision.over == ("changed", "restored")


# -- issue 37: what a refused run still writes ----------------------------------------------

RELABELLED = change(doc_family_id="s:g", title="Joined")
TOTALS = Totals(100, {"s": 100}, 200)


def test_relabels_and_family_moves_never_refuse() -> None:
    """60 of 100 families relabelled while served (a family merge moves each successor): only
    what the default filter would stop or start returning is weighed."""
    decision = decide(Options(mode="run"), TOTALS, plan_of((SERVED, RELABELLED, 60)), READABLE, NOW)
    assert not decision.refused
    assert (decision.weights.relabelled_families, decision.weights.weighed_families) == (60, 0)
    assert decision.changed_families == 60  # reported, not weighed


def test_reveals_are_weighed_with_hides() -> None:
    retired = change(version_state=VersionState.RETIRED)
    decision = decide(Options(mode="run"), TOTALS, plan_of((retired, SERVED, 30)), READABLE, NOW)
    assert decision.refused
    assert decision.over == ("changed",)
    assert decision.weights.revealed_families == 30
    assert len(decision.held) == 30


def test_a_refused_run_holds_back_exactly_what_it_would_hide() -> None:
    plan = plan_of((SERVED, EDITED, 30), (SERVED, RELABELLED, 20), (EDITED, SERVED, 5))
    decision = decide(Options(mode="run"), TOTALS, plan, READABLE, NOW)
    assert decision.refused
    hidden = {f"s:d{i}" for i in range(30)}
    assert set(decision.held) == hidden == set(decision.hidden)
    assert decision.allowed is not None
    assert {u.doc_id for u in decision.allowed.row_updates} == {f"s:d{i}" for i in range(30, 55)}
    assert {t.doc_id for t in decision.allowed.payload_targets} == {
        f"s:d{i}" for i in range(30, 55)
    }
    assert decision.to_json()["held"] == sorted(hidden)
    # Forced, or not tripped: nothing is held, ``allowed`` is not used.
    forced = decide(Options(mode="run", force=True), TOTALS, plan, READABLE, NOW)
    assert (forced.forced, forced.held, forced.allowed) == (True, (), None)
    assert "held" not in forced.to_json()


def test_restores_over_their_limit_hold_back_only_the_restores() -> None:
    options = Options(mode="run", guard=Guard(max_changed_fraction=0.2, max_restored_fraction=0.5))
    plan = plan_of((EDITED, SERVED, 60), (SERVED, RELABELLED, 5), (SERVED, EDITED, 5))
    decision = decide(options, TOTALS, plan, READABLE, NOW)
    assert decision.over == ("restored",)
    assert set(decision.held) == {f"s:d{i}" for i in range(60)}
    assert decision.allowed is not None
    assert len(decision.allowed.row_updates) == 10  # the relabels and the 5 hidden (under 20 %)


def test_an_empty_source_or_a_declaring_run_writes_nothing_when_refused() -> None:
    plan = plan_of((SERVED, RELABELLED, 5), (SERVED, EDITED, 30))
    empty = {"s": SourceState("s", readable=True, scanned=True, documents=0)}
    decision = decide(Options(mode="run"), TOTALS, plan, empty, NOW)
    assert decision.refused
    assert decision.allowed is not None
    assert decision.allowed.empty
    assert len(decision.held) == 35
    # A refused ``declare`` run records no declaration: what they move would be moved back.
    tripped = decide(Options(mode="run"), TOTALS, plan, READABLE, NOW)
    assert tripped.allowed is not None
    assert len(tripped.allowed.row_updates) == 5  # a run that does not declare: the relabels
    allowed, held = hold_back(plan, NOW, tripped.reasons, tripped.over, declaring=True)
    assert (allowed.empty, len(held)) == (True, 35)
