"""A source that contradicts itself is a finding (issue 27, items 2 and 4): a status that says
in force beside a successor in force already (PEP 248: ``Final`` and ``Superseded-By: 249``),
and a successor that starts before its predecessor (PEP 102, 2002, superseded by 101, 2001).
Never a write; a vault's scheduled successor (still ahead) is no contradiction. Plain values
only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.check_inputs import CheckContext, FamilyView, SourceState
from reconciler.checks.contradictions import check_contradictions, contradictions
from reconciler.checks.family import check_family
from reconciler.model import Document, Finding, Severity, SourceDocument, VersionState
from reconciler.planning import repairs

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DAY = timedelta(days=1)
CURRENT, SUPERSEDED = VersionState.CURRENT, VersionState.SUPERSEDED


def doc(key: str, state: VersionState | None = None, **fields: object) -> SourceDocument:
    return SourceDocument(
        source="s", source_key=key, doc_id=f"s:{key}", content_hash="h", state=state, **fields
    )  # type: ignore[arg-type]


def kinds(findings: list[Finding]) -> list[str]:
    return [f.kind for f in findings]


def ctx(policy: str = "report") -> CheckContext:
    read = SourceState("s", readable=True, scanned=True, documents=2)
    return CheckContext(now=NOW, sources={"s": read}, status_contradicts_link=policy)


# -- a status a link contradicts -------------------------------------------------------------


def test_a_status_in_force_beside_a_successor_in_force_is_a_warning_naming_both() -> None:
    pep_249 = doc("pep-0249", CURRENT, effective_from=datetime(1999, 4, 12, tzinfo=UTC))
    pep_248 = doc(
        "pep-0248",
        CURRENT,
        effective_from=datetime(1996, 5, 8, tzinfo=UTC),
        superseded_by=pep_249.doc_id,
    )
    [finding] = contradictions(pep_248, [pep_249], now=NOW, family="f")
    assert (finding.check, finding.kind, finding.severity) == (
        "family",
        "status_contradicts_link",
        Severity.WARNING,
    )
    assert finding.doc_id == "s:pep-0248"
    assert finding.actual["successors_in_force"] == [
        {"doc_id": "s:pep-0249", "effective_from": pep_249.effective_from}
    ]
    assert "s:pep-0249" in finding.action
    assert "1999-04-12" in finding.action
    assert finding.action.startswith("none: declared links win")
    assert not repairs(finding)


def test_a_scheduled_successor_is_no_contradiction_until_it_starts() -> None:
    """A vault's idiom: ``status: current`` and ``superseded_by: v2``, v2 from next year."""
    v2 = doc("v2", CURRENT, effective_from=NOW + 30 * DAY)
    v1 = doc("v1", CURRENT, effective_from=NOW - 300 * DAY, superseded_by=v2.doc_id)
    assert contradictions(v1, [v2], now=NOW, family="f") == []
    assert contradictions(v1, [v2], now=NOW + 29 * DAY, family="f") == []
    # from its start on, the note still saying current is stale: reported, unless ignored
    for later in (NOW + 30 * DAY, NOW + 400 * DAY):
        assert kinds(contradictions(v1, [v2], now=later, family="f")) == ["status_contradicts_link"]
        assert contradictions(v1, [v2], now=later, family="f", status_policy="ignore") == []


@pytest.mark.parametrize("state", [VersionState.DRAFT, VersionState.RETIRED])
def test_a_successor_that_never_comes_into_force_contradicts_nothing(state: VersionState) -> None:
    successor = doc("v2", state, effective_from=NOW - 900 * DAY)
    v1 = doc("v1", CURRENT, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    assert contradictions(v1, [successor], now=NOW, family="f") == []


def test_an_undated_successor_is_in_force_from_the_start() -> None:
    v2 = doc("v2", None)
    v1 = doc("v1", CURRENT, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    assert kinds(contradictions(v1, [v2], now=NOW, family="f")) == ["status_contradicts_link"]


def test_superseded_beside_successors_that_never_come_into_force_says_it_is_served() -> None:
    """Issue 34: ``superseded`` while its named successor is a draft is served as current
    (declared links close nothing until a successor is in force): a warning says so. A
    ``retired`` one is hidden as it says: no finding."""
    draft = doc("v2", VersionState.DRAFT, effective_from=NOW - 10 * DAY)
    v1 = doc("v1", SUPERSEDED, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    [finding] = contradictions(v1, [draft], now=NOW, family="f")
    assert (finding.kind, finding.severity) == ("successor_not_in_force", Severity.WARNING)
    assert finding.actual["served"] == "current"
    assert "s:v2 (draft)" in finding.action
    retired = doc("v1", VersionState.RETIRED, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    assert contradictions(retired, [draft], now=NOW, family="f") == []
    assert contradictions(v1, [draft], now=NOW, family="f", status_policy="ignore") == []


def test_superseded_beside_a_withdrawn_successor_is_routine() -> None:
    """A successor the source retired was withdrawn: the version it replaced is in force again
    (the time rule), the everyday change of tests and real vaults alike, and no finding. Kept
    from the merge of issue 34 with five suites that retire a v2 and expect a clean check."""
    withdrawn = doc("v2", VersionState.RETIRED, effective_from=NOW - 10 * DAY)
    v1 = doc("v1", SUPERSEDED, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    assert contradictions(v1, [withdrawn], now=NOW, family="f") == []
    draft = doc("v3", VersionState.DRAFT, effective_from=NOW - DAY)
    assert [f.kind for f in contradictions(v1, [withdrawn, draft], now=NOW, family="f")] == [
        "successor_not_in_force"
    ]
    pending = doc("v2", VersionState.PENDING, effective_from=NOW + 10 * DAY)
    assert contradictions(v1, [pending], now=NOW, family="f") == []  # scheduled: no finding


@pytest.mark.parametrize("state", [SUPERSEDED, None, VersionState.DRAFT, VersionState.RETIRED])
def test_a_version_that_does_not_say_in_force_contradicts_no_link(
    state: VersionState | None,
) -> None:
    v2 = doc("v2", CURRENT, effective_from=NOW - 10 * DAY)
    v1 = doc("v1", state, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    assert contradictions(v1, [v2], now=NOW, family="f") == []


def test_a_successor_known_only_by_its_row_counts_by_its_row_start() -> None:
    row = Document(
        doc_id="s:v2",
        source="s",
        source_key="v2",
        doc_family_id="f",
        doc_version=2,
        version_state=VersionState.RETIRED,  # the rule's answer, not a declaration
        effective_from=NOW - DAY,
    )
    v1 = doc("v1", CURRENT, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    assert kinds(contradictions(v1, [row], now=NOW, family="f")) == ["status_contradicts_link"]


# -- a successor older than its predecessor --------------------------------------------------


def test_a_successor_dated_before_its_predecessor_is_a_warning_naming_both_dates() -> None:
    pep_101 = doc("pep-0101", CURRENT, effective_from=datetime(2001, 8, 22, tzinfo=UTC))
    pep_102 = doc(
        "pep-0102",
        SUPERSEDED,
        effective_from=datetime(2002, 1, 9, tzinfo=UTC),
        superseded_by=pep_101.doc_id,
    )
    [finding] = contradictions(pep_102, [pep_101], now=NOW, family="f")
    assert (finding.kind, finding.severity, finding.doc_id) == (
        "successor_predates",
        Severity.WARNING,
        "s:pep-0102",
    )
    assert finding.actual == {
        "effective_from": pep_102.effective_from,
        "successors": [{"doc_id": "s:pep-0101", "effective_from": pep_101.effective_from}],
    }
    for text in ("s:pep-0101", "2001-08-22", "s:pep-0102", "2002-01-09", "never in force"):
        assert text in finding.action
    assert not repairs(finding)


def test_a_successor_from_the_same_instant_or_undated_does_not_predate() -> None:
    start = NOW - 300 * DAY
    v1 = doc("v1", SUPERSEDED, effective_from=start, superseded_by="s:v2")
    assert contradictions(v1, [doc("v2", CURRENT, effective_from=start)], now=NOW, family="f") == []
    assert contradictions(v1, [doc("v2", None)], now=NOW, family="f") == []


# -- the family check carries them -----------------------------------------------------------


def test_the_family_check_reports_them_for_its_source_documents_and_plans_nothing() -> None:
    v2 = doc("v2", CURRENT, effective_from=NOW - 400 * DAY)
    v1 = doc("v1", CURRENT, effective_from=NOW - 300 * DAY, superseded_by="s:v2")
    lone = doc("lone", SUPERSEDED, effective_from=NOW - 900 * DAY)  # PEPs 6 and 411: nothing
    view = FamilyView(
        family="f",
        sources={d.doc_id: d for d in (v1, v2, lone)},
        successors={"s:v2": v2},
        registered=frozenset({"s:v2"}),
    )
    found = check_contradictions(view, ctx())
    assert sorted((f.kind, f.doc_id) for f in found) == [
        ("status_contradicts_link", "s:v1"),
        ("successor_predates", "s:v1"),
    ]
    assert {(f.kind, f.doc_id) for f in found} <= {
        (f.kind, f.doc_id) for f in check_family(view, ctx())
    }
    assert kinds(check_contradictions(view, ctx("ignore"))) == ["successor_predates"]


def test_every_declared_successor_counts_fan_out_and_fan_in() -> None:
    """PEP-shaped: one version with two successors, one still ahead; two versions replaced
    by one (PEPs 397 and 486 by 773, declared by 773's ``Replaces``)."""
    ahead = doc("ahead", CURRENT, effective_from=NOW + 10 * DAY)
    begun = doc("begun", CURRENT, effective_from=NOW - 10 * DAY)
    fan_out = doc(
        "v1",
        CURRENT,
        effective_from=NOW - 300 * DAY,
        superseded_by="s:ahead",
        successors=("s:ahead", "s:begun"),
    )
    pep_397 = doc("pep-0397", CURRENT, effective_from=NOW - 900 * DAY, successors=("s:begun",))
    pep_486 = doc("pep-0486", CURRENT, effective_from=NOW - 800 * DAY, successors=("s:begun",))
    view = FamilyView(
        family="f",
        sources={d.doc_id: d for d in (fan_out, pep_397, pep_486, ahead, begun)},
        successors={"s:ahead": ahead, "s:begun": begun},
    )
    found = check_contradictions(view, ctx())
    assert sorted((f.doc_id, f.expected["superseded_by"]) for f in found) == [
        ("s:pep-0397", "s:begun"),
        ("s:pep-0486", "s:begun"),
        ("s:v1", "s:begun"),  # the one in force, not the first declared
    ]
    [of_v1] = [f for f in found if f.doc_id == "s:v1"]
    assert [s["doc_id"] for s in of_v1.actual["successors_in_force"]] == ["s:begun"]


# -- the property: a finding iff the headers say so ------------------------------------------

STATES = st.sampled_from([*VersionState, None])
STARTS = st.one_of(st.none(), st.integers(-5, 5).map(lambda d: NOW + d * DAY))


@st.composite
def successors(draw: st.DrawFn) -> list[SourceDocument | Document]:
    found: list[SourceDocument | Document] = []
    for n in range(draw(st.integers(0, 3))):
        state, start = draw(STATES), draw(STARTS)
        if draw(st.booleans()):
            found.append(doc(f"s{n}", state, effective_from=start))
        else:
            found.append(
                Document(
                    doc_id=f"s:s{n}",
                    source="s",
                    source_key=f"s{n}",
                    doc_family_id="f",
                    doc_version=n + 2,
                    version_state=state or VersionState.UNKNOWN,
                    effective_from=start,
                )
            )
    return found


def oracle(
    state: VersionState | None,
    start: datetime | None,
    named: list[SourceDocument | Document],
    policy: str,
) -> dict[str, set[str]]:
    """Written from the issue, not from the code: kind -> the successors it names."""
    declared_never = {"draft", "retired"}
    entering = [
        s
        for s in named
        if not (isinstance(s, SourceDocument) and s.state is not None and s.state in declared_never)
    ]
    said_in_force = state is not None and state.value in {"current", "pending"}
    expected: dict[str, set[str]] = {}
    begun = {s.doc_id for s in entering if s.effective_from is None or s.effective_from <= NOW}
    if said_in_force and begun and policy == "report":
        expected["status_contradicts_link"] = begun
    older = {
        s.doc_id
        for s in entering
        if start is not None and s.effective_from is not None and s.effective_from < start
    }
    if older:
        expected["successor_predates"] = older
    said_out = state is not None and state.value == "superseded"
    drafts = [
        s
        for s in named
        if isinstance(s, SourceDocument) and s.state is not None and s.state.value == "draft"
    ]
    if said_out and drafts and not entering and policy == "report":
        expected["successor_not_in_force"] = {s.doc_id for s in named}
    return expected


@given(STATES, STARTS, successors(), st.sampled_from(["report", "ignore"]))
def test_a_finding_iff_the_oracle_says_status_in_force_and_successor_started_or_older(
    state: VersionState | None,
    start: datetime | None,
    named: list[SourceDocument | Document],
    policy: str,
) -> None:
    v1 = doc("v1", state, effective_from=start)
    found = contradictions(v1, named, now=NOW, family="f", status_policy=policy)
    listed = {
        "status_contradicts_link": "successors_in_force",
        "successor_predates": "successors",
        "successor_not_in_force": "successors",
    }
    got = {f.kind: {s["doc_id"] for s in f.actual[listed[f.kind]]} for f in found}
    assert got == oracle(state, start, named, policy)
    assert len(found) == len(got)  # one finding per kind
    for finding in found:
        assert (finding.doc_id, finding.severity, repairs(finding)) == (
            "s:v1",
            Severity.WARNING,
            False,
        )
