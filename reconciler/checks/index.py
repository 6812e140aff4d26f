"""``index``: the collection <-> what the default filter needs — payload indexes.

Without them a Qdrant server scans every point for each filtered query. Creating one touches no
vector. qdrant-client local mode keeps no payload indexes at all, so there the check has
nothing to compare and reports nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.check_inputs import CollectionView, Wide
from reconciler.model import Finding, Severity

CHECK = "index"
#: Logical key -> payload schema the filter and the reconciler rely on.
REQUIRED_INDEXES: dict[str, str] = {
    "doc_id": "keyword",
    "doc_family_id": "keyword",
    "version_state": "keyword",
    "effective_from": "datetime",
    "effective_to": "datetime",
    "quarantined": "bool",
}


def check_index(existing: Mapping[str, str], *, supported: bool) -> list[Finding]:
    """Find payload indexes the default filter needs and the collection lacks."""
    if not supported:
        return []
    findings = []
    for key, schema in REQUIRED_INDEXES.items():
        have = existing.get(key)
        if have == schema:
            continue
        findings.append(
            Finding(
                check=CHECK,
                kind="payload_index_missing",
                severity=Severity.WARNING,
                family=None,
                doc_id=None,
                expected={"key": key, "schema": schema},
                actual={"key": key, "schema": have},
                action=f"create_payload_index({key}, {schema})",
                index=(key, schema),
            )
        )
    return findings


def collection_index(view: CollectionView) -> Wide:
    """The payload indexes the collection lacks (none checked on an engine that keeps none)."""
    supported = view.payload_indexes is not None
    existing = view.payload_indexes() if view.payload_indexes is not None else {}
    return Wide(
        tuple(check_index(existing, supported=supported)),
        checked=len(REQUIRED_INDEXES) if supported else 0,
    )
