"""Stage 4 of a run: the blast-radius guard (``decide``): may the plan be written?"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from reconciler.check_inputs import SourceState
from reconciler.model import (
    AuditEntry,
    Finding,
    Severity,
)
from reconciler.pipeline.values import (
    GuardDecision,
    Options,
    Totals,
)
from reconciler.planning import (
    Plan,
)


def decide(
    options: Options, totals: Totals, plan: Plan, sources: Mapping[str, SourceState]
) -> GuardDecision:
    """The blast-radius guard: may ``plan`` be written? (A source that had documents and
    returned none, or more than the allowed fraction of families or chunks changing.)"""
    changed_families = len(plan.changed_families())
    changed_chunks = plan.counts()["points"]
    families_total = max(totals.families, 1)
    chunks_total = max(totals.chunks, 1)
    reasons: list[Finding] = []
    for name, state in sources.items():
        if (
            state.scanned
            and state.readable
            and state.documents == 0
            and totals.rows_by_source.get(name)
        ):
            reasons.append(
                Finding(
                    check="guard",
                    kind="source_empty",
                    severity=Severity.CRITICAL,
                    family=None,
                    doc_id=None,
                    expected={
                        "source": name,
                        "documents": f"> 0 ({totals.rows_by_source[name]} registered, not retired)",
                    },
                    actual={"source": name, "documents": 0},
                    action="refuse the run: a source that had documents returned none",
                )
            )
    limit = options.guard.max_changed_fraction
    scoped = options.families is not None or options.doc_id is not None
    for what, changed, total in (
        ("families", changed_families, families_total),
        ("chunks", changed_chunks, chunks_total),
    ):
        if not scoped and changed > options.guard.floor and changed / total > limit:
            reasons.append(
                Finding(
                    check="guard",
                    kind="blast_radius",
                    severity=Severity.CRITICAL,
                    family=None,
                    doc_id=None,
                    expected={what: f"<= {limit:.0%} of {total}"},
                    actual={what: changed, "fraction": round(changed / total, 4)},
                    action="refuse the run (rerun with --force after review)",
                )
            )
    reasons += shrunken_index(options, totals)
    writing = options.mode.writes and bool(reasons)
    return GuardDecision(
        totals=totals,
        changed_families=changed_families,
        changed_chunks=changed_chunks,
        max_changed_fraction=limit,
        reasons=tuple(reasons),
        refused=writing and not options.force,
        forced=writing and options.force,
    )


def shrunken_index(options: Options, totals: Totals) -> list[Finding]:
    """An index that lost more than the allowed fraction of the chunks the table registers is
    a failure of the store, not drift: no write goes on top of it (even a scoped run's)."""
    missing = totals.chunks_expected - totals.chunks_found
    limit = options.guard.max_changed_fraction
    if missing <= options.guard.floor or missing / max(totals.chunks_expected, 1) <= limit:
        return []
    return [
        Finding(
            check="guard",
            kind="index_shrunk",
            severity=Severity.CRITICAL,
            family=None,
            doc_id=None,
            expected={"chunks": f">= {1 - limit:.0%} of {totals.chunks_expected}"},
            actual={
                "chunks": totals.chunks_found,
                "fraction": round(totals.chunks_found / max(totals.chunks_expected, 1), 4),
            },
            action=(
                "refuse the run: the chunk index lost points the table registers (restore "
                "it, or re-ingest, then run again; --force writes anyway)"
            ),
        )
    ]


def forced_entry(
    run_id: str, decision: GuardDecision, options: Options, now: datetime
) -> AuditEntry:
    return AuditEntry(
        run_id=run_id,
        at=now,
        actor=options.actor,
        reason="--force past the blast-radius guard",
        target_type="run",
        target=run_id,
        before={"guard": [r.kind for r in decision.reasons]},
        after={"forced": True},
    )
