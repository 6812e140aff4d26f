"""Stage 5 of a writing run: apply the plan (of a refused run, what the guard allows) through the
``Applier``, and record the run in the run log: its start, its findings with what is still
outstanding, its sources' attempts and identities, and its end (``failed`` with exactly what
was written when the apply raised). Every write is made by ``reconciler.writing``
(``applying``, ``runs``, ``source_reads``); this stage decides which, and when."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from reconciler.checks import CHECKS
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.model import (
    Finding,
    RunStatus,
)
from reconciler.pipeline.guarding import forced_entry
from reconciler.pipeline.values import GuardDecision, Options, Scan, SourcesRead
from reconciler.planning import Plan
from reconciler.ports import ChunkIndex, DocumentTable
from reconciler.writing.applying import Applier, ApplyResult
from reconciler.writing.approving import (
    APPROVAL,
    FORCE,
    drop_moot_plans,
    mark_applied,
    save_plan,
)
from reconciler.writing.declaring import record_declarations
from reconciler.writing.executing import Repair, execute
from reconciler.writing.plan_bodies import held_plan
from reconciler.writing.runs import error_text, finish_reconciliation, start_reconciliation
from reconciler.writing.source_reads import record_reading

log = logging.getLogger(__name__)


#: Refusals with nothing a person could approve: what was read cannot be trusted.
_UNTRUSTED = frozenset({"source_empty", "index_shrunk"})


def save_authorized(
    table: DocumentTable,
    index: ChunkIndex,
    options: Options,
    plan: Plan,
    decision: GuardDecision,
    *,
    run_id: str,
    now: datetime,
) -> str | None:
    """Before a writing run writes: a refused run saves what it held back, for a person to
    approve as it is (``reconciler apply --plan ID``); a forced run saves its whole plan,
    which the runner that finds it dead finishes under the same ``--force``
    (``writing.approving``). Nothing is saved when the refusal trusts nothing that was read
    (a source emptied, the index shrunk) nor for a refused ``declare`` (its declarations are
    not recorded: its plan would be undone); the plan's id otherwise."""

    def save(part: Plan, authorized_by: str) -> str | None:
        return save_plan(
            table,
            index,
            part,
            run_id=run_id,
            shard=str(options.shard),
            now=now,
            ttl=options.guard.plan_ttl,
            hidden=decision.hidden,
            authorized_by=authorized_by,
            batch=options.scroll_batch,
            declarations=[d.id for d in options.declarations],
        )

    if decision.forced:
        return save(plan, FORCE)
    untrusted = _UNTRUSTED & {r.kind for r in decision.reasons}
    if not decision.refused or not decision.held or options.declarations or untrusted:
        return None
    return save(held_plan(plan, decision.held), APPROVAL)


def record(
    table: DocumentTable,
    index: ChunkIndex,
    options: Options,
    sources: SourcesRead,
    *,
    run_id: str,
    started_at: datetime,
    findings: Sequence[Finding],
    plan: Plan,
    decision: GuardDecision,
    scan: Scan,
    timings: Mapping[str, float],
    clock: Clock = SYSTEM_CLOCK,
    progress: Callable[[str, int], None] | None = None,
    keep_writing: Callable[[], None] | None = None,
    saved_plan: str | None = None,
) -> ApplyResult | None:
    """Apply the plan (of a refused run, the part the guard allows: ``GuardDecision.allowed``)
    and record the run, its findings and what the sources and identities looked like (a
    refused run's are not recorded); ``None`` when nothing was applied. A forced run's
    ``saved_plan`` is marked applied once its plan is written (``save_authorized``)."""

    def finish(
        status: RunStatus,
        counts: Mapping[str, Any],
        applied: ApplyResult | None,
        error: str | None = None,
    ) -> None:
        """Record the run's findings (with what is still outstanding) and its end."""
        finish_reconciliation(
            table,
            run_id,
            status=status,
            findings=findings,
            counts={**counts, "check_seconds": dict(timings)},
            written=applied.counts() if applied is not None else {},
            error=error,
            duration_seconds=(clock.now() - started_at).total_seconds(),
            chunks_scanned=scan.totals.chunks,
        )

    start_reconciliation(
        table,
        run_id=run_id,
        mode=options.mode,
        actor=options.actor,
        shard=str(options.shard),
        job=options.job or options.mode,
        checks=",".join(c for c in CHECKS if c in options.checks),
        forced=decision.forced,
        refused=decision.refused,
    )
    if decision.refused:
        # What cannot change the served set past a limit is still written
        # (``pipeline.guarding.hold_back``); the run stays ``refused`` for the rest.
        allowed = decision.allowed or Plan()
        if allowed.empty:
            finish(RunStatus.REFUSED, plan.counts(), None)
            return None
        plan = allowed
    applier = Applier(
        table=table,
        index=index,
        run_id=run_id,
        actor=options.actor,
        batch_points=options.write_batch,
        scroll_batch=options.scroll_batch,
        progress=(lambda n: progress("applied", n)) if progress is not None else None,
        keep_writing=keep_writing,
        clock=clock,
    )
    try:
        if decision.forced:
            applier.audit_first([forced_entry(run_id, decision, options, clock.now())])
        if options.declarations:
            # Before the plan: a run killed after this leaves declarations the next run
            # reads and finishes (or that the rollback of this run revokes).
            head = record_declarations(
                table, options.declarations, run_id=run_id, actor=options.actor, at=clock.now()
            )
            applier.result.audit_head = head or applier.result.audit_head
        applied = execute(Repair(plan, located=scan.chunks), applier)
    except Exception as exc:
        # Recorded with exactly what was written (the audit has it entry by entry); the
        # next run converges. If the table itself is what failed, the caller records it.
        counts = applier.result.counts()
        if applier.pending_intent is not None:
            counts["unconfirmed"] = applier.pending_intent  # for the next runner
        try:
            finish(RunStatus.FAILED, counts, applier.result, error=error_text(exc))
        except Exception as again:  # never let the record hide what went wrong
            log.error("could not record the failure of run %s: %s", run_id, again)
        raise
    if decision.refused:
        finish(RunStatus.REFUSED, applied.counts(), applied)
        return applied
    if decision.forced and saved_plan is not None:
        mark_applied(table, saved_plan, at=clock.now())
    # (when each source was read: the clock's, never --now's as-of instant)
    record_reading(table, sources.states, sources.identities, sources.present, at=started_at)
    unread = [
        f"source {name!r}: {state.error or 'read in part'}"
        for name, state in sorted(sources.states.items())
        if state.scanned and not (state.readable and state.complete)
    ]
    finish(
        RunStatus.PARTIAL if unread else RunStatus.SUCCEEDED,
        applied.counts(),
        applied,
        # (a partial run's reason: which sources were not reconciled, and why)
        error="; ".join(unread) if unread else None,
    )
    if not unread and _whole(options):
        # what an earlier refusal held back and this run neither wrote nor held: moot
        drop_moot_plans(table, str(options.shard), run_id=run_id)
    return applied


def _whole(options: Options) -> bool:
    """A run that weighed every document of its shard with every check (no scope, no
    declarations): one that would have held again what an earlier refusal held back."""
    return (
        options.checks == frozenset(CHECKS)
        and options.families is None
        and options.doc_id is None
        and options.paths is None
        and not options.declarations
    )
