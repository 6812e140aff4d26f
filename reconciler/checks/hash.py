"""``hash``: system-of-record content <-> the table's ``source_hash`` — edits made in place.

Changed content can only be fixed by re-embedding, which the reconciler never does: it
quarantines the document's chunks and asks the ingestion pipeline to re-ingest it.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.check_inputs import CheckContext, FamilyView, SourceState, SourcesView, Wide
from reconciler.checks.common import quarantine_lifted
from reconciler.checks.family import UNREADABLE_PROBLEMS
from reconciler.model import Document, Finding, ReingestRequest, Severity, SourceProblem

CHECK = "hash"
REASON = "in_place_edit"


def check_hash(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """Find documents whose source content changed without a new version."""
    findings: list[Finding] = []
    for problems in view.problems.values():
        findings += unreadable_findings(problems, view.family)
    for row in view.rows:
        src = view.sources.get(row.doc_id)
        if src is None or row.source_hash is None or not ctx.source_readable(row.source):
            continue
        if src.content_hash != row.source_hash:
            held = row.quarantined and row.quarantine_reason == REASON
            findings.append(
                Finding(
                    check=CHECK,
                    kind="in_place_edit",
                    severity=Severity.CRITICAL,
                    family=view.family,
                    doc_id=row.doc_id,
                    expected={"source_hash": row.source_hash},
                    actual={"source_hash": src.content_hash},
                    action=(
                        "keep its chunks quarantined until they are re-ingested: run "
                        "`reconciler ingest` (or your ingestion pipeline), then `reconciler apply`"
                        if held
                        else "quarantine the document's chunks and request a re-ingest (next: "
                        "`reconciler ingest` or your ingestion pipeline, then `reconciler apply`)"
                    ),
                    quarantine=(REASON, True),
                    reingest=ReingestRequest(
                        doc_id=row.doc_id,
                        source=row.source,
                        source_key=row.source_key,
                        reason=REASON,
                    ),
                )
            )
            findings += id_reused(row, src.content_hash, ctx, view.family)
        elif row.quarantined and row.quarantine_reason == REASON:
            findings.append(
                quarantine_lifted(
                    CHECK, REASON, row, view.family, "the re-ingested content matches the source"
                )
            )
    return findings


def id_reused(row: Document, now_holds: str, ctx: CheckContext, family: str) -> list[Finding]:
    """A registered id whose text is now under another id, while the id holds a new text: a
    renamed document whose old id was given to a new one. Reported, never re-homed: the
    row stays the id's (its chunks are the in-place edit's to quarantine), and the other id
    is a document of its own."""
    moved_to = [d for d in ctx.holders.get(row.source_hash or "", ()) if d != row.doc_id]
    if not moved_to:
        return []
    elsewhere = ", ".join(moved_to)
    return [
        Finding(
            check=CHECK,
            kind="id_reused",
            severity=Severity.WARNING,
            family=family,
            doc_id=row.doc_id,
            expected={"doc_id": row.doc_id, "source_hash": row.source_hash},
            actual={"moved_to": moved_to, "source_hash": now_holds},
            action=(
                f"none by itself: the text registered as {row.doc_id} is now under "
                f"{elsewhere}, and {row.doc_id} holds a new text (renamed, its id reused?). "
                f"{row.doc_id} is re-ingested with its new text and {elsewhere} registered "
                "as a document of its own; if the rename is not meant, restore the ids in "
                "the source; if it is, link the versions (superseded_by) or give them a family"
            ),
        )
    ]


def unreadable_findings(problems: Iterable[SourceProblem], family: str | None) -> list[Finding]:
    """Documents the connector could not read: reported, their state kept."""
    return [
        Finding(
            check=CHECK,
            kind="source_unreadable",
            severity=Severity.WARNING,
            family=family,
            doc_id=problem.doc_id
            or (f"{problem.source}:{problem.source_key}" if problem.source_key else None),
            expected="a readable source document",
            actual={"problem": str(problem.kind), "path": problem.path, "message": problem.message},
            action="none: the document keeps its registered state",
        )
        for problem in problems
        if problem.kind in UNREADABLE_PROBLEMS
    ]


def check_source(state: SourceState) -> list[Finding]:
    """A whole source that could not be read: never an empty corpus."""
    if state.scanned and state.readable and not state.complete:
        return [
            Finding(
                check=CHECK,
                kind="source_unreadable",
                severity=Severity.WARNING,
                family=None,
                doc_id=None,
                expected={"source": state.name, "complete": True},
                actual={"source": state.name, "complete": False, "documents": state.documents},
                action="none: the scan was partial, so no absent document is taken as deleted",
            )
        ]
    if not state.scanned or state.readable:
        return []
    return [
        Finding(
            check=CHECK,
            kind="source_unreadable",
            severity=Severity.CRITICAL,
            family=None,
            doc_id=None,
            expected={"source": state.name, "readable": True},
            actual={"source": state.name, "error": state.error},
            action="none: its documents keep their state (an unreadable source is not an empty one)",
        )
    ]


def sources_hash(view: SourcesView) -> Wide:
    """Unreadable parts of a source without a document to name, and unreadable sources."""
    findings = unreadable_findings(view.loose_problems, None)
    for state in view.states.values():
        findings += check_source(state)
    return Wide(tuple(findings))
