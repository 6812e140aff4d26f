"""The checks, the shared time rule and the planner as pure functions over hand-built values.

No store, no connector: every test builds a ``FamilyView`` and a ``CheckContext`` from plain data and
asserts on the findings (or the plan) that come out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.check_inputs import (
    CheckContext,
    ChunkAggregate,
    FamilyView,
    SourceState,
    expected_variant,
)
from reconciler.checks.dates import check_dates
from reconciler.checks.family import check_family, declared_family
from reconciler.checks.hash import check_hash, check_source
from reconciler.checks.index import REQUIRED_INDEXES, check_index
from reconciler.checks.payload import check_orphans, check_payload
from reconciler.checks.siblings import check_siblings
from reconciler.checks.ttl import check_ttl
from reconciler.model import (
    OPEN_END,
    Document,
    Finding,
    ProblemKind,
    ReingestRequest,
    Severity,
    SourceDocument,
    SourceProblem,
    VersionState,
    rfc3339,
)
from reconciler.payload import chunk_payload, normalize, payload_for
from reconciler.planning import desired_row, needs_write, plan_family, plan_orphan
from reconciler.rules.time_rule import in_force_winner, settle

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
SRC = "kb"
FAMILY = "kb:leave"

CURRENT = VersionState.CURRENT
SUPERSEDED = VersionState.SUPERSEDED
PENDING = VersionState.PENDING
DRAFT = VersionState.DRAFT
RETIRED = VersionState.RETIRED
UNKNOWN = VersionState.UNKNOWN


# -- builders ------------------------------------------------------------------------------


def did(key: str) -> str:
    return f"{SRC}:{key}"


def row(
    key: str,
    *,
    version: int = 1,
    state: VersionState = CURRENT,
    start: datetime | None = None,
    end: datetime = OPEN_END,
    superseded_by: str | None = None,
    content: str | None = None,
    quarantined: bool = False,
    reason: str | None = None,
    title: str | None = None,
    doc_class: str | None = None,
    ingested_at: datetime | None = NOW - 30 * DAY,
    source: str = SRC,
    family: str = FAMILY,
) -> Document:
    return Document(
        doc_id=f"{source}:{key}",
        source=source,
        source_key=key,
        doc_family_id=family,
        doc_version=version,
        version_state=state,
        effective_from=start,
        effective_to=end,
        superseded_by=None if superseded_by is None else f"{source}:{superseded_by}",
        doc_class=doc_class,
        title=title,
        source_hash=f"sha256:{content or key}",
        quarantined=quarantined,
        quarantine_reason=reason,
        ingested_at=ingested_at,
        updated_at=ingested_at,
    )


def src(
    key: str,
    *,
    version: int | None = 1,
    state: VersionState | None = CURRENT,
    start: datetime | None = None,
    end: datetime | None = None,
    superseded_by: str | None = None,
    content: str | None = None,
    title: str | None = None,
    doc_class: str | None = None,
    source: str = SRC,
) -> SourceDocument:
    return SourceDocument(
        source=source,
        source_key=key,
        doc_id=f"{source}:{key}",
        content_hash=f"sha256:{content or key}",
        family="leave",
        version=version,
        state=state,
        effective_from=start,
        effective_to=end,
        superseded_by=None if superseded_by is None else f"{source}:{superseded_by}",
        title=title,
        doc_class=doc_class,
    )


def ctx(
    *,
    readable: bool = True,
    scanned: bool = True,
    ttl: timedelta | None = None,
    last_success: datetime | None = None,
    policy: str = "supersede",
    grace: timedelta = 7 * DAY,
) -> CheckContext:
    state = SourceState(
        SRC,
        readable=readable,
        scanned=scanned,
        error=None if readable else "connection refused",
        ttl=ttl,
        last_success_at=last_success if last_success is not None else (NOW if readable else None),
    )
    return CheckContext(
        now=NOW,
        sources={SRC: state},
        successor_policy=policy,
        missing_grace=grace,
    )


def view(
    rows: Iterable[Document] = (),
    sources: Iterable[SourceDocument] = (),
    *,
    problems: Mapping[str, tuple[SourceProblem, ...]] | None = None,
    last_seen: Mapping[str, datetime] | None = None,
    chunks: Mapping[str, ChunkAggregate] | None = None,
    registered: Iterable[str] | None = None,
) -> FamilyView:
    """A family whose rows are in the table (so are ``registered``, when given)."""
    by_id = {s.doc_id: s for s in sources}
    rows = tuple(rows)
    return FamilyView(
        family=FAMILY,
        rows=rows,
        registered=frozenset(registered if registered is not None else (r.doc_id for r in rows)),
        sources=by_id,
        successors={
            s.superseded_by: by_id[s.superseded_by]
            for s in by_id.values()
            if s.superseded_by in by_id
        },
        problems=problems or {},
        last_seen=last_seen or {},
        chunks=chunks or {},
    )


def family_ctx(rows: Iterable[Document], **kwargs: Any) -> CheckContext:
    """A context for a family whose table holds exactly ``rows`` (see ``view``)."""
    return ctx(**kwargs)


def aggregate(
    doc: Document, matching: int, *variants: tuple[Mapping[str, Any], int]
) -> ChunkAggregate:
    """Chunks of ``doc``: ``matching`` right ones, and (payload overrides, count) variants."""
    agg = ChunkAggregate(count=matching, matching=matching)
    for overrides, n in variants:
        variant = normalize({**payload_for(doc), **overrides})
        agg.variants[variant] = agg.variants.get(variant, 0) + n
        agg.count += n
    return agg


def effect(row: Document, finding: Finding) -> dict[str, Any]:
    """The row fields a finding's ``changes`` actually change (it may restate unchanged ones)."""
    after = dataclasses.replace(row, **finding.changes)
    return {
        f.name: getattr(after, f.name)
        for f in dataclasses.fields(Document)
        if getattr(after, f.name) != getattr(row, f.name)
    }


def kinds(findings: Iterable[Finding]) -> list[tuple[str, str | None]]:
    return sorted((f.kind, f.doc_id) for f in findings)


def only(findings: list[Finding], kind: str, doc_id: str | None = None) -> Finding:
    hits = [f for f in findings if f.kind == kind and (doc_id is None or f.doc_id == doc_id)]
    assert len(hits) == 1, kinds(findings)
    return hits[0]


def finding(check: str, kind: str = "x", doc_id: str = "kb:a", **repair: Any) -> Finding:
    return Finding(
        check=check,
        kind=kind,
        severity=Severity.WARNING,
        family=FAMILY,
        doc_id=doc_id,
        expected=None,
        actual=None,
        action="",
        **repair,
    )


# -- family ---------------------------------------------------------------------------------


def test_family_in_line_with_the_source_finds_nothing() -> None:
    rows = [
        row(
            "v1",
            version=1,
            state=SUPERSEDED,
            start=NOW - 100 * DAY,
            end=NOW - 10 * DAY,
            superseded_by="v2",
        ),
        row("v2", version=2, start=NOW - 10 * DAY),
    ]
    sources = [
        src("v1", version=1, state=SUPERSEDED, start=NOW - 100 * DAY, superseded_by="v2"),
        src("v2", version=2, start=NOW - 10 * DAY),
    ]
    assert check_family(view(rows, sources), family_ctx(rows)) == []


def test_family_declared_rows_are_worked_out_once_per_view_and_context() -> None:
    """The family check and the planner share one derivation of a view (for one context)."""
    rows = [row("v1", version=1, start=NOW - 100 * DAY), row("v2", version=2, start=NOW - DAY)]
    sources = [
        src("v1", version=1, state=SUPERSEDED, start=NOW - 100 * DAY, superseded_by="v2"),
        src("v2", version=2, start=NOW - DAY),
    ]
    family, context = view(rows, sources), family_ctx(rows)
    first = declared_family(family, context)
    assert first.rows["kb:v1"].version_state is SUPERSEDED
    assert declared_family(family, context) is first
    # another context, or a copy of the view, works it out again (to the same)
    other = declared_family(family, dataclasses.replace(context))
    assert other is not first
    assert other == first
    again = declared_family(dataclasses.replace(family), context)
    assert again is not first
    assert again == first


def test_family_successor_not_marked() -> None:
    rows = [
        row("v1", version=1, start=NOW - 100 * DAY),
        row("v2", version=2, start=NOW - 10 * DAY),
    ]
    sources = [
        src("v1", version=1, state=SUPERSEDED, start=NOW - 100 * DAY, superseded_by="v2"),
        src("v2", version=2, start=NOW - 10 * DAY),
    ]
    findings = check_family(view(rows, sources), family_ctx(rows))
    assert kinds(findings) == [("successor_not_marked", did("v1"))]
    f = findings[0]
    assert f.severity is Severity.CRITICAL
    assert effect(rows[0], f) == {
        "version_state": SUPERSEDED,
        "superseded_by": did("v2"),
        "effective_to": NOW - 10 * DAY,
    }
    assert f.reingest is None


def test_family_successor_not_ingested_supersede_policy() -> None:
    rows = [row("v1", start=NOW - 100 * DAY)]
    sources = [
        src("v1", state=SUPERSEDED, start=NOW - 100 * DAY, superseded_by="v2"),
        src("v2", version=2, start=NOW - 5 * DAY),
    ]
    findings = check_family(view(rows, sources), family_ctx(rows))
    # The successor is asked for once, by this finding; not again as ``not_ingested``.
    assert kinds(findings) == [("successor_not_ingested", did("v1"))]
    f = findings[0]
    assert f.severity is Severity.CRITICAL
    assert effect(rows[0], f) == {
        "version_state": SUPERSEDED,
        "superseded_by": did("v2"),
        "effective_to": NOW - 5 * DAY,
    }
    assert f.reingest == ReingestRequest(
        doc_id=did("v2"), source=SRC, source_key="v2", reason="successor_not_ingested"
    )
    assert "mark this version superseded" in f.action


def test_family_successor_not_ingested_keep_policy_keeps_the_state() -> None:
    rows = [row("v1", start=NOW - 100 * DAY)]
    sources = [
        src("v1", state=SUPERSEDED, start=NOW - 100 * DAY, superseded_by="v2"),
        src("v2", version=2, start=NOW - 5 * DAY),
    ]
    findings = check_family(view(rows, sources), family_ctx(rows, policy="keep"))
    f = only(findings, "successor_not_ingested", did("v1"))
    assert effect(rows[0], f) == {}
    assert f.reingest is not None
    assert f.reingest.doc_id == did("v2")
    assert "superseded" not in f.action
    assert len(findings) == 1


def test_family_a_successor_that_never_comes_into_force_closes_nothing() -> None:
    """v1 names a draft successor dated ahead: after that date v1 is still the one in force,
    with nothing to repair; that it is served although its source says superseded is a
    warning (issue 34), no write."""
    rows = [
        row("v1", version=1, start=NOW - 100 * DAY),
        row("v2", version=2, state=DRAFT, start=NOW - DAY),
    ]
    sources = [
        src("v1", version=1, state=SUPERSEDED, start=NOW - 100 * DAY, superseded_by="v2"),
        src("v2", version=2, state=DRAFT, start=NOW - DAY),
    ]
    findings = check_family(view(rows, sources), family_ctx(rows))
    assert kinds(findings) == [("successor_not_in_force", did("v1"))]
    assert findings[0].severity is Severity.WARNING


def test_family_retired_in_source() -> None:
    rows = [row("a")]
    findings = check_family(view(rows, [src("a", state=RETIRED)]), family_ctx(rows))
    f = only(findings, "retired_in_source", did("a"))
    assert f.severity is Severity.CRITICAL
    assert effect(rows[0], f) == {"version_state": RETIRED}
    assert len(findings) == 1


def test_family_state_mismatch_critical_when_servability_changes() -> None:
    rows = [row("a")]
    findings = check_family(view(rows, [src("a", state=DRAFT)]), family_ctx(rows))
    f = only(findings, "state_mismatch", did("a"))
    assert f.severity is Severity.CRITICAL
    assert effect(rows[0], f) == {"version_state": DRAFT}


def test_family_state_mismatch_warning_between_servable_states() -> None:
    rows = [row("a")]
    findings = check_family(view(rows, [src("a", state=None)]), family_ctx(rows))
    f = only(findings, "state_mismatch", did("a"))
    assert f.severity is Severity.WARNING
    assert effect(rows[0], f) == {"version_state": UNKNOWN}


def test_family_metadata_mismatch() -> None:
    rows = [row("a", title="Old", doc_class="policy")]
    sources = [src("a", title="New", doc_class="policy")]
    findings = check_family(view(rows, sources), family_ctx(rows))
    f = only(findings, "metadata_mismatch", did("a"))
    assert f.severity is Severity.WARNING
    assert effect(rows[0], f) == {"title": "New"}
    assert len(findings) == 1


def test_family_missing_in_source_inside_grace_reports_only() -> None:
    rows = [row("a"), row("b", version=2)]
    findings = check_family(
        view(rows, [src("b", version=2)], last_seen={did("a"): NOW - 2 * DAY}), family_ctx(rows)
    )
    f = only(findings, "missing_in_source", did("a"))
    assert f.severity is Severity.WARNING
    assert f.changes == {}
    assert f.reingest is None
    assert f.quarantine is None


def test_family_missing_in_source_after_grace_retires() -> None:
    rows = [row("a", ingested_at=NOW - 30 * DAY)]
    findings = check_family(view(rows, []), family_ctx(rows))
    f = only(findings, "missing_in_source", did("a"))
    assert f.severity is Severity.CRITICAL
    assert effect(rows[0], f) == {"version_state": RETIRED}


def test_family_missing_in_source_grace_counts_from_last_seen() -> None:
    rows = [row("a", ingested_at=NOW - 30 * DAY)]
    findings = check_family(view(rows, [], last_seen={did("a"): NOW - 6 * DAY}), family_ctx(rows))
    assert only(findings, "missing_in_source").changes == {}


def test_family_missing_in_source_skips_retired_and_broken_documents() -> None:
    rows = [row("a", state=RETIRED), row("b", version=2)]
    problem = SourceProblem(SRC, ProblemKind.INVALID_FRONTMATTER, "bad yaml", doc_id=did("b"))
    findings = check_family(view(rows, [], problems={did("b"): (problem,)}), family_ctx(rows))
    assert kinds(findings) == [("invalid_source_document", did("b"))]


def test_family_not_ingested() -> None:
    rows = [row("a")]
    sources = [src("a"), src("b", version=None, state=DRAFT)]
    findings = check_family(view(rows, sources), family_ctx(rows))
    f = only(findings, "not_ingested", did("b"))
    assert f.severity is Severity.INFO
    assert f.reingest == ReingestRequest(
        doc_id=did("b"), source=SRC, source_key="b", reason="not_ingested"
    )
    assert len(findings) == 1


def test_family_two_versions_in_force_is_invalid_supersession() -> None:
    rows = [
        row("v1", version=1, start=NOW - 100 * DAY),
        row("v2", version=2, start=NOW - 10 * DAY),
    ]
    sources = [
        src("v1", version=1, start=NOW - 100 * DAY),
        src("v2", version=2, start=NOW - 10 * DAY),
    ]
    findings = check_family(view(rows, sources), family_ctx(rows))
    f = only(findings, "invalid_supersession")
    assert f.doc_id == did("v2")  # the latest started stays current
    assert f.actual == {"in_force": [did("v1"), did("v2")]}
    assert f.changes == {}
    # and the older one is superseded by it, as the shared time rule says
    older = next(x for x in findings if x.doc_id == did("v1"))
    assert older.changes["version_state"] is SUPERSEDED
    assert older.changes["superseded_by"] == did("v2")


def test_family_problems_become_findings() -> None:
    rows = [row("a"), row("b", version=2), row("c", version=3)]
    problems = {
        did("a"): (SourceProblem(SRC, ProblemKind.INVALID_FIELD, "version: x", doc_id=did("a")),),
        did("b"): (
            SourceProblem(SRC, ProblemKind.SUPERSESSION_CYCLE, "a -> b -> a", doc_id=did("b")),
        ),
        did("c"): (SourceProblem(SRC, ProblemKind.UNREADABLE, "EACCES", doc_id=did("c")),),
    }
    findings = check_family(view(rows, [], problems=problems), family_ctx(rows))
    # the unreadable one is the hash check's to report; none of them is "missing"
    assert kinds(findings) == [
        ("invalid_source_document", did("a")),
        ("invalid_supersession", did("b")),
    ]
    assert all(not f.changes and f.reingest is None for f in findings)


def test_family_fields_the_connector_could_not_read_keep_their_registered_values() -> None:
    """Taken as absent, v2's mistyped start would sort it first and hand the family back to v1.
    (v1's link naming nothing is taken as absent: the family's order names its successor.)"""
    rows = [
        row(
            "v1",
            version=1,
            state=SUPERSEDED,
            start=NOW - 100 * DAY,
            end=NOW - 10 * DAY,
            superseded_by="v2",
        ),
        row("v2", version=2, state=UNKNOWN, start=NOW - 10 * DAY),
    ]
    sources = [
        src("v1", version=1, state=None, start=NOW - 100 * DAY),
        src("v2", version=2, state=None, start=None),
    ]
    problems = {
        did("v1"): (
            SourceProblem(
                SRC, ProblemKind.DANGLING_SUPERSEDED_BY, "v9 is no note", doc_id=did("v1")
            ),
        ),
        did("v2"): (
            SourceProblem(
                SRC,
                ProblemKind.INVALID_FIELD,
                "effective_from must be a date",
                doc_id=did("v2"),
                field="effective_from",
            ),
        ),
    }
    findings = check_family(view(rows, sources, problems=problems), family_ctx(rows))
    assert kinds(findings) == [
        ("invalid_source_document", did("v2")),
        ("invalid_supersession", did("v1")),
    ]
    assert all(not f.changes for f in findings)
    assert only(findings, "invalid_source_document").actual["field"] == "effective_from"


def test_family_problem_without_doc_id_names_the_source_key() -> None:
    problem = SourceProblem(SRC, ProblemKind.DUPLICATE_ID, "twice", source_key="x.md")
    findings = check_family(view([], [], problems={"kb:x.md": (problem,)}), ctx())
    assert kinds(findings) == [("invalid_source_document", "kb:x.md")]


def test_family_unreadable_source_yields_no_family_findings() -> None:
    rows = [row("a"), row("b", version=2, state=DRAFT)]
    stale = [src("a", state=RETIRED)]  # whatever a stale view of it says, it is not judged
    assert check_family(view(rows, []), family_ctx(rows, readable=False)) == []
    assert check_family(view(rows, stale), family_ctx(rows, readable=False)) == []


def test_family_leaves_a_passed_boundary_to_the_dates_check() -> None:
    rows = [row("a", state=PENDING, start=NOW - DAY)]
    findings = check_family(view(rows, [src("a", start=NOW - DAY)]), family_ctx(rows))
    assert findings == []
    assert kinds(check_dates(view(rows), ctx())) == [("pending_now_effective", did("a"))]


# -- hash -----------------------------------------------------------------------------------


def test_hash_in_place_edit_quarantines_and_requests_reingest() -> None:
    rows = [row("a", content="old")]
    findings = check_hash(view(rows, [src("a", content="new")]), ctx())
    f = only(findings, "in_place_edit", did("a"))
    assert f.severity is Severity.CRITICAL
    assert f.quarantine == ("in_place_edit", True)
    assert f.reingest == ReingestRequest(
        doc_id=did("a"), source=SRC, source_key="a", reason="in_place_edit"
    )
    assert f.expected == {"source_hash": "sha256:old"}
    assert f.actual == {"source_hash": "sha256:new"}


def test_hash_in_place_edit_holds_while_already_quarantined() -> None:
    rows = [row("a", content="old", quarantined=True, reason="in_place_edit")]
    findings = check_hash(view(rows, [src("a", content="new")]), ctx())
    assert only(findings, "in_place_edit").quarantine == ("in_place_edit", True)
    # issue 27: a finding that plans no write says what the next step is
    assert "run `reconciler ingest`" in only(findings, "in_place_edit").action


def test_hash_quarantine_lifted_once_content_matches() -> None:
    rows = [row("a", quarantined=True, reason="in_place_edit")]
    findings = check_hash(view(rows, [src("a")]), ctx())
    f = only(findings, "quarantine_lifted", did("a"))
    assert f.severity is Severity.INFO
    assert f.quarantine == ("in_place_edit", False)
    assert f.reingest is None


def test_hash_leaves_other_quarantines_and_unknown_hashes_alone() -> None:
    manual = row("a", quarantined=True, reason="manual")
    ttl = row("b", version=2, quarantined=True, reason="ttl_expired")
    unhashed = dataclasses.replace(row("c", version=3), source_hash=None)
    sources = [src("a"), src("b", version=2), src("c", version=3, content="anything")]
    assert check_hash(view([manual, ttl, unhashed], sources), ctx()) == []


def test_hash_nothing_when_the_source_was_not_read() -> None:
    rows = [row("a", content="old")]
    assert check_hash(view(rows, [src("a", content="new")]), ctx(readable=False)) == []


def test_hash_unreadable_document_is_reported_with_state_kept() -> None:
    rows = [row("a")]
    problems = {
        did("a"): (
            SourceProblem(SRC, ProblemKind.UNDECODABLE, "not utf-8", path="a.md", doc_id=did("a")),
            SourceProblem(SRC, ProblemKind.INVALID_FIELD, "version: x", doc_id=did("a")),
        )
    }
    findings = check_hash(view(rows, [], problems=problems), ctx())
    f = only(findings, "source_unreadable", did("a"))
    assert f.severity is Severity.WARNING
    assert not f.changes
    assert f.quarantine is None
    assert f.reingest is None
    assert len(findings) == 1  # the invalid field is the family check's


def test_check_source_unreadable_whole_source() -> None:
    down = SourceState(SRC, readable=False, scanned=True, error="timeout")
    findings = check_source(down)
    assert len(findings) == 1
    f = findings[0]
    assert (f.check, f.kind, f.severity) == ("hash", "source_unreadable", Severity.CRITICAL)
    assert f.actual == {"source": SRC, "error": "timeout"}
    assert f.doc_id is None
    assert f.family is None
    assert not f.changes
    assert check_source(SourceState(SRC, readable=True, scanned=True, documents=3)) == []
    assert check_source(SourceState(SRC, readable=False, scanned=False)) == []


# -- siblings -------------------------------------------------------------------------------


def _superseded_pair(v2_state: VersionState = CURRENT, v2_start: datetime = NOW - 10 * DAY):
    v1 = row(
        "v1",
        version=1,
        state=SUPERSEDED,
        start=NOW - 100 * DAY,
        end=v2_start,
        superseded_by="v2",
    )
    v2 = row("v2", version=2, state=v2_state, start=v2_start)
    return v1, v2


#: What a re-chunking run writes on an old version's new chunks: the ingestion defaults.
RECHUNKED = {"version_state": "current", "superseded_by": None, "effective_to": rfc3339(OPEN_END)}


def test_siblings_live_from_chunk_variants() -> None:
    v1, v2 = _superseded_pair()
    chunks = {
        v1.doc_id: aggregate(v1, 3, (RECHUNKED, 2)),
        v2.doc_id: aggregate(v2, 4),
    }
    findings = check_siblings(view([v1, v2], chunks=chunks), ctx())
    f = only(findings, "live_siblings", v1.doc_id)
    assert f.severity is Severity.CRITICAL
    assert f.expected == {"version_state": "superseded", "superseded_by": v2.doc_id}
    assert effect(v1, f) == {}  # the row is right already: only its payloads need the repair
    assert f.actual["version_state"] == "current"
    assert (f.actual["sibling"], f.actual["sibling_state"]) == (v2.doc_id, "current")
    assert len(findings) == 1


def test_siblings_a_stale_claim_whose_window_has_closed_is_not_served() -> None:
    """A chunk saying current with its window already closed is not returned by the filter:
    payload drift, not two versions served."""
    v1, v2 = _superseded_pair()
    chunks = {
        v1.doc_id: aggregate(v1, 3, ({"version_state": "current"}, 2)),
        v2.doc_id: aggregate(v2, 4),
    }
    assert check_siblings(view([v1, v2], chunks=chunks), ctx()) == []


def test_siblings_live_supersedes_a_row_still_current() -> None:
    v1 = row("v1", version=1, start=NOW - 100 * DAY)
    v2 = row("v2", version=2, start=NOW - 10 * DAY)
    chunks = {v1.doc_id: aggregate(v1, 2), v2.doc_id: aggregate(v2, 2)}
    f = only(check_siblings(view([v1, v2], chunks=chunks), ctx()), "live_siblings", v1.doc_id)
    assert effect(v1, f) == {
        "version_state": SUPERSEDED,
        "superseded_by": v2.doc_id,
        "effective_to": NOW - 10 * DAY,
    }


def test_siblings_none_when_the_later_sibling_has_not_started() -> None:
    v1 = row("v1", version=1, start=NOW - 100 * DAY)
    v2 = row("v2", version=2, state=PENDING, start=NOW + 10 * DAY)
    chunks = {v1.doc_id: aggregate(v1, 2), v2.doc_id: aggregate(v2, 2)}
    assert check_siblings(view([v1, v2], chunks=chunks), ctx()) == []


def test_siblings_none_when_the_later_sibling_is_a_draft() -> None:
    v1 = row("v1", version=1, start=NOW - 100 * DAY)
    v2 = row("v2", version=2, state=DRAFT, start=NOW - 10 * DAY)
    chunks = {v1.doc_id: aggregate(v1, 2), v2.doc_id: aggregate(v2, 2)}
    assert check_siblings(view([v1, v2], chunks=chunks), ctx()) == []


def test_siblings_quarantined_live_chunks_are_not_live() -> None:
    v1, v2 = _superseded_pair()
    chunks = {
        v1.doc_id: aggregate(v1, 0, ({"version_state": "current", "quarantined": True}, 2)),
        v2.doc_id: aggregate(v2, 1),
    }
    assert check_siblings(view([v1, v2], chunks=chunks), ctx()) == []


def test_siblings_a_live_chunk_of_a_draft_sibling_is_the_one_reported() -> None:
    """A draft's chunk served beside the version in force: the draft's chunks are rewritten
    from its row; the version in force is left alone (a draft never supersedes anything)."""
    v1 = row("v1", version=1, start=NOW - 100 * DAY)
    v2 = row("v2", version=2, state=DRAFT, start=NOW - 10 * DAY)
    chunks = {
        v1.doc_id: aggregate(v1, 2),
        v2.doc_id: aggregate(v2, 1, ({"version_state": "current"}, 1)),
    }
    findings = check_siblings(view([v1, v2], chunks=chunks), ctx())
    f = only(findings, "live_siblings", v2.doc_id)
    assert effect(v2, f) == {}
    assert f.expected == {"version_state": "draft", "superseded_by": None}
    assert f.actual["sibling"] == v1.doc_id
    assert len(findings) == 1


def test_siblings_successor_is_the_rows_own_when_already_superseded() -> None:
    """A re-chunked v1 of a three-version family: v1 is superseded by v2, v3 is in force.

    The row is right; the repair is a payload write only. The check must not re-point
    ``superseded_by`` at v3 (the source says v2; the family check would set it back on the
    next run, so the first apply would not converge).
    """
    v1 = row(
        "v1",
        version=1,
        state=SUPERSEDED,
        start=NOW - 300 * DAY,
        end=NOW - 200 * DAY,
        superseded_by="v2",
    )
    v2 = row(
        "v2",
        version=2,
        state=SUPERSEDED,
        start=NOW - 200 * DAY,
        end=NOW - 10 * DAY,
        superseded_by="v3",
    )
    v3 = row("v3", version=3, start=NOW - 10 * DAY)
    chunks = {
        v1.doc_id: aggregate(v1, 1, (RECHUNKED, 1)),
        v2.doc_id: aggregate(v2, 1),
        v3.doc_id: aggregate(v3, 1),
    }
    f = only(check_siblings(view([v1, v2, v3], chunks=chunks), ctx()), "live_siblings", v1.doc_id)
    assert effect(v1, f) == {}


def test_siblings_stale_live_chunks_of_a_retired_row_leave_the_row_alone() -> None:
    """The row is not live (retired); only its chunks are stale. The payload check rewrites
    them from the row; the siblings check must not turn the row into ``superseded``."""
    v1 = row("v1", version=1, state=RETIRED)
    v2 = row("v2", version=2, start=NOW - DAY)
    chunks = {
        v1.doc_id: aggregate(v1, 0, ({"version_state": "current"}, 2)),
        v2.doc_id: aggregate(v2, 1),
    }
    for f in check_siblings(view([v1, v2], chunks=chunks), ctx()):
        assert effect(v1, f) == {}, f


# -- ttl ------------------------------------------------------------------------------------


def test_ttl_expired_quarantines() -> None:
    rows = [row("a")]
    c = ctx(readable=False, ttl=DAY, last_success=NOW - 2 * DAY)
    f = only(check_ttl(view(rows), c), "ttl_expired", did("a"))
    assert f.severity is Severity.CRITICAL
    assert f.quarantine == ("ttl_expired", True)
    assert f.action.startswith("quarantine")


def test_ttl_expired_never_read_successfully() -> None:
    rows = [row("a")]
    c = ctx(readable=False, ttl=DAY)
    assert kinds(check_ttl(view(rows), c)) == [("ttl_expired", did("a"))]


def test_ttl_expired_already_held_keeps_it() -> None:
    rows = [row("a", quarantined=True, reason="ttl_expired")]
    c = ctx(readable=False, ttl=DAY, last_success=NOW - 2 * DAY)
    f = only(check_ttl(view(rows), c), "ttl_expired")
    assert f.quarantine == ("ttl_expired", True)
    assert f.action.startswith("keep quarantined")


def test_ttl_within_ttl_nothing() -> None:
    rows = [row("a")]
    c = ctx(readable=False, ttl=DAY, last_success=NOW - timedelta(hours=1))
    assert check_ttl(view(rows), c) == []


def test_ttl_lifted_when_read_again() -> None:
    rows = [row("a", quarantined=True, reason="ttl_expired"), row("b", version=2)]
    c = ctx(readable=True, ttl=DAY, last_success=NOW)
    findings = check_ttl(view(rows), c)
    f = only(findings, "quarantine_lifted", did("a"))
    assert f.quarantine == ("ttl_expired", False)
    assert len(findings) == 1


def test_ttl_webhook_sources_never_expire() -> None:
    rows = [row("a"), row("b", version=2, quarantined=True, reason="ttl_expired")]
    c = ctx(readable=False, ttl=None, last_success=NOW - 365 * DAY)
    assert check_ttl(view(rows), c) == []


# -- payload --------------------------------------------------------------------------------


def test_payload_no_drift_no_finding() -> None:
    a = row("a")
    assert check_payload(view([a], chunks={a.doc_id: aggregate(a, 3)}), ctx()) == []


def test_payload_drift_critical_when_a_drifted_chunk_is_servable_but_the_row_is_not() -> None:
    a = row("a", state=SUPERSEDED, end=NOW - DAY, superseded_by="b")
    chunks = {a.doc_id: aggregate(a, 3, ({"version_state": "current"}, 2))}
    f = only(check_payload(view([a], chunks=chunks), ctx()), "payload_drift", a.doc_id)
    assert f.severity is Severity.CRITICAL
    assert f.expected == {"version_state": "superseded"}
    assert f.actual == {"version_state": "current", "chunks": 2, "of": 5}


def test_payload_drift_warning_when_nothing_becomes_servable() -> None:
    a = row("a", state=RETIRED)
    chunks = {a.doc_id: aggregate(a, 1, ({"version_state": "superseded"}, 1))}
    assert only(check_payload(view([a], chunks=chunks), ctx()), "payload_drift").severity is (
        Severity.WARNING
    )
    b = row("b", doc_class="policy")
    chunks = {b.doc_id: aggregate(b, 0, ({"doc_class": "memo"}, 4))}
    f = only(check_payload(view([b], chunks=chunks), ctx()), "payload_drift")
    assert f.severity is Severity.WARNING
    assert f.expected == {"doc_class": "policy"}


def test_payload_drift_critical_when_a_quarantine_was_lost() -> None:
    a = row("a", quarantined=True, reason="in_place_edit")
    chunks = {a.doc_id: aggregate(a, 0, ({"quarantined": None, "quarantine_reason": None}, 1))}
    f = only(check_payload(view([a], chunks=chunks), ctx()), "payload_drift")
    assert f.severity is Severity.CRITICAL


def test_payload_absent_nullable_key_equals_none() -> None:
    a = row("a")  # superseded_by, doc_class, quarantine_reason all None
    written = chunk_payload(a, chunk_id="a#0")
    assert "superseded_by" not in written
    assert "quarantine_reason" not in written
    assert normalize(written) == expected_variant(a)
    absent = {k: v for k, v in payload_for(a).items() if v is not None}
    assert normalize(absent) == normalize(payload_for(a))


def test_payload_normalize_equates_date_spellings_and_float_versions() -> None:
    a = row("a", start=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC))
    spelled = {
        **payload_for(a),
        "effective_from": "2024-01-02T03:04:05+00:00",
        "doc_version": 1.0,
    }
    assert normalize(spelled) == expected_variant(a)


def test_payload_dates_out_of_range_in_utc_stay_as_found() -> None:
    """A date text whose instant falls outside years 1-9999 once made UTC is kept as found
    (drift), not an error that stops the applier's re-read."""
    a = row("a")
    for text in ("0001-01-01T00:30:00+01:00", "9999-12-31T23:00:00-02:00"):
        found = dict(normalize({**payload_for(a), "effective_from": text}))
        assert found["effective_from"] == text


def test_payload_absent_non_nullable_key_is_drift() -> None:
    a = row("a")
    missing_state = {k: v for k, v in payload_for(a).items() if k != "version_state"}
    assert normalize(missing_state) != expected_variant(a)


def test_orphans_are_quarantined() -> None:
    ghost = row("ghost")
    loose = normalize(payload_for(ghost))
    held = normalize({**payload_for(ghost), "quarantined": True})
    agg = ChunkAggregate(count=3, matching=0, variants={loose: 2, held: 1})
    f = check_orphans(ghost.doc_id, agg)
    assert f is not None
    assert (f.check, f.kind, f.severity) == ("payload", "orphan_chunks", Severity.CRITICAL)
    assert f.family == FAMILY
    assert f.actual == {"chunks": 2}
    assert f.payload_only == {"quarantined": True, "quarantine_reason": "orphan_chunks"}


def test_orphans_all_quarantined_nothing_to_do() -> None:
    ghost = row("ghost")
    held = normalize({**payload_for(ghost), "quarantined": True, "quarantine_reason": "manual"})
    assert check_orphans(ghost.doc_id, ChunkAggregate(count=1, variants={held: 1})) is None


def test_orphans_not_servable_are_a_warning() -> None:
    ghost = row("ghost", state=RETIRED)
    agg = ChunkAggregate(count=1, variants={normalize(payload_for(ghost)): 1})
    f = check_orphans(ghost.doc_id, agg)
    assert f is not None
    assert f.severity is Severity.WARNING


def test_orphans_without_doc_id() -> None:
    agg = ChunkAggregate(count=1, variants={normalize({"version_state": "current"}): 1})
    f = check_orphans(None, agg)
    assert f is not None
    assert f.doc_id is None
    assert f.family is None


# -- dates ----------------------------------------------------------------------------------


def test_dates_pending_now_effective() -> None:
    a = row("a", state=PENDING, start=NOW - timedelta(hours=1))
    f = only(check_dates(view([a]), ctx()), "pending_now_effective", a.doc_id)
    assert effect(a, f) == {"version_state": CURRENT}


def test_dates_pending_now_effective_supersedes_the_predecessor() -> None:
    v1 = row("v1", version=1, start=NOW - 100 * DAY)
    v2 = row("v2", version=2, state=PENDING, start=NOW - timedelta(hours=1))
    findings = check_dates(view([v1, v2]), ctx())
    assert kinds(findings) == [
        ("pending_now_effective", v1.doc_id),
        ("pending_now_effective", v2.doc_id),
    ]
    old = only(findings, "pending_now_effective", v1.doc_id)
    assert effect(v1, old) == {
        "version_state": SUPERSEDED,
        "superseded_by": v2.doc_id,
        "effective_to": NOW - timedelta(hours=1),
    }


def test_dates_effective_to_passed_retires_without_a_successor() -> None:
    a = row("a", start=NOW - 100 * DAY, end=NOW - DAY)
    f = only(check_dates(view([a]), ctx()), "effective_to_passed", a.doc_id)
    assert effect(a, f) == {"version_state": RETIRED}


def test_dates_effective_to_passed_supersedes_by_the_version_in_force() -> None:
    v1 = row("v1", version=1, start=NOW - 100 * DAY, end=NOW - DAY)
    v2 = row("v2", version=2, start=NOW - DAY)
    findings = check_dates(view([v1, v2]), ctx())
    assert kinds(findings) == [("effective_to_passed", v1.doc_id)]
    assert effect(v1, findings[0]) == {"version_state": SUPERSEDED, "superseded_by": v2.doc_id}


def test_dates_not_yet_effective() -> None:
    a = row("a", start=NOW + DAY)
    f = only(check_dates(view([a]), ctx()), "not_yet_effective", a.doc_id)
    assert effect(a, f) == {"version_state": PENDING}


def test_dates_effective_window_invalid() -> None:
    a = row("a", state=SUPERSEDED, start=NOW - DAY, end=NOW - 2 * DAY, superseded_by="b")
    findings = check_dates(view([a]), ctx())
    f = only(findings, "effective_window_invalid", a.doc_id)
    assert f.severity is Severity.CRITICAL
    assert not f.changes
    assert len(findings) == 1


def test_dates_an_empty_window_is_invalid_unless_a_successor_starting_there_closed_it() -> None:
    declared = row("a", state=UNKNOWN, start=NOW - DAY, end=NOW - DAY)
    f = only(check_dates(view([declared]), ctx()), "effective_window_invalid", declared.doc_id)
    assert f.severity is Severity.CRITICAL
    # The time rule closes a version empty when the next one starts at the same instant.
    closed = row("v1", version=1, state=UNKNOWN, start=NOW + DAY, end=NOW + DAY)
    successor = row("v2", version=2, state=UNKNOWN, start=NOW + DAY)
    assert check_dates(view([closed, successor]), ctx()) == []


def test_dates_effective_to_missing() -> None:
    a = row("a")
    chunks = {a.doc_id: aggregate(a, 2, ({"effective_to": None}, 3))}
    f = only(check_dates(view([a], chunks=chunks), ctx()), "effective_to_missing", a.doc_id)
    assert f.actual == {"effective_to": None, "chunks": 3}
    assert f.expected == {"effective_to": OPEN_END}


def test_dates_leaves_two_live_versions_to_the_family_and_siblings_checks() -> None:
    v1 = row("v1", version=1, start=NOW - 100 * DAY)
    v2 = row("v2", version=2, start=NOW - 10 * DAY)
    assert check_dates(view([v1, v2]), ctx()) == []


def test_dates_quiet_on_a_settled_family() -> None:
    v1 = row(
        "v1",
        version=1,
        state=SUPERSEDED,
        start=NOW - 100 * DAY,
        end=NOW - 10 * DAY,
        superseded_by="v2",
    )
    v2 = row("v2", version=2, start=NOW - 10 * DAY, end=NOW + 10 * DAY)
    v3 = row("v3", version=3, state=PENDING, start=NOW + 10 * DAY)
    assert check_dates(view([v1, v2, v3]), ctx()) == []


def test_dates_successor_scheduled_closes_the_window_early_and_keeps_the_state() -> None:
    """No gap, no overlap: the version in force stays served until its successor's start,
    and its window is closed there now, so no run is needed at that instant."""
    v2 = row("v2", version=2, state=UNKNOWN, start=NOW - 10 * DAY)
    v3 = row("v3", version=3, state=UNKNOWN, start=NOW + 10 * DAY)
    findings = check_dates(view([v2, v3]), ctx())
    f = only(findings, "successor_scheduled", v2.doc_id)
    assert effect(v2, f) == {"effective_to": NOW + 10 * DAY}
    assert len(findings) == 1


# -- index ----------------------------------------------------------------------------------


def test_index_missing_on_a_supporting_engine() -> None:
    findings = check_index({}, supported=True)
    assert sorted(f.index for f in findings if f.index) == sorted(REQUIRED_INDEXES.items())
    assert {f.kind for f in findings} == {"payload_index_missing"}


def test_index_wrong_schema_is_missing() -> None:
    existing = {**REQUIRED_INDEXES, "version_state": "text"}
    findings = check_index(existing, supported=True)
    assert [f.index for f in findings] == [("version_state", "keyword")]


def test_index_complete_or_unsupported_nothing() -> None:
    assert check_index(REQUIRED_INDEXES, supported=True) == []
    assert check_index({}, supported=False) == []


# -- settling.settle ------------------------------------------------------------------------

_offsets = st.one_of(st.none(), st.integers(min_value=-5, max_value=5))


@st.composite
def families(draw: st.DrawFn) -> list[Document]:
    docs = []
    for i in range(draw(st.integers(min_value=0, max_value=5))):
        start = draw(_offsets)
        end = draw(_offsets)
        others = [d.doc_id for d in docs]
        docs.append(
            row(
                f"d{i}",
                version=draw(st.integers(min_value=1, max_value=3)),
                state=draw(st.sampled_from(list(VersionState))),
                start=None if start is None else NOW + start * DAY,
                end=OPEN_END if end is None else NOW + end * DAY,
                superseded_by=(
                    draw(st.sampled_from(others)).split(":")[1]
                    if others and draw(st.booleans())
                    else None
                ),
            )
        )
    return docs


@given(families(), st.sampled_from(["supersede", "report"]))
def test_settle_is_idempotent(docs: list[Document], policy: str) -> None:
    once = settle(docs, NOW, unknown_siblings=policy)
    assert settle(once.values(), NOW, unknown_siblings=policy) == once


@given(families(), st.sampled_from(["supersede", "report"]), st.integers(-3, 3))
def test_settle_s_shortcut_for_a_family_left_as_is_agrees_with_the_whole_rule(
    docs: list[Document], policy: str, days: int
) -> None:
    """``settle`` tells the usual family (one servable version, the latest, open) without
    building the timeline: what it then returns is what one pass of the whole rule returns."""
    from reconciler.rules.time_rule import _left_as_is, _settle_once  # noqa: PLC0415

    now = NOW + days * DAY
    if _left_as_is(docs, now, None):
        whole = _settle_once(docs, now, policy, None)
        assert all(whole[doc.doc_id] is doc for doc in docs)
    assert settle(docs, now, unknown_siblings=policy) == _settle_fixpoint(docs, now, policy)


def _settle_fixpoint(docs: list[Document], now: datetime, policy: str) -> dict[str, Document]:
    """The rule applied until it changes nothing, with no shortcut."""
    from reconciler.rules.time_rule import _settle_once  # noqa: PLC0415

    settled = _settle_once(docs, now, policy, None)
    for _round in range(len(docs) + 1):
        again = _settle_once(list(settled.values()), now, policy, None)
        if again == settled:
            break
        settled = again
    return settled


@given(families(), st.sampled_from(["supersede", "report"]))
def test_settle_returns_a_version_it_leaves_unchanged_as_the_same_object(
    docs: list[Document], policy: str
) -> None:
    """No copy is made of a version the time rule leaves as it is (the usual case)."""
    settled = settle(docs, NOW, unknown_siblings=policy)
    for doc in docs:
        if settled[doc.doc_id] == doc:
            assert settled[doc.doc_id] is doc


@given(families(), st.sampled_from(["supersede", "report"]), st.integers(-3, 3))
def test_view_settled_is_settle_of_its_rows_worked_out_once(
    docs: list[Document], policy: str, days: int
) -> None:
    """The checks share one settling of a view's rows; a copy with other rows has its own."""
    now = NOW + days * DAY
    view = FamilyView(family="fam", rows=tuple(docs))
    settled = view.settled(now, policy)
    assert settled == settle(docs, now, unknown_siblings=policy)
    assert list(settled) == list(settle(docs, now, unknown_siblings=policy))
    assert view.settled(now, policy) == settled
    assert view.settled(now + DAY, policy) == settle(docs, now + DAY, unknown_siblings=policy)
    with pytest.raises(TypeError):
        settled["x"] = docs[0] if docs else row("x")  # type: ignore[index]
    # the memo is no part of the view's content, and a copy starts without it
    assert view == FamilyView(family="fam", rows=tuple(docs))
    other = dataclasses.replace(view, rows=tuple(reversed(docs)))
    assert other.settled(now, policy) == settle(reversed(docs), now, unknown_siblings=policy)


def test_settle_is_idempotent_when_it_retires_a_declared_successor() -> None:
    """Hypothesis' counterexample (kept): d1 has an empty window at NOW, so the rule retires
    it; d2 names d1 as its successor. Read as current, d1 closed d2's window empty; read as
    retired (the second pass) it closes nothing, and d2 closes d0. One call now reaches what
    the second pass gives, so a second call changes nothing."""
    d0 = row("d0", state=CURRENT)
    d1 = row("d1", state=CURRENT, start=NOW, end=NOW)
    d2 = row("d2", state=SUPERSEDED, start=NOW, superseded_by="d1")
    for policy in ("supersede", "report"):
        once = settle([d0, d1, d2], NOW, unknown_siblings=policy)
        assert settle(once.values(), NOW, unknown_siblings=policy) == once
        assert once["kb:d1"].version_state is RETIRED
        assert (once["kb:d0"].version_state, once["kb:d0"].superseded_by) == (
            SUPERSEDED,
            "kb:d2",
        )


def test_settle_is_idempotent_for_undated_unknowns_beside_currents_under_report() -> None:
    """Hypothesis' second counterexample (kept): d4, an unknown version whose window ends at
    NOW, is superseded by the pending d0; read again, it is no longer one of the unknowns the
    'report' policy leaves side by side, and it closes d3. One call now reaches that."""
    docs = [
        row("d0", state=CURRENT, start=NOW + DAY),
        row("d1", state=CURRENT),
        row("d2", state=CURRENT),
        row("d3", state=UNKNOWN),
        row("d4", state=UNKNOWN, end=NOW),
    ]
    once = settle(docs, NOW, unknown_siblings="report")
    assert settle(once.values(), NOW, unknown_siblings="report") == once


def test_settle_report_policy_keeps_unknowns_side_by_side_until_a_declared_version() -> None:
    """Two unknown versions stay served together; a later current one ends both at its start
    (and a second pass changes nothing)."""
    v1 = row("v1", version=1, state=UNKNOWN, start=NOW - 300 * DAY)
    v2 = row("v2", version=2, state=UNKNOWN, start=NOW - 200 * DAY)
    v3 = row("v3", version=3, state=CURRENT, start=NOW + 10 * DAY)
    once = settle([v1, v2, v3], NOW, unknown_siblings="report")
    assert [(d.version_state, d.effective_to) for d in once.values()] == [
        (UNKNOWN, NOW + 10 * DAY),
        (UNKNOWN, NOW + 10 * DAY),
        (PENDING, OPEN_END),
    ]
    later = settle(once.values(), NOW + 20 * DAY, unknown_siblings="report")
    assert [(d.version_state, d.superseded_by) for d in later.values()] == [
        (SUPERSEDED, v3.doc_id),
        (SUPERSEDED, v3.doc_id),
        (CURRENT, None),
    ]
    assert settle(later.values(), NOW + 20 * DAY, unknown_siblings="report") == later


@given(families())
def test_settle_leaves_at_most_one_current_version_in_force(docs: list[Document]) -> None:
    settled = settle(docs, NOW).values()
    live = [
        d
        for d in settled
        if d.version_state is CURRENT
        and (d.effective_from is None or d.effective_from <= NOW < d.effective_to)
    ]
    assert len(live) <= 1
    assert in_force_winner(settled, NOW) == (live[0] if live else None)
    # nothing current is left that has not started or has ended
    assert all(
        (d.effective_from is None or d.effective_from <= NOW) and d.effective_to > NOW
        for d in settled
        if d.version_state is CURRENT
    )


# -- planning -------------------------------------------------------------------------------


def test_desired_row_family_wins_whatever_the_order() -> None:
    a = row("a", start=NOW - 10 * DAY)
    siblings = finding(
        "siblings",
        "live_siblings",
        changes={"version_state": SUPERSEDED, "superseded_by": "kb:z", "effective_to": NOW},
    )
    dates = finding("dates", "effective_to_passed", changes={"version_state": RETIRED})
    family = finding("family", "state_mismatch", changes={"version_state": DRAFT})
    for order in ([family, dates, siblings], [siblings, family, dates], [dates, siblings, family]):
        after, reasons = desired_row(a, order)
        assert after.version_state is DRAFT
        # keys only siblings set are kept: the merge is per field
        assert after.superseded_by == "kb:z"
        assert after.effective_to == NOW
        assert set(reasons) == {
            "siblings/live_siblings",
            "dates/effective_to_passed",
            "family/state_mismatch",
        }


def test_desired_row_without_findings_is_the_row() -> None:
    a = row("a")
    assert desired_row(a, []) == (a, ())


def test_quarantine_in_place_edit_outranks_ttl_expired() -> None:
    a = row("a")
    ttl = finding("ttl", "ttl_expired", quarantine=("ttl_expired", True))
    edit = finding("hash", "in_place_edit", quarantine=("in_place_edit", True))
    for order in ([ttl, edit], [edit, ttl]):
        after, _ = desired_row(a, order)
        assert (after.quarantined, after.quarantine_reason) == (True, "in_place_edit")


def test_quarantine_lifting_only_the_reason_decided_false() -> None:
    held = row("a", quarantined=True, reason="ttl_expired")
    lift_edit = finding("hash", "quarantine_lifted", quarantine=("in_place_edit", False))
    after, _ = desired_row(held, [lift_edit])
    assert (after.quarantined, after.quarantine_reason) == (True, "ttl_expired")
    lift_ttl = finding("ttl", "quarantine_lifted", quarantine=("ttl_expired", False))
    after, _ = desired_row(held, [lift_ttl])
    assert (after.quarantined, after.quarantine_reason) == (False, None)


def test_quarantine_lifting_one_reason_while_another_is_active() -> None:
    held = row("a", quarantined=True, reason="in_place_edit")
    lift = finding("hash", "quarantine_lifted", quarantine=("in_place_edit", False))
    ttl = finding("ttl", "ttl_expired", quarantine=("ttl_expired", True))
    after, _ = desired_row(held, [lift, ttl])
    assert (after.quarantined, after.quarantine_reason) == (True, "ttl_expired")


def test_quarantine_manual_reason_kept_when_a_managed_one_is_lifted() -> None:
    manual = row("a", quarantined=True, reason="manual")
    for reason in ("ttl_expired", "in_place_edit", "orphan_chunks"):
        after, _ = desired_row(manual, [finding("ttl", quarantine=(reason, False))])
        assert (after.quarantined, after.quarantine_reason) == (True, "manual")


def test_quarantine_manual_survives_a_managed_quarantine_and_its_lifting() -> None:
    """A document someone quarantined by hand must stay quarantined through the reconciler's
    own quarantine-and-lift cycle (the TTL of its source expiring, then the source answering).

    The merge replaces the reason ``manual`` with ``ttl_expired``; the lift then clears it, and
    the document the operator pulled is served again.
    """
    manual = row("a", quarantined=True, reason="manual")
    held, _ = desired_row(manual, [finding("ttl", quarantine=("ttl_expired", True))])
    assert held.quarantined
    lifted, _ = desired_row(held, [finding("ttl", quarantine=("ttl_expired", False))])
    assert lifted.quarantined, "a manual quarantine was lifted by the reconciler"


def test_plan_family_payload_only_repair_counts_drifted_points() -> None:
    a = row("a")
    chunks = {a.doc_id: aggregate(a, 3, ({"version_state": "superseded"}, 2))}
    v = view([a], chunks=chunks)
    plan = plan_family(v, check_payload(v, ctx()))
    assert plan.row_updates == ()
    [target] = plan.payload_targets
    assert target.doc_id == a.doc_id
    assert target.payload == payload_for(a)
    assert target.points == 2
    assert target.reasons == ("payload/payload_drift",)
    assert not target.partial


def test_plan_family_row_change_rewrites_every_chunk_not_already_right() -> None:
    a = row("a")
    retired = dataclasses.replace(a, version_state=RETIRED)
    chunks = {a.doc_id: aggregate(a, 3, ({"version_state": "retired"}, 1), ({"doc_class": "x"}, 2))}
    v = view([a], sources=[src("a", state=RETIRED)], chunks=chunks)
    findings = check_family(v, family_ctx([a])) + check_payload(v, ctx())
    plan = plan_family(v, findings)
    [update] = plan.row_updates
    assert update.fields() == {"version_state": (CURRENT, RETIRED)}
    [target] = plan.payload_targets
    assert target.payload == payload_for(retired)
    # 3 that matched the old row + 2 drifted ones; the one already saying "retired" is right
    assert target.points == 5
    assert set(target.reasons) == {"family/retired_in_source", "payload/payload_drift"}
    assert plan.counts() == {"payload": 1, "table": 1, "reingest": 0, "points": 5, "index": 0}


def test_plan_family_quarantine_and_reingest() -> None:
    a = row("a", content="old")
    chunks = {a.doc_id: aggregate(a, 4)}
    v = view([a], sources=[src("a", content="new")], chunks=chunks)
    findings = check_hash(v, ctx())
    plan = plan_family(v, findings + findings)  # a repeated request is planned once
    [update] = plan.row_updates
    assert update.fields() == {
        "quarantined": (False, True),
        "quarantine_reason": (None, "in_place_edit"),
    }
    [target] = plan.payload_targets
    assert target.points == 4
    assert target.payload["quarantined"] is True
    assert [r.doc_id for r in plan.reingests] == [a.doc_id]


def test_plan_family_reingest_without_row_writes_nothing_else() -> None:
    v = view([], sources=[src("new")])
    plan = plan_family(v, check_family(v, ctx()))
    assert plan.row_updates == ()
    assert plan.payload_targets == ()
    assert [r.reason for r in plan.reingests] == ["not_ingested"]


def test_plan_family_report_only_findings_plan_nothing() -> None:
    a = row("a")
    v = view([a], [], last_seen={a.doc_id: NOW - DAY}, chunks={a.doc_id: aggregate(a, 2)})
    findings = check_family(v, family_ctx([a]))
    assert kinds(findings) == [("missing_in_source", a.doc_id)]
    assert plan_family(v, findings).empty


def test_plan_family_no_points_when_the_document_has_no_chunks() -> None:
    a = row("a")
    v = view([a], [src("a", state=RETIRED)])
    plan = plan_family(v, check_family(v, family_ctx([a])))
    assert len(plan.row_updates) == 1
    assert plan.payload_targets == ()


def test_plan_orphan_counts_points_not_already_quarantined() -> None:
    ghost = row("ghost")
    agg = ChunkAggregate(
        count=3,
        variants={
            normalize(payload_for(ghost)): 2,
            normalize(
                {**payload_for(ghost), "quarantined": True, "quarantine_reason": "orphan_chunks"}
            ): 1,
        },
    )
    f = check_orphans(ghost.doc_id, agg)
    assert f is not None
    [target] = plan_orphan(f, agg).payload_targets
    assert target.partial
    assert target.points == 2
    assert target.payload == {"quarantined": True, "quarantine_reason": "orphan_chunks"}


def test_needs_write_partial_and_full() -> None:
    a = row("a")
    v = view([a], [src("a", state=RETIRED)], chunks={a.doc_id: aggregate(a, 1)})
    [target] = plan_family(v, check_family(v, family_ctx([a]))).payload_targets
    assert needs_write(payload_for(a), target)
    assert not needs_write(
        {**chunk_payload(dataclasses.replace(a, version_state=RETIRED), chunk_id="c")}, target
    )
    ghost = row("ghost")
    agg = ChunkAggregate(count=1, variants={normalize(payload_for(ghost)): 1})
    f = check_orphans(ghost.doc_id, agg)
    assert f is not None
    [partial] = plan_orphan(f, agg).payload_targets
    assert needs_write(payload_for(ghost), partial)
    assert not needs_write(
        {**payload_for(ghost), "quarantined": True, "quarantine_reason": "orphan_chunks"}, partial
    )
