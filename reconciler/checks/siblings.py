"""``siblings``: chunk payloads within a family — a superseded version still live beside its
successor (the resurrection a re-chunking run causes)."""

from __future__ import annotations

from datetime import datetime

from reconciler.model import OPEN_START, Finding, Severity, VersionState, parse_instant
from reconciler.snapshot import Context, FamilyView

CHECK = "siblings"
_LIVE = {str(VersionState.CURRENT), str(VersionState.PENDING)}


def _instant(value: object) -> datetime:
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError:
            return OPEN_START
    return OPEN_START


def check_siblings(view: FamilyView, ctx: Context) -> list[Finding]:
    """Find chunks marked in force while a sibling version with a later start has started."""
    claims: dict[str, list[tuple[str, datetime, bool]]] = {}
    rows = {row.doc_id: row for row in view.rows}
    for doc_id, row in rows.items():
        aggregate = view.chunks.get(doc_id)
        if aggregate is None:
            continue
        seen: list[tuple[str, datetime, bool]] = []
        if aggregate.matching:
            seen.append((str(row.version_state), row.effective_from or OPEN_START, row.quarantined))
        for variant in aggregate.variants:
            values = dict(variant)
            seen.append(
                (
                    str(values.get("version_state")),
                    _instant(values.get("effective_from")),
                    values.get("quarantined") is True,
                )
            )
        claims[doc_id] = seen
    findings = []
    for doc_id, seen in sorted(claims.items()):
        live = [
            start for state, start, quarantined in seen if state == "current" and not quarantined
        ]
        if not live:
            continue
        start = min(live)
        later = [
            (other_start, rows[other].doc_version, other)
            for other, other_seen in claims.items()
            if other != doc_id
            for state, other_start, _q in other_seen
            if state in _LIVE and start < other_start <= ctx.now
        ]
        if not later:
            continue
        successor_start, _version, successor = max(later)
        row = rows[doc_id]
        changes: dict[str, object] = {}
        # A row already superseded keeps its chain (its successor may be an earlier sibling):
        # only its chunks lag behind, and the planner rewrites them from the row.
        if row.version_state is not VersionState.SUPERSEDED:
            changes = {
                "version_state": VersionState.SUPERSEDED,
                "superseded_by": successor,
                "effective_to": min(row.effective_to, successor_start),
            }
        findings.append(
            Finding(
                check=CHECK,
                kind="live_siblings",
                severity=Severity.CRITICAL,
                family=view.family,
                doc_id=doc_id,
                expected={
                    "version_state": "superseded",
                    "superseded_by": row.superseded_by if not changes else successor,
                },
                actual={
                    "live_chunks_from": start,
                    "sibling": successor,
                    "sibling_from": successor_start,
                },
                action=(
                    f"supersede by {successor} (table + payloads)"
                    if changes
                    else "rewrite its chunks from the row (already superseded)"
                ),
                changes=changes,
            )
        )
    return findings
