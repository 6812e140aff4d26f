"""``family``: system of record <-> document table — which version of each family is in force."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import cast

from reconciler.check_inputs import CheckContext, FamilyView, SourcesView, Wide
from reconciler.checks.common import META_FIELDS, STATE_FIELDS, diff, values
from reconciler.checks.contradictions import check_contradictions
from reconciler.checks.membership import check_membership
from reconciler.checks.source_yield import check_source_yield
from reconciler.model import (
    SERVABLE_STATES,
    Document,
    Finding,
    ProblemKind,
    ReingestRequest,
    Severity,
    SourceProblem,
    VersionState,
    replaced,
    rfc3339,
)
from reconciler.rules.declared_state import (
    closing_successor,
    declared_document,
    declared_state,
    with_registered,
)
from reconciler.rules.time_rule import in_force_winner, settle

CHECK = "family"
_SUPERSESSION_PROBLEMS = {
    ProblemKind.DANGLING_SUPERSEDED_BY,
    ProblemKind.SELF_SUPERSESSION,
    ProblemKind.SUPERSESSION_CYCLE,
    ProblemKind.CONFLICTING_LINKS,
}
#: Problems that take one field of a document as absent: its registered value is kept.
_FIELD_PROBLEMS = {ProblemKind.INVALID_FIELD, ProblemKind.CONFLICTING_LINKS}
#: Problems the hash check reports as ``source_unreadable``.
UNREADABLE_PROBLEMS = {ProblemKind.UNREADABLE, ProblemKind.UNDECODABLE}


def problem_findings(problems: Iterable[SourceProblem], family: str | None) -> list[Finding]:
    """Broken source documents, as findings naming the document and the problem.

    The document keeps its state: a broken note is neither missing nor changed.
    """
    findings = []
    for problem in problems:
        if problem.kind in UNREADABLE_PROBLEMS:
            continue
        if problem.kind is ProblemKind.DECLARATION_CONFLICT:
            findings.append(_declaration_conflict(problem, family))
            continue
        if problem.kind is ProblemKind.REKEY_PENDING:
            findings.append(_rekey_pending(problem, family))
            continue
        kind = (
            "invalid_supersession"
            if problem.kind in _SUPERSESSION_PROBLEMS
            else "invalid_source_document"
        )
        doc_id = problem.doc_id or (
            f"{problem.source}:{problem.source_key}" if problem.source_key else None
        )
        findings.append(
            Finding(
                check=CHECK,
                kind=kind,
                severity=Severity.WARNING,
                family=family,
                doc_id=doc_id,
                expected="a well-formed source document",
                actual={
                    "problem": str(problem.kind),
                    "path": problem.path,
                    "message": problem.message,
                    **({"field": problem.field} if problem.field else {}),
                },
                action=_problem_action(problem),
            )
        )
    return findings


def _declaration_conflict(problem: SourceProblem, family: str | None) -> Finding:
    """A declaration the document's system of record contradicts: the source's word stands."""
    return Finding(
        check=CHECK,
        kind="declaration_conflict",
        severity=Severity.WARNING,
        family=family,
        doc_id=problem.doc_id,
        expected="the declaration agrees with the system of record",
        actual={"message": problem.message},
        action=(
            "none: the system of record's own declaration stands; mend the source, or roll "
            "back the run that recorded the declaration"
        ),
    )


def _rekey_pending(problem: SourceProblem, family: str | None) -> Finding:
    """A registered document its source now names with another id (a configuration change):
    kept as it is, neither missing nor new, until ``reconciler rekey`` renames it."""
    return Finding(
        check=CHECK,
        kind="rekey_pending",
        severity=Severity.WARNING,
        family=family,
        doc_id=problem.doc_id,
        expected={"doc_id": problem.message},
        actual={"doc_id": problem.doc_id, "path": problem.path},
        action="none: run `reconciler rekey --dry-run`, then `reconciler rekey`",
    )


def _problem_action(problem: SourceProblem) -> str:
    if problem.kind is ProblemKind.ID_NOT_READ:
        return "none: its id is its path until the pattern or the line is mended"
    if problem.kind is ProblemKind.CONFLICTING_LINKS and not problem.field:
        return "none: fix the links in the source; the successor both links name is used"
    if problem.field:
        return f"none: fix the document in the source; its registered {problem.field} is kept"
    return "none: fix the document in the source; its registered state is kept"


def unregistered_findings(problems: Iterable[SourceProblem]) -> list[Finding]:
    """Broken source documents that no registered document matches: ``source_problem``.

    They have no row to keep or change, and no family; they are reported so that operators
    see them in ``check``, ``plan`` and ``run`` output (and the metrics), not only in the
    ingestion log.
    """
    return [
        Finding(
            check=CHECK,
            kind="source_problem",
            severity=Severity.WARNING,
            family=None,
            doc_id=problem.doc_id,
            expected="a well-formed source document",
            actual={
                "source": problem.source,
                "problem": str(problem.kind),
                "path": problem.path,
                "message": problem.message,
            },
            action="none: fix the document in the source; it is registered once it parses",
        )
        for problem in problems
    ]


def _servable(doc: Document) -> bool:
    return doc.version_state in SERVABLE_STATES and not doc.quarantined


@dataclass(frozen=True)
class Declared:
    """What the source says a family's rows should be, after time is applied."""

    #: doc_id -> expected row, for the rows whose source was read and holds them.
    rows: Mapping[str, Document]
    #: Every row's input to ``settle`` (declared where judged, else the row as it is).
    inputs: tuple[Document, ...]
    #: doc_id -> successor doc_id that has no row yet.
    successors_not_ingested: Mapping[str, str]


def declared_family(view: FamilyView, ctx: CheckContext) -> Declared:
    """The source's truth for one family: the one derivation the family check reports from
    and the planner applies (so the dates and siblings checks never outvote the source).

    Worked out once per view and context (the family check and the planner both ask); the
    result is read, never changed."""
    memo = view.memo.get(_DECLARED)
    if memo is not None and memo[0] is ctx:
        return cast(Declared, memo[1])
    truth = _declared_family(view, ctx)
    # (the context itself is kept, not its id: an id may be reused once it is gone)
    view.memo[_DECLARED] = (ctx, truth)
    return truth


_DECLARED = "declared_family"


def _declared_family(view: FamilyView, ctx: CheckContext) -> Declared:
    declared: list[Document] = []
    judged: set[str] = set()
    not_ingested_successor: dict[str, str] = {}
    for row in view.rows:
        src = view.sources.get(row.doc_id)
        if src is None and _retire_as_missing(view, ctx, row):
            # Gone from a completely read source past the grace period: retired, in this
            # same run, so nothing else in the family is settled against it.
            judged.add(row.doc_id)
            declared.append(replaced(row, version_state=VersionState.RETIRED, superseded_by=None))
            continue
        if src is None or not ctx.source_readable(row.source):
            declared.append(row)
            continue
        judged.add(row.doc_id)
        unread = _unread(view.problems.get(row.doc_id, ()))
        src = with_registered(src, row, unread)
        # The successor as the source declares it, else its row (a partial scan may not have
        # reached it): either way its start closes this version's window.
        successor = closing_successor(
            src, lambda named: view.successors.get(named) or view.row(named)
        )
        expected = declared_document(
            src,
            family=view.family,  # (a document moving in takes the view's family)
            as_of=ctx.now,
            successor=successor,
            version=row.doc_version,
            registered=row,  # (its hash, quarantine and ingestion instants kept)
        )
        if expected.superseded_by and expected.superseded_by not in view.registered:
            not_ingested_successor[row.doc_id] = expected.superseded_by
            if ctx.successor_policy == "keep":
                expected = replaced(expected, **{f: getattr(row, f) for f in STATE_FIELDS})
        if "state" in unread:
            # A status that cannot be read: the row's state stands as it is (not re-derived
            # from the other fields, which would move its window and successor).
            expected = replaced(expected, **{f: getattr(row, f) for f in STATE_FIELDS})
        declared.append(expected)
    settled: Mapping[str, Document]
    if not judged:
        settled = {}  # nothing judged against a source: no declared row to settle
    elif declared == list(view.rows):
        # The source declares the rows as they are (the usual case): the time rule, a pure
        # function of the values, leaves them as it leaves the rows, worked out once a view.
        settled = view.settled(ctx.now, ctx.unknown_siblings)
    else:
        settled = settle(
            declared, ctx.now, unknown_siblings=ctx.unknown_siblings, links=view.links()
        )
    return Declared(
        rows={doc_id: settled[doc_id] for doc_id in judged},
        inputs=tuple(declared),
        successors_not_ingested=not_ingested_successor,
    )


def _unread(problems: Iterable[SourceProblem]) -> set[str]:
    """Fields of a document the connector took as absent (a typo)."""
    return {p.field for p in problems if p.kind in _FIELD_PROBLEMS and p.field}


def _missing_since(view: FamilyView, ctx: CheckContext, row: Document) -> datetime:
    return view.last_seen.get(row.doc_id) or row.ingested_at or row.updated_at or ctx.now


def _retire_as_missing(view: FamilyView, ctx: CheckContext, row: Document) -> bool:
    """Whether a row absent from its (completely read) source is past the grace period."""
    return (
        row.doc_id not in view.sources
        and row.doc_id not in view.problems
        and ctx.source_complete(row.source)
        and row.version_state is not VersionState.RETIRED
        and ctx.now >= _missing_since(view, ctx, row) + ctx.missing_grace
    )


def check_family(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """Compare what the source declares with the document rows of one family."""
    findings: list[Finding] = []
    for problems in view.problems.values():
        findings += problem_findings(problems, view.family)
    truth = declared_family(view, ctx)
    declared = truth.inputs
    judged = set(truth.rows)
    not_ingested_successor = truth.successors_not_ingested
    in_force = [
        d
        for d in declared
        if d.doc_id in view.sources
        and d.doc_id in judged
        and declared_state(view.sources[d.doc_id], as_of=ctx.now) is VersionState.CURRENT
        and d.effective_to > ctx.now
    ]
    # Declared in force together, and the time rule closes one of them by the order (not by
    # a link): the source contradicts itself. Versions its links keep in force together
    # (branches) are not.
    if len(in_force) > 1 and any(truth.rows[d.doc_id].effective_to <= ctx.now for d in in_force):
        winner = in_force_winner(in_force, ctx.now)
        findings.append(
            Finding(
                check=CHECK,
                kind="invalid_supersession",
                severity=Severity.WARNING,
                family=view.family,
                doc_id=winner.doc_id if winner else None,
                expected="at most one version in force",
                actual={"in_force": sorted(d.doc_id for d in in_force)},
                action=f"the latest started ({winner.doc_id if winner else '-'}) stays current; "
                "the others are superseded by it",
            )
        )

    settled = truth.rows
    # What the dates and siblings checks alone would do.
    timed = view.settled(ctx.now, ctx.unknown_siblings)
    for row in view.rows:
        if row.doc_id not in judged or row.doc_id not in view.sources:
            continue
        expected = settled[row.doc_id]
        changes = diff(row, expected, STATE_FIELDS + META_FIELDS)
        successor_id = not_ingested_successor.get(row.doc_id)
        if successor_id is not None:
            successor = view.successors.get(successor_id)
            findings.append(
                Finding(
                    check=CHECK,
                    kind="successor_not_ingested",
                    severity=Severity.CRITICAL,
                    family=view.family,
                    doc_id=row.doc_id,
                    expected={"superseded_by": successor_id, "successor_registered": True},
                    actual={"successor_registered": False, **values(row, ("version_state",))},
                    action=f"re-ingest request for {successor_id}{_meanwhile(expected, changes)}",
                    changes={**values(expected, STATE_FIELDS), **changes} if changes else {},
                    reingest=ReingestRequest(
                        doc_id=successor_id,
                        source=successor.source if successor else row.source,
                        source_key=successor.source_key if successor else successor_id,
                        reason="successor_not_ingested",
                    ),
                )
            )
            continue
        if not changes or _time_only(row, expected, timed[row.doc_id], ctx):
            continue  # in line with the source, or only time moved on: the dates check's job
        findings.append(_classify(row, expected, changes, view.family))

    findings += check_membership(view, ctx)
    findings += check_contradictions(view, ctx)
    findings += _missing(view, ctx, judged)
    findings += _new_documents(view, not_ingested_successor.values())
    return findings


def _meanwhile(expected: Document, changes: dict[str, object]) -> str:
    """What happens to a version whose successor waits for ingestion, for its finding."""
    if not changes:
        return ""
    if "version_state" in changes and expected.version_state is VersionState.SUPERSEDED:
        return "; mark this version superseded now"
    return f"; close its window at its successor's start ({rfc3339(expected.effective_to)})"


def _time_only(row: Document, expected: Document, timed: Document, ctx: CheckContext) -> bool:
    """Whether the only difference is a boundary the dates check reports and repairs."""
    if _but_family(expected) != _but_family(timed):
        return False  # (a document moving in: its family is ``membership_changed``'s)
    if expected.version_state is row.version_state and set(
        diff(row, expected, STATE_FIELDS + META_FIELDS)
    ) == {"effective_to"}:
        return True  # a successor is scheduled: the window closes early (successor_scheduled)
    started = (row.effective_from or ctx.now) <= ctx.now
    if row.version_state is VersionState.PENDING:
        return started and expected.version_state is VersionState.CURRENT
    if row.version_state is VersionState.CURRENT:
        return not started or row.effective_to <= ctx.now
    return False


#: Every field of a row but its family, in order (``_time_only``'s comparison: the row
#: compared as if it had the other's family, without building that copy).
_but_family = attrgetter(
    *(f.name for f in dataclasses.fields(Document) if f.name != "doc_family_id")
)


def _classify(
    row: Document, expected: Document, changes: dict[str, object], family: str
) -> Finding:
    state_changed = "version_state" in changes
    if state_changed and expected.version_state is VersionState.SUPERSEDED:
        kind, severity = "successor_not_marked", Severity.CRITICAL
        action = f"mark superseded by {expected.superseded_by}"
    elif state_changed and expected.version_state is VersionState.RETIRED:
        kind, severity = "retired_in_source", Severity.CRITICAL
        action = "mark retired"
    elif state_changed:
        kind = "state_mismatch"
        severity = Severity.CRITICAL if _servable(row) != _servable(expected) else Severity.WARNING
        action = f"set state {expected.version_state}"
    else:
        kind, severity = "metadata_mismatch", Severity.WARNING
        action = "update " + ", ".join(sorted(changes))
    return Finding(
        check=CHECK,
        kind=kind,
        severity=severity,
        family=family,
        doc_id=row.doc_id,
        expected=dict(changes),
        actual={f: getattr(row, f) for f in changes},
        action=action + " (table + payloads)",
        # The whole declared state, not only what differs: the source has the last word over
        # what the dates and siblings checks would set on the same row.
        changes={**values(expected, STATE_FIELDS), **changes},
    )


def _missing(view: FamilyView, ctx: CheckContext, judged: set[str]) -> list[Finding]:
    findings = []
    for row in view.rows:
        if (
            row.doc_id in view.sources
            or row.doc_id in view.problems
            or not ctx.source_complete(row.source)  # a partial scan proves no deletion
            or row.version_state is VersionState.RETIRED
        ):
            continue
        last = _missing_since(view, ctx, row)
        deadline = last + ctx.missing_grace
        retire = _retire_as_missing(view, ctx, row)
        findings.append(
            Finding(
                check=CHECK,
                kind="missing_in_source",
                severity=Severity.CRITICAL if retire else Severity.WARNING,
                family=view.family,
                doc_id=row.doc_id,
                expected="present in the source",
                actual={"last_seen": last},
                action=(
                    "mark retired (table + payloads)"
                    if retire
                    else f"none yet: retired at {deadline.isoformat()} unless it reappears"
                ),
                changes=(
                    {"version_state": VersionState.RETIRED, "superseded_by": None} if retire else {}
                ),
            )
        )
    return findings


def _new_documents(view: FamilyView, successors: Iterable[str]) -> list[Finding]:
    covered = set(successors)
    findings = []
    for doc in view.new_documents():
        if doc.doc_id in covered:
            continue
        findings.append(
            Finding(
                check=CHECK,
                kind="not_ingested",
                severity=Severity.INFO,
                family=view.family,
                doc_id=doc.doc_id,
                expected="registered in the document table",
                actual="only in the source",
                action="re-ingest request",
                reingest=ReingestRequest(
                    doc_id=doc.doc_id,
                    source=doc.source,
                    source_key=doc.source_key,
                    reason="not_ingested",
                ),
            )
        )
    return findings


def truth_family(view: FamilyView, ctx: CheckContext) -> Mapping[str, Document]:
    """The family's rows as its sources declare them (doc_id -> row): what its plan writes
    towards."""
    return declared_family(view, ctx).rows


def sources_family(view: SourcesView) -> Wide:
    """Problems no registered document matches (a note that never parsed, an entry without an
    id), and sources that yield nothing or nothing but ``unknown`` versions
    (``checks.source_yield``). Unreadable parts of a source without a document to name are
    the hash check's, with the source's own state."""
    findings = unregistered_findings(
        [p for p in view.loose_problems if p.kind not in UNREADABLE_PROBLEMS] + list(view.unclaimed)
    )
    findings += check_source_yield(
        view.states, view.documents, view.rows_by_source, view.now, view.problems
    )
    return Wide(tuple(findings))
