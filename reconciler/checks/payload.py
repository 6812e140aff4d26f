"""``payload``: document table <-> chunk payloads — every chunk must say what its row says."""

from __future__ import annotations

from typing import Any

from reconciler.check_inputs import (
    CheckContext,
    ChunkAggregate,
    FamilyView,
    Variant,
    expected_variant,
)
from reconciler.model import SERVABLE_STATES, Document, Finding, Severity

CHECK = "payload"
ORPHAN_REASON = "orphan_chunks"


def _servable(values: dict[str, Any]) -> bool:
    return values.get("version_state") in SERVABLE_STATES and values.get("quarantined") is not True


def check_payload(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """Find chunks whose managed payload differs from ``payload_for(row)``."""
    findings = []
    for row in view.rows:
        aggregate = view.chunks.get(row.doc_id)
        if aggregate is None or not aggregate.variants:
            continue
        findings.append(_drift(row, aggregate, view.family))
    return findings


def _drift(row: Document, aggregate: ChunkAggregate, family: str) -> Finding:
    expected = dict(expected_variant(row))
    row_servable = _servable(expected)
    worst: dict[str, Any] | None = None
    keys: set[str] = set()
    dangerous = False
    for variant in aggregate.variants:
        found = dict(variant)
        differing = {k for k in expected if expected[k] != found.get(k)}
        keys |= differing
        if _servable(found) and not row_servable:
            dangerous = True
            worst = found
        elif worst is None:
            worst = found
    assert worst is not None
    shown = sorted(keys)
    return Finding(
        check=CHECK,
        kind="payload_drift",
        severity=Severity.CRITICAL if dangerous else Severity.WARNING,
        family=family,
        doc_id=row.doc_id,
        expected={k: expected[k] for k in shown},
        actual={
            **{k: worst.get(k) for k in shown},
            "chunks": aggregate.drifted,
            "of": aggregate.count,
        },
        action=f"set_payload on {aggregate.drifted} chunk(s) from the document row",
    )


def check_orphans(doc_id: str | None, aggregate: ChunkAggregate) -> Finding | None:
    """Chunks whose document has no row: quarantined (never deleted)."""
    loose = {variant: n for variant, n in aggregate.variants.items() if not _quarantined(variant)}
    if not loose:
        return None
    family = next((dict(v).get("doc_family_id") for v in loose), None)
    return Finding(
        check=CHECK,
        kind="orphan_chunks",
        severity=Severity.CRITICAL if any(_servable(dict(v)) for v in loose) else Severity.WARNING,
        family=family if isinstance(family, str) else None,
        doc_id=doc_id,
        expected="a document row for these chunks",
        actual={"chunks": sum(loose.values())},
        action=f"quarantine {sum(loose.values())} orphan chunk(s)",
        payload_only={"quarantined": True, "quarantine_reason": ORPHAN_REASON},
    )


def _quarantined(variant: Variant) -> bool:
    return dict(variant).get("quarantined") is True
