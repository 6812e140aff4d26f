"""``dates``: document table and payloads <-> the clock — state transitions at the boundaries."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from reconciler.check_inputs import CheckContext, FamilyView
from reconciler.checks.common import STATE_FIELDS, diff
from reconciler.model import Finding, Severity, VersionState, rfc3339
from reconciler.rules.time_rule import row_served, start_of

CHECK = "dates"


def check_dates(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """Find versions whose state or window is out of step with the time rule at ``ctx.now``."""
    findings: list[Finding] = []
    timed = view.settled(ctx.now, ctx.unknown_siblings)
    # Worked out on first need (most families have no change and no empty window).
    became_current: set[str] | None = None
    starts: Counter[datetime] | None = None
    for row in view.rows:
        after = timed[row.doc_id]
        changes = diff(row, after, STATE_FIELDS)
        # The time rule never closes a window before it opens; it closes one empty (at its
        # start) only for a successor starting at that same instant. Any other empty or
        # reversed window comes from the source's own dates.
        empty = row.effective_from is not None and row.effective_from == row.effective_to
        closed_by_sibling = False
        if empty:
            if starts is None:
                starts = Counter(start_of(other) for other in view.rows)
            # (an empty window's own start is counted in ``starts``: another one makes two)
            closed_by_sibling = row.superseded_by is not None or starts[row.effective_to] > 1
        if row.effective_from is not None and (
            row.effective_from > row.effective_to or (empty and not closed_by_sibling)
        ):
            findings.append(
                Finding(
                    check=CHECK,
                    kind="effective_window_invalid",
                    severity=Severity.CRITICAL,
                    family=view.family,
                    doc_id=row.doc_id,
                    expected="effective_from < effective_to",
                    actual={"effective_from": row.effective_from, "effective_to": row.effective_to},
                    action="none: fix the dates in the source (no retrieval can return it)",
                )
            )
        if not changes:
            continue
        if became_current is None:
            became_current = {
                other.doc_id
                for other in view.rows
                if other.version_state is VersionState.PENDING
                and (other.effective_from is None or other.effective_from <= ctx.now)
            }
        if row.doc_id in became_current:
            kind = "pending_now_effective"
            action = f"set state {after.version_state}" + (
                f" (a later version, {after.superseded_by}, is already in force)"
                if after.superseded_by
                else ""
            )
        elif after.version_state is VersionState.PENDING:
            kind, action = "not_yet_effective", "set state pending until its effective_from"
        elif after.superseded_by in became_current:
            kind = "pending_now_effective"
            action = f"superseded by {after.superseded_by}, now in force"
        elif (
            row_served(row, ctx.now)
            and after.version_state is VersionState.SUPERSEDED
            and any(row_served(doc, ctx.now) for doc in timed.values())
        ):
            continue  # served beside the version in force: the siblings check reports it
        elif after.version_state is row.version_state:
            kind = "successor_scheduled"
            action = (
                f"close its window at {rfc3339(after.effective_to)}, when its successor comes "
                "into force (it is served until then)"
            )
        else:
            kind = "effective_to_passed"
            action = f"set state {after.version_state}" + (
                f" (by {after.superseded_by})" if after.superseded_by else ""
            )
        findings.append(
            Finding(
                check=CHECK,
                kind=kind,
                severity=Severity.WARNING,
                family=view.family,
                doc_id=row.doc_id,
                expected=dict(changes),
                actual={f: getattr(row, f) for f in changes},
                action=action + " (table + payloads)",
                changes=changes,
            )
        )
    for row in view.rows:
        aggregate = view.chunks.get(row.doc_id)
        if aggregate is None or not aggregate.variants:
            continue
        missing = sum(
            n
            for variant, n in aggregate.variants.items()
            if dict(variant).get("effective_to") is None
        )
        if missing:
            findings.append(
                Finding(
                    check=CHECK,
                    kind="effective_to_missing",
                    severity=Severity.WARNING,
                    family=view.family,
                    doc_id=row.doc_id,
                    expected={"effective_to": row.effective_to},
                    actual={"effective_to": None, "chunks": missing},
                    action="write effective_to (the open-end sentinel when open-ended)",
                )
            )
    return findings
