"""``siblings``: rows and chunk payloads within a family — two versions served at once.

A re-chunking run writes an old version's chunks back as current; a row is set back to
current beside a started later version; two undeclared (``unknown``) versions sit side by
side. Each leaves retrieval serving two versions of one document. The check reads what
``default_filter()`` serves now — every row and every chunk payload variant — and compares it
with the versions the time rule (``reconciler.rules.time_rule``) keeps in force: one, or one
per branch where the links branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from reconciler.check_inputs import CheckContext, FamilyView
from reconciler.checks.common import STATE_FIELDS, diff
from reconciler.model import OPEN_START, Document, Finding, Severity
from reconciler.rules.time_rule import (
    link_lines,
    order_key,
    payload_instant,
    payload_served,
    row_served,
    start_of,
)

CHECK = "siblings"


def check_siblings(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """Find versions served now beside the one the time rule keeps in force."""
    if quiet(view, view.settled(ctx.now, ctx.unknown_siblings), ctx.now):
        return []  # (most families: what the rest would find, told sooner)
    return check_in_full(view, ctx)


def check_in_full(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """``check_siblings`` without the shortcut for a quiet family (``quiet``)."""
    now = ctx.now
    settled = view.settled(now, ctx.unknown_siblings)
    rows = {row.doc_id: row for row in view.rows}
    # What retrieval serves now, per document: (state, start) of each served row or variant.
    live: dict[str, list[tuple[str, datetime]]] = {}
    for doc_id, row in rows.items():
        # The row's own claim counts: a row set back to current beside a started later sibling
        # is caught here, before the payload check would copy it onto the chunks.
        claims = [(str(row.version_state), start_of(row))] if row_served(row, now) else []
        aggregate = view.chunks.get(doc_id)
        for variant in aggregate.variants if aggregate is not None else ():
            values = dict(variant)
            if payload_served(values, now):
                claims.append(
                    (
                        str(values.get("version_state")),
                        payload_instant(values.get("effective_from"), OPEN_START),
                    )
                )
        if claims:
            live[doc_id] = claims
    in_force = [
        doc.doc_id
        for doc in sorted((doc for doc in settled.values() if row_served(doc, now)), key=order_key)
    ]
    line: dict[str, str] = {}
    if len(in_force) > 1:
        # Versions one line of links joins may be in force together (the branches of a
        # fan-out, the versions of a fan-in until their successor starts).
        line = link_lines(list(settled.values()), view.links())
    if all(doc_id in in_force for doc_id in live) and len({line.get(d) for d in in_force}) <= 1:
        return []  # only the versions in force are served: nothing to report
    findings = []
    for doc_id, claims in sorted(live.items()):
        others = (set(live) | set(in_force)) - {doc_id}
        if doc_id in in_force or not others:
            continue  # the version in force, or a lone stale one (the payload check's)
        sibling = (
            settled[in_force[-1]] if in_force else max((settled[d] for d in others), key=order_key)
        )
        row, after = rows[doc_id], settled[doc_id]
        # Only a row that itself is served changes (it is superseded by the rule); a row
        # already superseded, retired or draft keeps its state and its chunks are rewritten.
        changes = diff(row, after, STATE_FIELDS) if row_served(row, now) else {}
        findings.append(
            _finding(
                view,
                row,
                after,
                claims,
                sibling,
                changes=changes,
                severity=Severity.CRITICAL,
                action=(
                    f"supersede by {after.superseded_by} (table + payloads)"
                    if changes
                    else f"rewrite its chunks from the row ({after.version_state})"
                ),
            )
        )
    # Two versions of different lines the rule leaves in force together: only the ``report``
    # policy does that.
    newest = settled[in_force[-1]] if in_force else None
    for doc_id in in_force[:-1]:
        assert newest is not None
        if line.get(doc_id) == line.get(newest.doc_id):
            continue
        findings.append(
            _finding(
                view,
                rows[doc_id],
                settled[doc_id],
                live.get(doc_id) or [(str(rows[doc_id].version_state), start_of(rows[doc_id]))],
                newest,
                changes={},
                severity=Severity.WARNING,
                action="none: [policy] unknown_siblings = report; retire or supersede one "
                "of them in the source",
            )
        )
    return findings


def quiet(view: FamilyView, settled: Mapping[str, Document], now: datetime) -> bool:
    """Whether the family is one the check finds nothing in, told without the claims: no
    chunk of it carries a payload variant (so what is served is what its rows say), the time
    rule leaves every row as it is (the very object: what is served is what is in force), and
    at most one row is served (so no two lines are in force). ``False`` says nothing."""
    if len(settled) != len(view.rows):
        return False
    chunks = view.chunks
    served = 0
    for row in view.rows:
        if settled.get(row.doc_id) is not row:
            return False
        aggregate = chunks.get(row.doc_id)
        if aggregate is not None and aggregate.variants:
            return False
        if row_served(row, now):
            served += 1
            if served > 1:
                return False
    return True


def _finding(
    view: FamilyView,
    row: Document,
    after: Document,
    claims: list[tuple[str, datetime]],
    sibling: Document,
    *,
    changes: dict[str, object],
    severity: Severity,
    action: str,
) -> Finding:
    states = sorted({state for state, _start in claims})
    return Finding(
        check=CHECK,
        kind="live_siblings",
        severity=severity,
        family=view.family,
        doc_id=row.doc_id,
        expected={
            "version_state": str(after.version_state),
            "superseded_by": after.superseded_by,
        },
        actual={
            "version_state": states[0] if len(states) == 1 else states,
            "live_from": min(start for _state, start in claims),
            "sibling": sibling.doc_id,
            "sibling_state": str(sibling.version_state),
            "sibling_from": start_of(sibling),
        },
        action=action,
        changes=changes,
    )
