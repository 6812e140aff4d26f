"""Issue 38: a family the scan settles from its row tuples (``settling.quiet_rows``) is one the
four checks it answers for find nothing in, whatever the instant, the sources' TTLs, the
``unknown_siblings`` policy and the checks chosen, as long as its chunks are as its rows say
(what the scan asks of the tally before it settles anything). The engine's run with the
shortcut against the run without it: ``tests/integration/test_settled_families.py``."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st
from test_check_family_once import DAY, FAMILY, NOW, SRC, families, tidy_versions

from reconciler.check_inputs import CheckContext, ChunkAggregate, FamilyView, SourceState
from reconciler.checks import parts
from reconciler.model import EXPECTED_FIELDS, OPEN_END, Document, VersionState, stored_form
from reconciler.pipeline import checking
from reconciler.pipeline.settling import QUIET_CHECKS, Settling, quiet_rows


def as_expected(row: Document) -> tuple[object, ...]:
    """The row as the table's ``iter_expected`` gives it (the state as stored)."""
    values = {name: getattr(row, name) for name in EXPECTED_FIELDS}
    values["version_state"] = str(row.version_state)
    return tuple(values[name] for name in EXPECTED_FIELDS)


@st.composite
def clean_chunks(draw: st.DrawFn, rows: tuple[Document, ...]) -> dict[str, ChunkAggregate]:
    """Chunks as a clean tally gives them: none (a row that says none), or at least as many
    as the row says, every one carrying its row's payload and text."""
    chunks = {}
    for row in rows:
        if not row.chunk_count and draw(st.booleans()):
            continue  # (no chunk: the tally has no aggregate)
        count = draw(st.integers(min_value=max(row.chunk_count, 1), max_value=row.chunk_count + 2))
        chunks[row.doc_id] = ChunkAggregate(count=count, matching=count)
    return chunks


def context(hours: int, ttl: bool, read: bool, report: bool) -> CheckContext:
    state = SourceState(
        SRC,
        readable=read,
        scanned=read,
        ttl=DAY if ttl else None,
        last_success_at=NOW - 3 * DAY,
    )
    return CheckContext(
        now=NOW + timedelta(hours=hours),
        sources={SRC: state},
        unknown_siblings="report" if report else "supersede",
    )


def settling_of(ctx: CheckContext) -> Settling:
    """As ``settling.settling`` makes it for a run."""
    return Settling(ctx.now, frozenset(name for name in ctx.sources if ctx.ttl_expired(name)))


@settings(max_examples=600, deadline=None)
@given(
    data=st.data(),
    view=families(),
    hours=st.integers(min_value=-5 * 24, max_value=5 * 24),
    ttl=st.booleans(),
    read=st.booleans(),
    report=st.booleans(),
    checks=st.lists(st.sampled_from(sorted(QUIET_CHECKS)), unique=True, min_size=1),
)
def test_a_quiet_family_is_one_the_checks_find_nothing_in(
    data: st.DataObject,
    view: FamilyView,
    hours: int,
    ttl: bool,
    read: bool,
    report: bool,
    checks: list[str],
) -> None:
    ctx = context(hours, ttl, read, report)
    rows = view.rows
    clean = FamilyView(
        family=FAMILY,
        rows=rows,
        chunks=data.draw(clean_chunks(rows)),
        registered=frozenset(d.doc_id for d in rows),
    )
    if not quiet_rows([as_expected(row) for row in rows], settling_of(ctx)):
        return
    for name in sorted(QUIET_CHECKS):  # (each part, on a view of its own: no shared memo)
        alone = FamilyView(family=FAMILY, rows=rows, chunks=clean.chunks)
        assert parts()[name].family(alone, ctx) == [], name  # type: ignore[misc]
    ordered = [name for name in parts() if name in checks]
    outcome = checking.check_family(clean, ctx, ordered)
    assert outcome.findings == ()
    assert outcome.plan is checking.NO_PLAN


def test_a_tidy_family_is_quiet_and_each_departure_is_not() -> None:
    """Not vacuous: a family as the time rule leaves it is quiet; a second served version, a
    quarantine, a source past its TTL, an empty window, a pending version past its start, a
    successor named by the one in force and a superseded version that starts after it and names
    a successor each make it not quiet (and each is a finding)."""
    old, new = tidy_versions()
    ctx = context(0, ttl=True, read=True, report=False)
    quiet = settling_of(ctx)
    assert quiet_rows([as_expected(old), as_expected(new)], quiet)
    departures = {
        "served twice": (replace(old, version_state=VersionState.CURRENT,
                                 effective_to=OPEN_END, superseded_by=None), new),
        "quarantined": (old, replace(new, quarantined=True, quarantine_reason="stale_chunks")),
        "empty window": (old, replace(new, effective_to=new.effective_from)),
        "pending past its start": (old, replace(new, version_state=VersionState.PENDING)),
        "names a successor": (old, replace(new, superseded_by=old.doc_id)),
        # (a superseded version after it that names a successor closes it: the time rule's
        # timeline, which ``quiet_rows`` does not build)
        "a later boundary": (replace(old, doc_version=3, effective_from=NOW - DAY,
                                     effective_to=OPEN_END, superseded_by=f"{SRC}:d9"), new),
    }  # fmt: skip
    for why, rows in departures.items():
        assert not quiet_rows([as_expected(row) for row in rows], quiet), why
        view = FamilyView(family=FAMILY, rows=rows)
        assert checking.check_family(view, ctx, sorted(QUIET_CHECKS)).findings, why
    expired = settling_of(context(0, ttl=True, read=False, report=False))
    assert not quiet_rows([as_expected(old), as_expected(new)], expired)


def as_stored(row: Document) -> tuple[object, ...]:
    """The row as the SQLite table's ``iter_expected`` gives it: the instants as stored."""
    values = dict(zip(EXPECTED_FIELDS, as_expected(row), strict=True))
    for name in ("effective_from", "effective_to"):
        if values[name] is not None:
            values[name] = stored_form(values[name])  # type: ignore[arg-type]
    return tuple(values[name] for name in EXPECTED_FIELDS)


@settings(max_examples=600, deadline=None)
@given(
    view=families(),
    hours=st.integers(min_value=-5 * 24, max_value=5 * 24),
    ttl=st.booleans(),
    read=st.booleans(),
)
def test_a_family_read_as_stored_texts_is_judged_as_read_as_instants(
    view: FamilyView, hours: int, ttl: bool, read: bool
) -> None:
    """Issue 38: the scan compares the SQLite table's stored texts, never parsed; the family
    is quiet exactly when it is with its instants parsed (whatever ``now``)."""
    quiet = settling_of(context(hours, ttl, read, report=False))
    assert quiet_rows([as_stored(r) for r in view.rows], quiet) == quiet_rows(
        [as_expected(r) for r in view.rows], quiet
    )


def test_a_family_with_an_instant_spelt_otherwise_is_not_told_quiet() -> None:
    """Only the stored form compares as its instant does: a family holding another spelling
    of an instant (a writer other than the reconciler's), or instants of both kinds, is left
    to the full check, which parses them."""
    old, new = tidy_versions()
    quiet = settling_of(context(0, ttl=True, read=True, report=False))
    stored = [as_stored(old), as_stored(new)]
    assert quiet_rows(stored, quiet)
    at = EXPECTED_FIELDS.index("effective_from")
    start = new.effective_from
    assert start is not None
    for other in (start.isoformat(), start.replace(tzinfo=None).isoformat(), "garbage"):
        respelt = (*stored[1][:at], other, *stored[1][at + 1 :])
        assert not quiet_rows([stored[0], respelt], quiet), other
    mixed = (*stored[1][:at], start, *stored[1][at + 1 :])
    assert not quiet_rows([stored[0], mixed], quiet)
    assert not quiet_rows([as_expected(old), as_stored(new)], quiet)
    # (a value that is no instant, never taken for the open window: SQLite keeps a 0 as one)
    to = EXPECTED_FIELDS.index("effective_to")
    for kind in (as_stored, as_expected):
        rows = [kind(old), kind(new)]
        for other in (0, 0.0, False, b""):
            assert not quiet_rows([rows[0], (*rows[1][:to], other, *rows[1][to + 1 :])], quiet)


#: Other spellings of an instant than the stored form, as another writer of the table may
#: leave them (each reads back as the same instant).
OTHER_SPELLINGS = (
    lambda at: at.isoformat(),
    lambda at: at.astimezone(timezone(timedelta(hours=2))).isoformat(),
    lambda at: at.replace(tzinfo=None).isoformat(),
    lambda at: at.replace(tzinfo=None).isoformat(" "),
)


@settings(max_examples=600, deadline=None)
@given(
    data=st.data(),
    view=families(),
    hours=st.integers(min_value=-5 * 24, max_value=5 * 24),
)
def test_a_family_with_instants_spelt_otherwise_is_never_told_quiet_wrongly(
    data: st.DataObject, view: FamilyView, hours: int
) -> None:
    """Whatever instants of a family another writer spelt otherwise, ``quiet_rows`` of the
    rows as read never says quiet where the family with its instants parsed is not."""
    quiet = settling_of(context(hours, ttl=True, read=True, report=False))
    rows = []
    for row in view.rows:
        values = dict(zip(EXPECTED_FIELDS, as_stored(row), strict=True))
        for name in ("effective_from", "effective_to"):
            at = getattr(row, name)
            if at is not None and data.draw(st.booleans()):
                values[name] = data.draw(st.sampled_from(OTHER_SPELLINGS))(at)
        rows.append(tuple(values[name] for name in EXPECTED_FIELDS))
    if quiet_rows(rows, quiet):
        assert quiet_rows([as_expected(r) for r in view.rows], quiet)
