"""What a run finds and asks for: findings with their severity, re-ingest requests, and the
change of a table row."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.encoding import jsonable


class Severity(enum.StrEnum):
    """How urgently a finding needs attention."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


#: Quarantine reasons the reconciler sets and lifts by itself; others (e.g. "manual") are left.
#: In order of precedence: when several hold, the first names the quarantine.
MANAGED_QUARANTINE_REASONS: tuple[str, ...] = (
    "in_place_edit",
    "stale_chunks",
    "ttl_expired",
    "orphan_chunks",
)


@dataclass(frozen=True, slots=True)
class ReingestRequest:
    """Ask the ingestion pipeline to (re-)ingest one document."""

    doc_id: str
    source: str
    source_key: str
    reason: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of drift, explained: what was expected, what was found, what will be done.

    ``changes`` are document-row fields the repair sets on ``doc_id``; ``quarantine`` is
    ``(reason, active)``; ``payload_only`` sets keys on a document's chunks when there is no row
    to derive them from (orphans); ``reingest`` queues a request; ``index`` creates a payload
    index ``(logical key, schema)``. A finding with none of them is reported, not repaired.
    These are proposals: ``reconciler.planning`` alone reads them and decides the writes.
    """

    check: str
    kind: str
    severity: Severity
    family: str | None
    doc_id: str | None
    expected: Any
    actual: Any
    action: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    quarantine: tuple[str, bool] | None = None
    payload_only: Mapping[str, Any] | None = None
    reingest: ReingestRequest | None = None
    index: tuple[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The finding as the run's JSON spells it (docs/contracts.md)."""
        return {
            "check": self.check,
            "kind": self.kind,
            "severity": str(self.severity),
            "family": self.family,
            "doc_id": self.doc_id,
            "expected": jsonable(self.expected),
            "actual": jsonable(self.actual),
            "action": self.action,
        }


@dataclass(frozen=True)
class RowChange:
    """Set ``after`` fields on one document row (``before`` is what the scan saw)."""

    doc_id: str
    reason: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]
