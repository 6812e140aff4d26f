"""A window that now ends earlier, still ahead (``rules.handover``): the guard weighs it as a
hide unless another version of its family takes over at the new end. A mapping mistake that
closes every note's window tomorrow leaves the corpus serving nothing from then on, with no
run to weigh it then; a successor scheduled at the new end (the ``dates`` check closing a
predecessor's window at its successor's start) is a handover, never weighed.

The promise, over random families: a row whose end moves earlier is weighed a relabel only
where its family, as the plan leaves it, serves at that end; it is never weighed a hide where
the family serves at every instant from now on."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from reconciler.check_inputs import FamilyView
from reconciler.model import OPEN_END, Document, SourceDocument, VersionState
from reconciler.payload import payload_for
from reconciler.pipeline.directions import Direction, effects
from reconciler.planning import PayloadTarget, Plan, RowUpdate, _handovers
from reconciler.rules.time_rule import row_served

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DAY = timedelta(days=1)
OLD = Document(
    doc_id="s:old",
    source="s",
    source_key="old",
    doc_family_id="s:f",
    doc_version=1,
    version_state=VersionState.CURRENT,
    effective_from=NOW - 100 * DAY,
)


def version(key: str, **fields: object) -> Document:
    """Another version of ``OLD``'s family."""
    ids = {"doc_id": f"s:{key}", "source_key": key, "doc_version": 2}
    return dataclasses.replace(OLD, **{**ids, **fields})  # type: ignore[arg-type]


def closed(at: datetime) -> Document:
    return dataclasses.replace(OLD, effective_to=at)


def plan(*updates: tuple[Document, Document], handed_over: bool = False) -> Plan:
    rows = tuple(
        RowUpdate(b.doc_id, b.doc_family_id, b, a, ("r",), handed_over=handed_over and n == 0)
        for n, (b, a) in enumerate(updates)
    )
    targets = tuple(
        PayloadTarget(a.doc_id, a.doc_family_id, payload_for(a), 1, ("r",)) for _b, a in updates
    )
    return Plan(row_updates=rows, payload_targets=targets)


def direction_of_old(found: Plan) -> Direction:
    return next(e.direction for e in effects(found, NOW) if e.doc_id == OLD.doc_id)


def test_an_end_closed_ahead_with_nothing_after_it_is_a_hide() -> None:
    assert direction_of_old(plan((OLD, closed(NOW + DAY)))) is Direction.HIDE
    assert direction_of_old(plan((OLD, closed(NOW + 300 * DAY)))) is Direction.HIDE


def test_a_successor_joining_at_the_new_end_is_a_handover() -> None:
    """The successor moves into the family in the same plan (its row's update), starting at
    the predecessor's new end: a relabel, as before."""
    end = NOW + 30 * DAY
    joining = version("new", doc_family_id="s:g", effective_from=end)
    joined = dataclasses.replace(joining, doc_family_id="s:f")
    assert direction_of_old(plan((OLD, closed(end)), (joining, joined))) is Direction.RELABEL
    # Starting a day late leaves the family dark for a day: a hide.
    late = dataclasses.replace(joined, effective_from=end + DAY)
    assert direction_of_old(plan((OLD, closed(end)), (joining, late))) is Direction.HIDE
    # Joining another family takes over nothing here.
    elsewhere = dataclasses.replace(joining, doc_family_id="s:h")
    assert direction_of_old(plan((OLD, closed(end)), (joining, elsewhere))) is Direction.HIDE


def test_a_handover_the_planner_found_is_a_relabel() -> None:
    """``handed_over`` (the planner saw the family's unchanged rows, or a declared successor)."""
    assert direction_of_old(plan((OLD, closed(NOW + DAY)), handed_over=True)) is Direction.RELABEL


def test_an_end_moved_later_or_already_past_keeps_its_direction() -> None:
    later = dataclasses.replace(OLD, effective_to=NOW + 10 * DAY)
    assert direction_of_old(plan((later, dataclasses.replace(OLD, effective_to=NOW + 20 * DAY)))) \
        is Direction.RELABEL  # fmt: skip
    assert direction_of_old(plan((OLD, closed(NOW - DAY)))) is Direction.HIDE


def test_the_planner_sees_the_family_and_the_declared_successors() -> None:
    end = NOW + 30 * DAY
    update = RowUpdate(OLD.doc_id, "s:f", OLD, closed(end), ("dates",))
    waiting = version("new", effective_from=end)  # registered in the family, unchanged
    view = FamilyView(family="s:f", rows=(OLD, waiting))
    assert _handovers(view, [update])[0].handed_over
    assert not _handovers(FamilyView(family="s:f", rows=(OLD,)), [update])[0].handed_over
    # A successor the source declares, in another family until this run joins it.
    source = SourceDocument("s", "old", OLD.doc_id, "h", superseded_by="s:new")
    successor = SourceDocument("s", "new", "s:new", "h2", effective_from=end)
    view = FamilyView(
        family="s:f", rows=(OLD,), sources={OLD.doc_id: source}, successors={"s:new": successor}
    )
    assert _handovers(view, [update])[0].handed_over
    # Its row, in the family and quarantined, says more than its source: nothing takes over.
    held = version("new", effective_from=end, quarantined=True, quarantine_reason="manual")
    view_held = dataclasses.replace(view, rows=(OLD, held))
    assert not _handovers(view_held, [update])[0].handed_over
    retired = dataclasses.replace(successor, state=VersionState.RETIRED)
    view = dataclasses.replace(view, successors={"s:new": retired})
    assert not _handovers(view, [update])[0].handed_over


def test_a_version_superseded_now_by_a_successor_of_its_family_is_handed_over() -> None:
    """In force already: the successor, registered in the family before the run, serves now
    (both were served; the run closes the old one). A relabel, as the same handover dated
    ahead is. Not where the successor joins from a family of its own (a merge: its family
    stops serving), serves nothing now, or has no row (named, not ingested)."""
    new = version("new", effective_from=NOW - DAY)
    gone = dataclasses.replace(
        OLD, version_state=VersionState.SUPERSEDED, superseded_by="s:new", effective_to=NOW - DAY
    )
    update = RowUpdate(OLD.doc_id, "s:f", OLD, gone, ("family",))
    marked = _handovers(FamilyView(family="s:f", rows=(OLD, new)), [update], NOW)[0]
    assert marked.handed_over
    assert direction_of_old(Plan(row_updates=(marked,))) is Direction.RELABEL
    # Without the run's instant the planner does not say.
    assert not _handovers(FamilyView(family="s:f", rows=(OLD, new)), [update])[0].handed_over
    # A successor joining from its own family: a merge, weighed as a hide.
    joining = dataclasses.replace(new, doc_family_id="s:g")
    joined = RowUpdate(new.doc_id, "s:g", joining, new, ("family",))
    found = _handovers(FamilyView(family="s:f", rows=(OLD, joining)), [update, joined], NOW)
    assert not found[0].handed_over
    assert direction_of_old(Plan(row_updates=tuple(found))) is Direction.HIDE
    # A successor that serves nothing now: held, or not begun.
    held = dataclasses.replace(new, quarantined=True, quarantine_reason="in_place_edit")
    later = version("new", effective_from=NOW + DAY)
    for row in (held, later):
        view = FamilyView(family="s:f", rows=(OLD, row))
        assert not _handovers(view, [update], NOW)[0].handed_over
    # Named but not ingested: no row takes over.
    assert not _handovers(FamilyView(family="s:f", rows=(OLD,)), [update], NOW)[0].handed_over


instants = st.integers(min_value=-5, max_value=40).map(lambda d: NOW + d * DAY)
states = st.sampled_from([VersionState.CURRENT, VersionState.PENDING, VersionState.RETIRED])


def test_a_scheduled_successor_brought_forward_takes_over() -> None:
    """Scheduled ahead (served later), its start brought forward to serve now alone in the
    family that served ``OLD`` now: the same handover, made earlier, a relabel. A draft made
    current (served at no instant before), one served now beside ``OLD``, one brought forward
    where the family served nothing now, and one moving family are still reveals."""
    ahead = version("new", version_state=VersionState.PENDING, effective_from=NOW + 10 * DAY)
    now_on = version("new", effective_from=NOW - DAY)
    gone = dataclasses.replace(
        OLD, version_state=VersionState.SUPERSEDED, superseded_by="s:new", effective_to=NOW - DAY
    )
    old = RowUpdate(OLD.doc_id, "s:f", OLD, gone, ("dates",))

    def direction(before: Document, after: Document, *others: RowUpdate) -> Direction:
        update = RowUpdate(after.doc_id, "s:f", before, after, ("family",))
        rows = (before, *(o.before for o in others))
        marked = _handovers(FamilyView(family="s:f", rows=rows), [update, *others], NOW)
        found = effects(Plan(row_updates=marked), NOW)
        return next(e.direction for e in found if e.doc_id == after.doc_id)

    assert direction(ahead, now_on, old) is Direction.RELABEL
    draft = dataclasses.replace(ahead, version_state=VersionState.DRAFT)
    assert direction(draft, now_on, old) is Direction.REVEAL
    kept = RowUpdate(OLD.doc_id, "s:f", OLD, dataclasses.replace(OLD, title="t"), ("r",))
    assert direction(ahead, now_on, kept) is Direction.REVEAL
    assert direction(ahead, now_on) is Direction.REVEAL
    moved = dataclasses.replace(now_on, doc_family_id="s:g")
    assert direction(ahead, moved, old) is Direction.REVEAL


@st.composite
def families(draw: st.DrawFn) -> tuple[Plan, list[Document]]:
    """``OLD`` closed at a random instant ahead, beside 0-3 other versions of random windows
    and states, each changed by the plan or not, some in another family."""
    end = draw(st.integers(min_value=1, max_value=30).map(lambda d: NOW + d * DAY))
    updates = [(OLD, closed(end))]
    after = [closed(end)]
    for n in range(draw(st.integers(min_value=0, max_value=3))):
        start = draw(instants)
        stop = draw(st.one_of(st.just(OPEN_END), instants))
        row = version(
            f"v{n}",
            version_state=draw(states),
            effective_from=start,
            effective_to=stop,
            doc_family_id=draw(st.sampled_from(["s:f", "s:f", "s:g"])),
        )
        if draw(st.booleans()):
            before = dataclasses.replace(row, doc_family_id="s:other", title="before")
            updates.append((before, row))
        after.append(row)
    return plan(*updates), after


@given(families())
@settings(max_examples=examples(300))
def test_a_relabelled_early_end_is_always_taken_over(drawn: tuple[Plan, list[Document]]) -> None:
    """Weighed a relabel only where a version of the family (in the plan) serves at the new
    end; a hide only where one instant from now on sees the family serve nothing."""
    found, after = drawn
    end = after[0].effective_to
    family = [r for r in after if r.doc_family_id == "s:f"]
    served_at_end = any(row_served(r, end) for r in family[1:])
    direction = direction_of_old(found)
    assert direction in (Direction.HIDE, Direction.RELABEL)
    if direction is Direction.RELABEL:
        assert served_at_end
    if direction is Direction.HIDE:
        # (the plan's rows only: an unchanged row of the family is the planner's, above)
        changed = {u.after.doc_id for u in found.row_updates}
        dark = [t for t in range(60) if not any(
            row_served(r, NOW + t * DAY) for r in family if r.doc_id in changed
        )]  # fmt: skip
        assert dark, "weighed a hide while the family serves at every instant from now on"
