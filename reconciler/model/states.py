"""The states a document version and a run can be in, and the payload keys the reconciler
reads and owns (docs/contracts.md)."""

from __future__ import annotations

import enum
from datetime import UTC, datetime

#: ``effective_to`` of an open-ended version. Always written, never null or absent: absent keys
#: do not match range filters in most stores.
OPEN_END = datetime(9999, 12, 31, tzinfo=UTC)
#: ``effective_from`` written for a version whose start is not known (most of an inherited
#: corpus): the range filter needs the key present to match.
OPEN_START = datetime(1, 1, 1, tzinfo=UTC)


class VersionState(enum.StrEnum):
    """Where a document version stands; see docs/contracts.md."""

    CURRENT = "current"
    SUPERSEDED = "superseded"
    PENDING = "pending"
    DRAFT = "draft"
    RETIRED = "retired"
    UNKNOWN = "unknown"


_STATES: dict[str, VersionState] = {state.value: state for state in VersionState}


def state_of(value: str) -> VersionState:
    """A stored ``version_state`` as a state; anything unrecognised reads as ``unknown``."""
    return _STATES.get(value, VersionState.UNKNOWN)


class RunMode(enum.StrEnum):
    """What a recorded run did (the run log's ``mode``; also the ``job`` of a command)."""

    CHECK = "check"
    PLAN = "plan"
    APPLY = "apply"
    RUN = "run"
    REPAIR = "repair"
    INGEST = "ingest"
    BOOTSTRAP = "bootstrap"
    ROLLBACK = "rollback"
    DECLARE = "declare"  # declarations recorded, and the families they touch reconciled
    SPLIT = "split"  # points moved between the collections of a split store
    REKEY = "rekey"  # documents given the new ids their source names them by

    @property
    def writes(self) -> bool:
        """Whether a reconciliation in this mode applies its plan (under the guard)."""
        return self in (RunMode.APPLY, RunMode.RUN, RunMode.REPAIR, RunMode.DECLARE)


class RunStatus(enum.StrEnum):
    """How a recorded run stands (the run log's ``status``)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REFUSED = "refused"
    #: Its process died mid-write; the next runner of its shard resolved what it left.
    INTERRUPTED = "interrupted"
    #: It applied its plan, but a source could not be read (or only in part): what that
    #: source holds was not reconciled. Not a success for "last success" purposes.
    PARTIAL = "partial"

    @property
    def applied(self) -> bool:
        """Whether a run that ended so wrote its whole plan."""
        return self in (RunStatus.SUCCEEDED, RunStatus.PARTIAL)


#: States a default (non-historical) retrieval may return, subject to the effective window.
#: ``pending`` is here because the window decides: a pending version is returned once
#: ``effective_from <= as_of``, before the dates job has flipped it to ``current``.
SERVABLE_STATES: tuple[VersionState, ...] = (
    VersionState.CURRENT,
    VersionState.UNKNOWN,
    VersionState.PENDING,
)
#: States the opt-in historical route adds.
HISTORICAL_STATES: tuple[VersionState, ...] = (VersionState.SUPERSEDED, VersionState.RETIRED)

#: Payload keys the reconciler owns and writes (docs/contracts.md), in a fixed order.
MANAGED_KEYS: tuple[str, ...] = (
    "doc_family_id",
    "doc_version",
    "version_state",
    "superseded_by",
    "effective_from",
    "effective_to",
    "doc_class",
    "quarantined",
    "quarantine_reason",
)
#: Identity keys the reconciler reads but never writes.
IDENTITY_KEYS: tuple[str, ...] = ("doc_id", "chunk_id", "content_hash")
#: What a placement scan reads (``ChunkReader.scan_managed(placement=True)``: ``split``).
PLACEMENT_KEYS: tuple[str, ...] = ("doc_id", "doc_family_id")
ALL_KEYS: tuple[str, ...] = IDENTITY_KEYS + MANAGED_KEYS
