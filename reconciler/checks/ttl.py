"""``ttl``: per-source last successful reconciliation <-> the source's TTL (polling sources).

A polling source that stopped answering also stopped telling us about retirements: its
families leave the default retrieval path until it is read again.
"""

from __future__ import annotations

from reconciler.check_inputs import CheckContext, FamilyView
from reconciler.checks.common import quarantine_lifted
from reconciler.model import Finding, Severity

CHECK = "ttl"
REASON = "ttl_expired"


def check_ttl(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """Quarantine documents of polling sources unread past their TTL; lift it once read."""
    findings = []
    for row in view.rows:
        state = ctx.sources.get(row.source)
        if state is None or state.ttl is None:
            continue
        expired = ctx.ttl_expired(row.source)
        held = row.quarantined and row.quarantine_reason == REASON
        if expired:
            findings.append(
                Finding(
                    check=CHECK,
                    kind="ttl_expired",
                    severity=Severity.CRITICAL,
                    family=view.family,
                    doc_id=row.doc_id,
                    expected={"last_success_within": str(state.ttl)},
                    actual={"last_success_at": state.last_success_at, "error": state.error},
                    action=(
                        "keep quarantined until the source is read again"
                        if held
                        else "quarantine the document's chunks until the source is read again"
                    ),
                    quarantine=(REASON, True),
                )
            )
        elif held:
            findings.append(
                quarantine_lifted(CHECK, REASON, row, view.family, "the source was read again")
            )
    return findings
