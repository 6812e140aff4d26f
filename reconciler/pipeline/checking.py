"""The family checks of a run: a family as the checks see it (``family_view``), the checks
and the plan of one family (``check_family``), and what one stage found of them, family by
family (``FamilyChecks``: the first pass during the scan, frozen into a ``FirstPass`` value;
the rest after it, seeded from that value)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType

from reconciler.check_inputs import CheckContext, ChunkAggregate, FamilyView
from reconciler.checks import CHECKS, family_checks
from reconciler.checks.family import declared_family
from reconciler.model import (
    Document,
    Finding,
    SourceDocument,
)
from reconciler.pipeline import membership
from reconciler.pipeline.values import (
    FamilyOutcome,
    FirstPass,
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


class FamilyChecks:
    """The family checks of one stage, and what they found, family by family: a stage's own
    working state, never handed to another stage (the scan hands on ``first_pass()``, the
    assessment starts from it).

    The first pass over the table checks each family as it streams past, before the scan and
    without chunks (``first``). That is the family's final outcome when it finds nothing: the
    checks read chunks only through their payload variants, which a document has only when one
    of its chunks differs from its row, and the plan reads chunk counts only to repair a
    finding. So a family is checked again after the scan, with its chunks (``take``), only when
    the first pass found something, when it names a successor outside itself (it is not
    checked in the first pass then: whether that one has a row is known once every row is
    registered), when a source holds a document of it that has no row (the document joins its
    view), or when the scan finds a chunk of it that differs from its row. In a corpus with
    nothing to report that is no family, and the table is streamed once; up to
    ``REVISIT_BY_NAME`` families are read again by name, more by one more stream.
    """

    def __init__(
        self,
        options: Options,
        now: datetime,
        sources: SourcesRead,
        seed: FirstPass | None = None,
    ) -> None:
        self.ctx = CheckContext(
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
        self.sources = sources
        self.names = [c for c in family_checks() if c in options.checks]
        self.doc_id = options.doc_id
        self.findings: list[Finding] = []
        self.plans: list[Plan] = []
        seed = seed or FirstPass()
        #: check -> {"checked": n, "findings": n}.
        self.summary = {
            c: dict(seed.summary.get(c, {"checked": 0, "findings": 0}))
            for c in CHECKS
            if c in options.checks
        }
        self.timings: dict[str, float] = dict(seed.timings)
        #: The doc ids whose source problems a family took.
        self.claimed: set[str] = set(seed.claimed)
        #: Whether the scan's first pass went through ``first`` (else every family is left).
        self.first_pass = seed.ran
        #: The families ``first`` left for after the scan.
        self.revisit: list[str] = list(seed.revisit)
        #: doc_id -> family, for rows ``first`` found belonging to another family now.
        self.moves: dict[str, str] = dict(seed.moves)
        #: family -> the doc ids the sources place in it (built by the first ``first``).
        self._members: dict[str, set[str]] | None = None
        #: Whether families are checked as the sources have them now (the family check moves
        #: documents; without it, each row is checked in the family it is registered in).
        self.moving = "family" in self.names

    def frozen(self) -> FirstPass:
        """What this stage found, as the value the next stage starts from (a first pass
        reports no finding: a family with one is left for after the scan)."""
        return FirstPass(
            ran=self.first_pass,
            revisit=tuple(self.revisit),
            summary=MappingProxyType(
                {c: MappingProxyType(dict(v)) for c, v in self.summary.items()}
            ),
            timings=MappingProxyType(dict(self.timings)),
            claimed=frozenset(self.claimed),
            moves=MappingProxyType(dict(self.moves)),
        )

    def first(self, family: str, rows: tuple[Document, ...]) -> None:
        """Check a family of the first pass, or leave it for after the scan (``revisit``)."""
        leaving = membership.moves(rows, self.sources) if self.moving else {}
        if leaving or (self.moving and self._joining(family, rows)):
            # A document moves out of it or into it: checked after the scan, as the family
            # the source has now (``pipeline.membership``).
            self.moves.update(leaving)
            self.revisit.append(family)
            return
        view = family_view(family, rows, self.sources)
        if not view.registered <= {row.doc_id for row in rows}:
            self.revisit.append(family)  # a successor named outside it
            return
        outcome = check_family(view, self.ctx, self.names)
        if outcome.findings or not outcome.plan.empty:
            self.revisit.append(family)
            return
        self._count(view, outcome)

    def _joining(self, family: str, rows: tuple[Document, ...]) -> bool:
        """Whether the sources place a document in ``family`` that has no row in it (a new
        one, or one registered in another family)."""
        if not self.sources.family_of:
            return False
        if self._members is None:
            self._members = membership.members_by_family(self.sources)
        placed = self._members.get(family, set())
        return not placed <= {row.doc_id for row in rows}

    def take(self, view: FamilyView, *, again: bool = False) -> None:
        """Check a family with everything known after the scan, and keep what it finds
        (``again``: ``first`` checked and counted it already)."""
        outcome = check_family(view, self.ctx, self.names, self.doc_id)
        self.findings.extend(outcome.findings)
        if not outcome.plan.empty:
            self.plans.append(outcome.plan)  # an empty plan a family would make memory grow
        self._count(view, outcome, checked=0 if again else 1)

    def _count(self, view: FamilyView, outcome: FamilyOutcome, checked: int = 1) -> None:
        self.claimed.update(view.problems)
        for name, seconds in outcome.timings.items():
            self.timings[name] = self.timings.get(name, 0.0) + seconds
            self.summary[name]["checked"] += checked


def in_doc_scope(doc_id: str | None, finding: Finding) -> bool:
    return doc_id is None or finding.doc_id == doc_id


def check_family(
    view: FamilyView, ctx: CheckContext, checks: Sequence[str], doc_id: str | None = None
) -> FamilyOutcome:
    """Run the family checks on one family and plan their repair (``doc_id``: only that
    document's findings and writes)."""
    run = family_checks()
    findings: list[Finding] = []
    timings: dict[str, float] = {}
    consequence_checks = [c for c in ("dates", "siblings") if c in checks]
    # Whether the consequence checks already propose a row change on the family as it is.
    consequences = False
    for name in checks:
        started = time.perf_counter()
        found = run[name](view, ctx)
        timings[name] = time.perf_counter() - started
        findings += found
        if not consequences and name in consequence_checks:
            consequences = any(changes_a_row(f) for f in found)
    truth = declared_family(view, ctx).rows if "family" in checks else None
    # (no finding, nothing to plan: what ``plan_family`` would return)
    split = ctx.split is not None
    plan = plan_family(view, findings, truth, split=split) if findings else Plan()
    # Repairs have consequences: a version set back to current by the source can leave an
    # older one live beside it. Check the family as the plan leaves it, and fold what the
    # time rule still finds into the same plan, so one apply converges.
    # A plan that writes no row and no chunk leaves the family as it is (``as_planned``), and
    # the checks are pure: checking it again would find what the first pass found, so when
    # none of that changes a row there is nothing to fold in (the usual case: no drift).
    rounds = 3 if plan.row_updates or plan.payload_targets or consequences else 0
    for _round in range(rounds):
        after = as_planned(view, plan)
        extra = [
            f for name in consequence_checks for f in run[name](after, ctx) if changes_a_row(f)
        ]
        if not extra:
            break
        findings += extra
        plan = plan_family(view, findings, truth, split=split)
    findings = [f for f in findings if in_doc_scope(doc_id, f)]
    if doc_id is not None:
        plan = plan_family(view, findings, truth, split=split)
    return FamilyOutcome(findings=tuple(findings), plan=plan, timings=timings)
