"""``family``: a source that contradicts itself, where a declared link and a status or a date
disagree.

Declared links win (the time rule supersedes a version once a successor it names comes into
force), so the rows come out right either way; but the source says two things, and whoever
reads it (a person, another pipeline) may believe the other one. These findings say so and
carry no write: only the source can be mended.

- ``status_contradicts_link``: the source declares a version in force (``current``, or
  ``pending``) while one of the successors it names (``superseded_by``, or a ``replaces``
  that names it: every one of ``SourceDocument.declared_successors``) has come into force
  already (it is not a draft or retired, and its start has passed at the run's instant, or
  is not known: an undated successor is in force from the start). PEP 248 says ``Status:
  Final`` and ``Superseded-By: 249``. A successor whose start is still ahead is the
  scheduling idiom of a vault (``status: current`` beside ``superseded_by: v2`` that starts
  next year) and no contradiction; once it has started, a note still saying ``current`` is
  stale, reported unless ``[policy] status_contradicts_link = "ignore"``.
- ``successor_not_in_force``: the source declares a version ``superseded`` and names
  successors, none of which comes into force, at least one of them a draft awaiting approval
  (the others retired). Declared links close a version only when a successor comes into
  force, so it stays in force and is served (as ``current``) although its source says it is
  replaced. When every successor it names is retired, the successor was withdrawn and the
  version it replaced is in force again, as the time rule says: a routine change, no
  finding. A ``retired`` version is hidden as it says, whatever its successors (PEP 543,
  rejected, names the draft 748): no finding. A successor that is to start later (pending) is the scheduling idiom, no finding
  either: the row's ``effective_to`` already says when it ends.
- ``successor_predates``: a successor that comes into force starts before the version it
  supersedes (PEP 102, created 2002, superseded by PEP 101, created 2001). The older
  version's window closes at its own start: it is never in force, at no instant.

A version declared ``superseded`` that names no successor (PEPs 6 and 411) is neither: it
says it is not in force, and the rule hides it; that its replacement is outside the corpus
is no contradiction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from reconciler.check_inputs import CheckContext, FamilyView
from reconciler.model import (
    OPEN_START,
    Document,
    Finding,
    Severity,
    SourceDocument,
    VersionState,
    utc,
)
from reconciler.rules.time_rule import NEVER_IN_FORCE

CHECK = "family"
#: Declared states that say a version is, or is to be, in force.
_IN_FORCE = frozenset({VersionState.CURRENT, VersionState.PENDING})

Successor = SourceDocument | Document


def comes_into_force(successor: Successor) -> bool:
    """Whether a successor ever comes into force: not one the source declares a draft or
    retired (a row's state is the rule's answer, not a declaration)."""
    return not (isinstance(successor, SourceDocument) and successor.state in NEVER_IN_FORCE)


def _awaiting_approval(successor: Successor) -> bool:
    """Whether the source declares a successor a draft: not in force yet, and it may be."""
    return isinstance(successor, SourceDocument) and successor.state is VersionState.DRAFT


def _started(successor: Successor, now: datetime) -> bool:
    start = successor.effective_from
    return start is None or utc(start) <= utc(now)


def _dated(successor: Successor) -> dict[str, object]:
    return {"doc_id": successor.doc_id, "effective_from": successor.effective_from}


def contradictions(
    doc: SourceDocument,
    successors: Sequence[Successor],
    *,
    now: datetime,
    family: str | None,
    status_policy: str = "report",
) -> list[Finding]:
    """What ``doc``'s declared links contradict in its own declaration at ``now``: at most one
    finding of each kind, naming every successor concerned.

    ``successors``: the documents its links name (as their source declares them, else their
    rows), each once; ``status_policy``: ``[policy] status_contradicts_link`` ("ignore" drops
    the status findings). Pure: plain values in, findings out (none carries a write)."""
    live = sorted((s for s in successors if comes_into_force(s)), key=_first_in_force)
    findings: list[Finding] = []
    started = [s for s in live if _started(s, now)]
    if status_policy != "ignore" and doc.state in _IN_FORCE and started:
        first = started[0]
        since = f"since {_day(first.effective_from)}" if first.effective_from else "from the start"
        findings.append(
            _warning(
                "status_contradicts_link",
                doc,
                family,
                expected={"status": str(VersionState.SUPERSEDED), "superseded_by": first.doc_id},
                actual={"status": str(doc.state), "successors_in_force": _listed(started)},
                action=(
                    f"none: declared links win, {doc.doc_id} is superseded by {first.doc_id} "
                    f"(in force {since}); set its status to superseded in the source to "
                    'clear this, or [policy] status_contradicts_link = "ignore"'
                ),
            )
        )
    if (
        status_policy != "ignore"
        and doc.state is VersionState.SUPERSEDED
        and not live
        and any(_awaiting_approval(s) for s in successors)
    ):
        findings.append(_not_in_force(doc, successors, family, now=now))
    start = doc.effective_from
    earlier = [s for s in live if start is not None and _before(s.effective_from, start)]
    if start is not None and earlier:
        names = ", ".join(f"{s.doc_id} ({_day(s.effective_from)})" for s in earlier)
        findings.append(
            _warning(
                "successor_predates",
                doc,
                family,
                expected={"successors_start": f"at or after {_day(start)}"},
                actual={"effective_from": start, "successors": _listed(earlier)},
                action=(
                    f"none: declared links win, {doc.doc_id} ({_day(start)}) is never in force "
                    f"(its window closes at its own start): its successor{'s' * (len(earlier) > 1)} "
                    f"{names} start{'s' * (len(earlier) == 1)} before it; if it was in force for "
                    "a time, correct the dates or the link in the source"
                ),
            )
        )
    return findings


def _not_in_force(
    doc: SourceDocument, successors: Sequence[Successor], family: str | None, *, now: datetime
) -> Finding:
    names = ", ".join(
        f"{s.doc_id} ({s.state.value if isinstance(s, SourceDocument) and s.state else '?'})"
        for s in successors
    )
    start = doc.effective_from
    served = "pending" if start is not None and utc(start) > utc(now) else "current"
    action = (
        f"none: {doc.doc_id} is served as {served}: the source declares it superseded, but no "
        f"successor it names comes into force ({names}), and declared links close a version "
        f"only once a successor is in force; approve the successor, or declare {doc.doc_id} "
        "retired to stop serving it"
    )
    return _warning(
        "successor_not_in_force",
        doc,
        family,
        expected={"a successor in force": [s.doc_id for s in successors]},
        actual={"status": str(doc.state), "served": served, "successors": _listed(successors)},
        action=action,
    )


def _warning(
    kind: str,
    doc: SourceDocument,
    family: str | None,
    *,
    expected: object,
    actual: object,
    action: str,
) -> Finding:
    return Finding(
        check=CHECK,
        kind=kind,
        severity=Severity.WARNING,
        family=family,
        doc_id=doc.doc_id,
        expected=expected,
        actual=actual,
        action=action,
    )


def _before(start: datetime | None, other: datetime) -> bool:
    return start is not None and utc(start) < utc(other)


def _day(instant: datetime | None) -> str:
    return utc(instant).date().isoformat() if instant is not None else "undated"


def _first_in_force(successor: Successor) -> tuple[datetime, str]:
    """Undated successors first (in force from the start), then by start, then by id."""
    start = successor.effective_from
    return (utc(start) if start else OPEN_START, successor.doc_id)


def _listed(successors: Iterable[Successor]) -> list[dict[str, object]]:
    return [_dated(s) for s in successors]


def check_contradictions(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """``contradictions`` for each source document of one family (part of the family
    check: the source documents and their successors are at hand there)."""
    findings: list[Finding] = []
    for doc_id, doc in sorted(view.sources.items()):
        named: list[Successor] = []
        for successor_id in doc.declared_successors:
            successor = view.successors.get(successor_id) or view.row(successor_id)
            if successor is not None and successor_id != doc_id:
                named.append(successor)
        if named:
            findings += contradictions(
                doc,
                named,
                now=ctx.now,
                family=view.family,
                # A row no source holds keeps its state beside a declared successor: the
                # declaration is the later word, not a contradiction of the row.
                status_policy=(
                    "ignore" if doc.source in ctx.declared_only else ctx.status_contradicts_link
                ),
            )
    return findings
