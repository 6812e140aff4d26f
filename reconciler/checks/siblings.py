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
        # The row's own claim counts too: a row set back to current beside a started later
        # sibling is caught here, before the payload check would copy it onto the chunks.
        seen: list[tuple[str, datetime, bool]] = [
            (str(row.version_state), row.effective_from or OPEN_START, row.quarantined)
        ]
        aggregate = view.chunks.get(doc_id)
        for variant in aggregate.variants if aggregate is not None else ():
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
        # The ordering of the time rule (settling.in_force_winner): a later start wins, and on
        # the same start (undated versions) the higher version, then the id.
        mine = (start, rows[doc_id].doc_version, doc_id)
        later = [
            (other_start, rows[other].doc_version, other)
            for other, other_seen in claims.items()
            if other != doc_id
            for state, other_start, _q in other_seen
            if state in _LIVE
            and other_start <= ctx.now
            and (other_start, rows[other].doc_version, other) > mine
        ]
        if not later:
            continue
        successor_start, _version, successor = max(later)
        row = rows[doc_id]
        changes: dict[str, object] = {}
        # Only a row that itself claims to be in force changes. A row already superseded keeps
        # its chain (its successor may be an earlier sibling), a retired or draft row keeps its
        # state: only its chunks lag behind, and the planner rewrites them from the row.
        if row.version_state in (VersionState.CURRENT, VersionState.PENDING):
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
