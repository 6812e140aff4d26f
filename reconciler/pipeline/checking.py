"""The family checks of a run: a family as the checks see it (``family_view``), and the
checks and the plan of one family (``check_family``: the registered parts of the checks
chosen, ``checks.parts``), one ``FamilyOutcome`` value a family."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from reconciler.check_inputs import CheckContext, ChunkAggregate, FamilyView
from reconciler.checks import FamilyCheck, Parts, Truth, parts
from reconciler.model import (
    Document,
    Finding,
    SourceDocument,
)
from reconciler.pipeline.values import (
    FamilyOutcome,
    Options,
    SourcesRead,
)
from reconciler.planning import (
    Plan,
    as_planned,
    changes_a_row,
    plan_family,
)


def family_view(
    family: str,
    rows: tuple[Document, ...],
    sources: SourcesRead,
    new_docs: Sequence[SourceDocument] = (),
    chunks: Mapping[str, ChunkAggregate] | None = None,
) -> FamilyView:
    """A family as the checks see it: its rows, its documents in the sources (``new_docs``:
    those without a row), their problems, and ``chunks``. Every document the family names as a
    successor is taken as registered (``assessing.view_after_scan`` looks up those outside it)."""
    named = {r.superseded_by for r in rows if r.superseded_by is not None}
    by_id: dict[str, SourceDocument] = {}
    successors: dict[str, SourceDocument] = {}
    members = {r.doc_id for r in rows}
    if sources.by_id:  # (a run without sources, or a family none of them holds: no work)
        members |= {d.doc_id for d in new_docs}
        by_id = {d: sources.by_id[d] for d in members if d in sources.by_id}
        successors = {
            successor: sources.by_id[successor]
            for doc in by_id.values()
            for successor in doc.declared_successors
            if successor in sources.by_id
        }
        named |= {s for d in by_id.values() for s in d.declared_successors}
    return FamilyView(
        family=family,
        rows=rows,
        sources=by_id,
        successors=successors,
        problems=(
            {d: sources.problems[d] for d in members if d in sources.problems}
            if sources.problems
            else {}
        ),
        last_seen=(
            {d: sources.last_seen[d] for d in members if d in sources.last_seen}
            if sources.last_seen
            else {}
        ),
        chunks=chunks if chunks is not None else {},
        registered=frozenset(named),
        because=(
            {d: sources.because[d] for d in members if d in sources.because}
            if sources.because
            else {}
        ),
    )


def in_doc_scope(doc_id: str | None, finding: Finding) -> bool:
    return doc_id is None or finding.doc_id == doc_id


def check_context(options: Options, now: datetime, sources: SourcesRead) -> CheckContext:
    """The run-wide facts every check reads."""
    return CheckContext(
        now=now,
        sources=sources.states,
        successor_policy=options.successor_policy,
        unknown_siblings=options.unknown_siblings,
        missing_grace=options.missing_grace,
        holders=sources.holders,
        status_contradicts_link=options.status_contradicts_link,
        declared_only=sources.declared_only,
        split=options.split,
    )


class _Chosen(NamedTuple):
    """The parts of a run's chosen checks, worked out once a run (not once a family)."""

    #: (name, function, is a consequence check) of each part run on every family, in order.
    per_family: tuple[tuple[str, FamilyCheck, bool], ...]
    #: The consequence checks, in their round's order (``Registered.consequence``).
    rounds: tuple[FamilyCheck, ...]
    #: The first chosen check's declared rows (``truth_<name>``), if any declares.
    truth: Truth | None


#: The plan of a family without findings (a plan is a frozen value: one is shared).
NO_PLAN = Plan()

#: The last registry and checks ``_chosen`` worked out, with what it found (a run asks for the
#: same on every family; a registry swapped in, as a test does, is worked out again).
_last: tuple[Mapping[str, Parts], tuple[str, ...], _Chosen] | None = None


def _chosen(checks: tuple[str, ...]) -> _Chosen:
    global _last  # noqa: PLW0603 - a one-entry memo
    registered = parts()
    last = _last
    if last is not None and last[0] is registered and last[1] == checks:
        return last[2]
    chosen = [registered[name] for name in checks]
    rounds = sorted(
        (p for p in chosen if p.check.consequence and p.family is not None),
        key=lambda p: p.check.consequence,
    )
    truths = [p.truth for p in chosen if p.truth is not None]
    found = _Chosen(
        per_family=tuple(
            (p.name, p.family, bool(p.check.consequence))
            for p in chosen
            if p.family is not None and p.check.per_family
        ),
        rounds=tuple(p.family for p in rounds if p.family is not None),
        truth=truths[0] if truths else None,
    )
    _last = (registered, checks, found)
    return found


def check_family(
    view: FamilyView, ctx: CheckContext, checks: Sequence[str], doc_id: str | None = None
) -> FamilyOutcome:
    """Run the chosen checks' parts on one family and plan their repair (``doc_id``: only that
    document's findings and writes)."""
    chosen = _chosen(tuple(checks))
    findings: list[Finding] = []
    timings: dict[str, float] = {}
    # Whether the consequence checks already propose a row change on the family as it is.
    consequences = False
    clock = time.perf_counter
    for name, check, consequence in chosen.per_family:
        started = clock()
        found = check(view, ctx)
        timings[name] = clock() - started
        if found:
            findings += found
            if not consequences and consequence:
                consequences = any(changes_a_row(f) for f in found)
    if not findings:
        # (no finding, nothing to plan: what ``plan_family`` would return, whatever the
        # family's declared rows; ``doc_id`` keeps none of no findings)
        return FamilyOutcome(findings=(), plan=NO_PLAN, timings=timings)
    truth = chosen.truth(view, ctx) if chosen.truth is not None else None
    split = ctx.split is not None
    plan = plan_family(view, findings, truth, split=split, now=ctx.now)
    # Repairs have consequences: a version set back to current by the source can leave an
    # older one live beside it. Check the family as the plan leaves it, and fold what the
    # time rule still finds into the same plan, so one apply converges.
    # A plan that writes no row and no chunk leaves the family as it is (``as_planned``), and
    # the checks are pure: checking it again would find what the first round found, so when
    # none of that changes a row there is nothing to fold in.
    rounds = 3 if plan.row_updates or plan.payload_targets or consequences else 0
    for _round in range(rounds):
        after = as_planned(view, plan)
        extra = [f for check in chosen.rounds for f in check(after, ctx) if changes_a_row(f)]
        if not extra:
            break
        findings += extra
        plan = plan_family(view, findings, truth, split=split, now=ctx.now)
    if doc_id is not None:
        findings = [f for f in findings if in_doc_scope(doc_id, f)]
        plan = plan_family(view, findings, truth, split=split, now=ctx.now)
    return FamilyOutcome(findings=tuple(findings), plan=plan, timings=timings)
