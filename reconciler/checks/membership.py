"""Part of the ``family`` check: a registered document whose family is no longer the one its
source implies (``membership_changed``).

A family is given at registration and was never revisited; the source may have moved the
document since (an explicit ``family`` added, a link that joins two families). The run checks
each family as the source has it now (``pipeline.membership``), so a document that moved
shows up in its new family's view with its old ``doc_family_id``: the repair sets the row's
and every chunk's ``doc_family_id``, and the time rule settles the family with it.
"""

from __future__ import annotations

from reconciler.check_inputs import CheckContext, FamilyView
from reconciler.model import Finding, Severity

CHECK = "family"
KIND = "membership_changed"


def check_membership(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """The rows of ``view`` registered under another family than the view's."""
    findings = []
    for row in view.rows:
        src = view.sources.get(row.doc_id)
        if row.doc_family_id == view.family or src is None:
            continue
        if not ctx.source_readable(row.source):
            continue
        findings.append(
            Finding(
                check=CHECK,
                kind=KIND,
                severity=Severity.WARNING,
                family=view.family,
                doc_id=row.doc_id,
                expected={"doc_family_id": view.family, "because": _because(view, row.doc_id)},
                actual={"doc_family_id": row.doc_family_id},
                action=f"move it from {row.doc_family_id} to {view.family} (table + payloads); "
                "the family's versions are settled together",
                changes={"doc_family_id": view.family},
            )
        )
    return findings


def _because(view: FamilyView, doc_id: str) -> str:
    """Why the source places ``doc_id`` in the view's family, in words."""
    if doc_id in view.because:
        return view.because[doc_id]
    src = view.sources[doc_id]
    if src.family is not None:
        return f"its source declares family {src.family!r}"
    linked = {
        other.doc_id for other in view.sources.values() if doc_id in other.declared_successors
    }
    linked |= {d for d in src.declared_successors if d in view.sources}
    if linked:
        return "it is linked to " + ", ".join(sorted(set(linked)))
    return "the identity map records it there"
