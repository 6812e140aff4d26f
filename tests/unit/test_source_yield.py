"""A source that yields nothing, or nothing but undeclared versions, is a finding (issue 27,
item 7), never a write; and ingest derives new rows with the time rule over each family, as the
family check does (issue 24, item 12). Plain values only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.check_inputs import SourceState
from reconciler.checks.source_yield import check_source_yield
from reconciler.model import (
    OPEN_END,
    Document,
    Finding,
    ProblemKind,
    SourceDocument,
    SourceProblem,
    VersionState,
)
from reconciler.planning import repairs
from reconciler.rules.declared_state import expected_document, family_rows
from reconciler.rules.time_rule import settle

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def read(documents: int, *, complete: bool = True) -> dict[str, SourceState]:
    return {
        "s": SourceState("s", readable=True, scanned=True, documents=documents, complete=complete)
    }


def doc(key: str, state: VersionState | None = None, **fields: object) -> SourceDocument:
    return SourceDocument(
        source="s", source_key=key, doc_id=f"s:{key}", content_hash="h", state=state, **fields
    )  # type: ignore[arg-type]


def kinds(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.check, f.kind) for f in findings]


def test_a_source_that_yields_nothing_on_a_first_run_is_a_warning_without_a_write() -> None:
    findings = check_source_yield(read(0), [], {}, NOW)
    assert kinds(findings) == [("family", "source_empty")]
    [finding] = findings
    assert finding.severity == "warning"
    assert "path" in finding.action
    assert "include" in finding.action
    assert not repairs(finding)


@pytest.mark.parametrize(
    "states",
    [
        {"s": SourceState("s", readable=False, scanned=True, error="refused")},  # an outage
        {"s": SourceState("s", readable=False, scanned=False)},  # not read in this run
        read(0, complete=False),  # read in part
    ],
)
def test_a_source_not_read_completely_is_not_empty(states: dict[str, SourceState]) -> None:
    assert check_source_yield(states, [], {}, NOW) == []


def test_a_source_emptied_while_the_table_holds_its_documents_is_the_guards() -> None:
    assert check_source_yield(read(0), [], {"s": 3}, NOW) == []


def test_a_source_whose_documents_all_declare_no_state_is_a_warning() -> None:
    docs = [doc("a"), doc("b", effective_from=NOW - DAY)]
    findings = check_source_yield(read(2), docs, {"s": 2}, NOW)
    assert kinds(findings) == [("family", "all_unknown")]
    assert findings[0].actual == {"source": "s", "documents": 2, "unknown": 2}
    assert "status mapping" in findings[0].action
    assert not repairs(findings[0])
    # One declared state, or one declared link (superseded), is enough.
    assert check_source_yield(read(2), [doc("a"), doc("b", VersionState.CURRENT)], {}, NOW) == []
    assert check_source_yield(read(2), [doc("a"), doc("b", superseded_by="s:a")], {}, NOW) == []
    # A declared unknown is unknown too.
    assert kinds(check_source_yield(read(1), [doc("a", VersionState.UNKNOWN)], {}, NOW)) == [
        ("family", "all_unknown")
    ]


def test_a_status_the_connector_could_not_read_is_one_declared() -> None:
    typo = SourceProblem("s", ProblemKind.INVALID_FIELD, "'retierd'", doc_id="s:b", field="state")
    docs = [doc("a"), doc("b")]
    assert check_source_yield(read(2), docs, {}, NOW, {"s:b": (typo,)}) == []
    assert kinds(check_source_yield(read(2), docs, {}, NOW, {})) == [("family", "all_unknown")]


def test_each_source_is_judged_on_its_own() -> None:
    states = {**read(1), "t": SourceState("t", readable=True, scanned=True, documents=0)}
    findings = check_source_yield(states, [doc("a", VersionState.CURRENT)], {}, NOW)
    assert [(f.kind, f.actual["source"]) for f in findings] == [("source_empty", "t")]


def test_new_rows_are_settled_with_their_whole_family() -> None:
    """A version ingested with its scheduled successor closes at its start, as the family
    check's settle of the family would; alone, it stayed open (what ingest wrote before)."""
    v1 = doc("v1", VersionState.CURRENT, family="f", version=1, effective_from=NOW - 100 * DAY)
    v2 = doc("v2", VersionState.CURRENT, family="f", version=2, effective_from=NOW + 10 * DAY)
    other = doc("o", VersionState.CURRENT, family="g", version=1)
    family_of = {"s:v1": "s:f", "s:v2": "s:f", "s:o": "s:g"}
    rows = family_rows(
        [v1, v2, other], family_of=family_of, as_of=NOW, registered={}, version_of={}
    )
    assert expected_document(v1, family="s:f", as_of=NOW).effective_to == OPEN_END
    assert rows["s:v1"].effective_to == NOW + 10 * DAY
    assert rows["s:v1"].version_state is VersionState.CURRENT
    assert rows["s:v2"].version_state is VersionState.PENDING
    assert rows["s:o"].effective_to == OPEN_END
    # What the check would expect of the registered family: the rows as they are.
    family = {d: rows[d] for d in ("s:v1", "s:v2")}
    assert settle(family.values(), NOW) == family


def test_a_successor_already_in_force_is_left_to_the_reconciler() -> None:
    """Two versions declared current, the later started: the row of the older one stays as
    the source declares it alone (current, open-ended), the drift the reconciler reports."""
    v1 = doc("v1", VersionState.CURRENT, family="f", version=1, effective_from=NOW - 100 * DAY)
    v2 = doc("v2", VersionState.CURRENT, family="f", version=2, effective_from=NOW - DAY)
    family_of = {"s:v1": "s:f", "s:v2": "s:f"}
    rows = family_rows([v1, v2], family_of=family_of, as_of=NOW, registered={}, version_of={})
    assert rows["s:v1"] == expected_document(v1, family="s:f", as_of=NOW)
    assert rows["s:v1"].effective_to == OPEN_END
    assert rows["s:v1"].version_state is VersionState.CURRENT


def test_a_registered_member_takes_part_as_it_stands_and_is_not_derived() -> None:
    v2 = doc("v2", VersionState.CURRENT, family="f", version=2, effective_from=NOW + 10 * DAY)
    v1 = doc("v1", VersionState.CURRENT, family="f", version=1, effective_from=NOW - 100 * DAY)
    registered = {
        "s:v2": Document(
            doc_id="s:v2",
            source="s",
            source_key="v2",
            doc_family_id="s:f",
            doc_version=2,
            version_state=VersionState.PENDING,
            effective_from=NOW + 10 * DAY,
        )
    }
    family_of = {"s:v1": "s:f", "s:v2": "s:f"}
    rows = family_rows(
        [v1, v2], family_of=family_of, as_of=NOW, registered=registered, version_of={}
    )
    assert set(rows) == {"s:v1"}
    assert rows["s:v1"].effective_to == NOW + 10 * DAY
