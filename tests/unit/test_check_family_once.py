"""Issue 38: ``check_family`` works out a run's chosen parts once (not once a family) and plans
nothing for a family without findings (its declared rows are not even worked out). The promise:
for random families, chunks, sources, instants, checks and ``--doc``, it returns exactly the
outcome of the plain composition of the registry's parts (``_plainly`` below: every part,
the truth, ``plan_family``, the consequence round), findings, plan and the checks timed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.check_inputs import CheckContext, ChunkAggregate, FamilyView, SourceState
from reconciler.checks import CHECKS, parts, siblings
from reconciler.model import OPEN_END, Document, SourceDocument, VersionState
from reconciler.payload import normalize, payload_for
from reconciler.pipeline import checking
from reconciler.pipeline.values import FamilyOutcome
from reconciler.planning import Plan, as_planned, changes_a_row, plan_family
from reconciler.rules.time_rule import settle

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
SRC = "kb"
FAMILY = "kb:f"
PER_FAMILY = [name for name in CHECKS if parts()[name].family is not None]

_offsets = st.one_of(st.none(), st.integers(min_value=-4, max_value=4))


@st.composite
def families(draw: st.DrawFn) -> FamilyView:
    """A family of up to five versions (states, windows, links and quarantines at random),
    each with chunks or none (some drifted, stale, missing or archived), and, for some, the
    source's version of it."""
    rows: list[Document] = []
    for i in range(draw(st.integers(min_value=0, max_value=5))):
        start, end = draw(_offsets), draw(_offsets)
        others = [d.doc_id for d in rows]
        quarantined = draw(st.booleans())
        rows.append(
            Document(
                doc_id=f"{SRC}:d{i}",
                source=SRC,
                source_key=f"d{i}",
                doc_family_id=FAMILY,
                doc_version=draw(st.integers(min_value=1, max_value=3)),
                version_state=draw(st.sampled_from(list(VersionState))),
                effective_from=None if start is None else NOW + start * DAY,
                effective_to=OPEN_END if end is None else NOW + end * DAY,
                superseded_by=(
                    draw(st.sampled_from(others)) if others and draw(st.booleans()) else None
                ),
                source_hash=draw(st.sampled_from([None, "h1", "h2"])),
                quarantined=quarantined,
                quarantine_reason=(
                    draw(st.sampled_from(["stale_chunks", "ttl_expired", "orphan_chunks"]))
                    if quarantined
                    else None
                ),
                chunk_count=draw(st.integers(min_value=0, max_value=3)),
            )
        )
    if draw(st.booleans()):
        # A tidy family: as the time rule leaves it now, no quarantine, every chunk right
        # (most families of a corpus; the instant drawn may still pass one of its boundaries).
        settled = settle([replace(d, quarantined=False, quarantine_reason=None) for d in rows], NOW)
        tidy = {
            d.doc_id: ChunkAggregate(count=d.chunk_count or 1, matching=d.chunk_count or 1)
            for d in settled.values()
        }
        return FamilyView(
            family=FAMILY,
            rows=tuple(settled.values()),
            chunks=tidy,
            registered=frozenset(settled),
        )
    chunks: dict[str, ChunkAggregate] = {}
    for doc in rows:
        if not draw(st.booleans()):
            continue
        count = draw(st.integers(min_value=0, max_value=4))
        drifted = draw(st.integers(min_value=0, max_value=count))
        variants = {}
        if drifted:
            other = draw(st.sampled_from(rows))
            variants[normalize(payload_for(other))] = drifted
        chunks[doc.doc_id] = ChunkAggregate(
            count=count,
            matching=count - drifted,
            variants=variants,
            stale=draw(st.integers(min_value=0, max_value=count)),
            archived=draw(st.integers(min_value=0, max_value=count)),
        )
    sources = {
        doc.doc_id: SourceDocument(
            source=SRC,
            source_key=doc.source_key,
            doc_id=doc.doc_id,
            content_hash=draw(st.sampled_from(["h1", "h2"])),
            family=FAMILY,
            version=doc.doc_version,
            state=draw(st.sampled_from([None, *VersionState])),
            effective_from=doc.effective_from,
            superseded_by=doc.superseded_by if draw(st.booleans()) else None,
        )
        for doc in rows
        if draw(st.booleans())
    }
    return FamilyView(
        family=FAMILY,
        rows=tuple(rows),
        sources=sources,
        chunks=chunks,
        registered=frozenset(d.doc_id for d in rows),
    )


def contexts(days: int, readable: bool, ttl: bool, split: bool) -> CheckContext:
    state = SourceState(
        SRC,
        readable=readable,
        scanned=True,
        ttl=DAY if ttl else None,
        last_success_at=NOW - 3 * DAY if not readable else NOW,
    )
    return CheckContext(
        now=NOW + days * DAY,
        sources={SRC: state},
        split=("main", "archive") if split else None,
    )


def _plainly(
    view: FamilyView, ctx: CheckContext, checks: list[str], doc_id: str | None
) -> FamilyOutcome:
    """The plain composition, every part looked up on every family (as before issue 38)."""
    chosen = [parts()[name] for name in checks]
    findings = []
    consequences = False
    for part in chosen:
        if part.family is None or not part.check.per_family:
            continue
        found = part.family(view, ctx)
        findings += found
        consequences |= bool(part.check.consequence) and any(map(changes_a_row, found))
    truths = [p.truth for p in chosen if p.truth is not None]
    truth = truths[0](view, ctx) if truths else None
    split = ctx.split is not None
    plan = plan_family(view, findings, truth, split=split, now=ctx.now)
    rounds = sorted(
        (p for p in chosen if p.check.consequence and p.family is not None),
        key=lambda p: p.check.consequence,
    )
    for _round in range(3 if plan.row_updates or plan.payload_targets or consequences else 0):
        after = as_planned(view, plan)
        extra = [f for p in rounds if p.family for f in p.family(after, ctx) if changes_a_row(f)]
        if not extra:
            break
        findings += extra
        plan = plan_family(view, findings, truth, split=split, now=ctx.now)
    findings = [f for f in findings if doc_id is None or f.doc_id == doc_id]
    if doc_id is not None:
        plan = plan_family(view, findings, truth, split=split, now=ctx.now)
    timed = {p.name for p in chosen if p.family is not None and p.check.per_family}
    return FamilyOutcome(findings=tuple(findings), plan=plan, timings=dict.fromkeys(timed, 0.0))


@settings(max_examples=400, deadline=None)
@given(
    view=families(),
    days=st.integers(min_value=-5, max_value=5),
    readable=st.booleans(),
    ttl=st.booleans(),
    split=st.booleans(),
    checks=st.lists(st.sampled_from(PER_FAMILY), unique=True, min_size=1),
    scoped=st.booleans(),
)
def test_check_family_is_the_plain_composition_of_the_parts(
    view: FamilyView,
    days: int,
    readable: bool,
    ttl: bool,
    split: bool,
    checks: list[str],
    scoped: bool,
) -> None:
    ctx = contexts(days, readable, ttl, split)
    doc_id = view.rows[0].doc_id if scoped and view.rows else None
    ordered = [name for name in CHECKS if name in checks]  # (as a run orders them)
    fresh = FamilyView(
        **{f: getattr(view, f) for f in FamilyView.__dataclass_fields__ if f != "memo"}
    )
    got = checking.check_family(view, ctx, ordered, doc_id)
    want = _plainly(fresh, ctx, ordered, doc_id)
    assert got.findings == want.findings
    assert got.plan == want.plan
    assert set(got.timings) == set(want.timings)
    if not got.findings:
        assert got.plan == Plan()


@settings(max_examples=400, deadline=None)
@given(
    view=families(),
    days=st.integers(min_value=-5, max_value=5),
    report=st.booleans(),
)
def test_the_siblings_shortcut_finds_what_the_whole_check_finds(
    view: FamilyView, days: int, report: bool
) -> None:
    """A family the siblings check calls quiet (no payload variant, every row as the time
    rule leaves it, at most one served) is one the whole check finds nothing in; any other
    family is checked in full (issue 38: the shortcut is taken by most families)."""
    ctx = replace(
        contexts(days, readable=True, ttl=False, split=False),
        unknown_siblings="report" if report else "supersede",
    )
    fresh = FamilyView(
        **{f: getattr(view, f) for f in FamilyView.__dataclass_fields__ if f != "memo"}
    )
    assert siblings.check_siblings(view, ctx) == siblings.check_in_full(fresh, ctx)
    if siblings.quiet(view, view.settled(ctx.now, ctx.unknown_siblings), ctx.now):
        assert siblings.check_in_full(fresh, ctx) == []


def tidy_versions() -> tuple[Document, Document]:
    """A family as the time rule leaves it now: a superseded version and its successor in
    force (``test_settling`` too)."""
    old = Document(
        doc_id=f"{SRC}:d0", source=SRC, source_key="d0", doc_family_id=FAMILY, doc_version=1,
        version_state=VersionState.SUPERSEDED, effective_from=NOW - 9 * DAY,
        effective_to=NOW - 2 * DAY, superseded_by=f"{SRC}:d1",
    )  # fmt: skip
    new = replace(old, doc_id=f"{SRC}:d1", source_key="d1", doc_version=2,
                  version_state=VersionState.CURRENT, effective_from=NOW - 2 * DAY,
                  effective_to=OPEN_END, superseded_by=None)  # fmt: skip
    return old, new


def test_a_tidy_family_is_quiet_and_a_second_served_version_is_not() -> None:
    """The shortcut is taken (not vacuous): a family as the time rule leaves it, one version
    served, is quiet; the same with the older version set back to current is not, and the
    whole check reports it."""
    old, new = tidy_versions()
    ctx = contexts(0, readable=True, ttl=False, split=False)
    tidy = FamilyView(family=FAMILY, rows=(old, new), registered=frozenset({new.doc_id}))
    assert siblings.quiet(tidy, tidy.settled(ctx.now), ctx.now)
    assert siblings.check_siblings(tidy, ctx) == []
    back = replace(old, version_state=VersionState.CURRENT, effective_to=OPEN_END,
                   superseded_by=None)  # fmt: skip
    live = FamilyView(family=FAMILY, rows=(back, new), registered=frozenset({new.doc_id}))
    assert not siblings.quiet(live, live.settled(ctx.now), ctx.now)
    assert [f.kind for f in siblings.check_siblings(live, ctx)] == ["live_siblings"]


def test_two_unknown_versions_left_side_by_side_are_not_quiet() -> None:
    """Under ``unknown_siblings = "report"`` the time rule leaves two served ``unknown``
    versions as they are: every row is as settled and no chunk drifted, yet two are served,
    so the family is not quiet and the whole check warns."""
    first = Document(
        doc_id=f"{SRC}:d0", source=SRC, source_key="d0", doc_family_id=FAMILY, doc_version=1,
        version_state=VersionState.UNKNOWN, effective_from=NOW - 3 * DAY,
    )  # fmt: skip
    second = replace(first, doc_id=f"{SRC}:d1", source_key="d1", doc_version=2,
                     effective_from=NOW - DAY)  # fmt: skip
    ctx = replace(contexts(0, readable=True, ttl=False, split=False), unknown_siblings="report")
    view = FamilyView(family=FAMILY, rows=(first, second))
    settled = view.settled(ctx.now, "report")
    assert all(settled[row.doc_id] is row for row in view.rows)
    assert not siblings.quiet(view, settled, ctx.now)
    assert [f.severity for f in siblings.check_siblings(view, ctx)] == ["warning"]
