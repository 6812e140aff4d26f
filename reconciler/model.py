"""Plain values shared by every layer: version states, documents, source snapshots, chunks,
and the writes of a run with their audit entries.

Nothing here imports a driver. Stores and connectors produce these values; checks and the
planner consume them; so the logic is tested with plain data.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

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
ALL_KEYS: tuple[str, ...] = IDENTITY_KEYS + MANAGED_KEYS


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive values are taken to be UTC."""
    zone = value.tzinfo
    if zone is UTC:
        return value
    if zone is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def rfc3339(value: datetime) -> str:
    """Format an instant as the RFC 3339 UTC string written to payloads (``...Z``)."""
    # isoformat zero-pads the year to four digits and writes microseconds only when there are
    # some; in UTC it ends in "+00:00", spelt "Z" here.
    return f"{utc(value).isoformat()[:-6]}Z"


def storable(text: str) -> str:
    """``text`` with NUL characters and lone surrogates spelled out, for messages, paths and
    findings: PostgreSQL's text and JSONB refuse NUL, UTF-8 encoders refuse surrogates."""
    text = text.replace("\x00", "\\0")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def parse_instant(text: str) -> datetime:
    """Parse an RFC 3339 / ISO 8601 instant (``Z`` allowed; naive means UTC)."""
    return utc(datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00")))


@dataclass(frozen=True, slots=True)
class Document:
    """One document version: a row of the document table."""

    doc_id: str
    source: str
    source_key: str
    doc_family_id: str
    doc_version: int
    version_state: VersionState
    effective_to: datetime = OPEN_END
    effective_from: datetime | None = None
    superseded_by: str | None = None
    doc_class: str | None = None
    title: str | None = None
    source_hash: str | None = None
    quarantined: bool = False
    quarantine_reason: str | None = None
    ingested_at: datetime | None = None
    updated_at: datetime | None = None
    #: How many chunks the ingestion wrote for this version (0: not known, e.g. a row
    #: registered by a pipeline that does not say). The reference ingestion writes it before
    #: the chunks, so a document with fewer chunks than this lost some (``missing_chunks``).
    chunk_count: int = 0


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document version as the system of record declares it (metadata only, no body)."""

    source: str
    source_key: str
    doc_id: str
    content_hash: str
    path: str | None = None
    family: str | None = None
    version: int | None = None
    state: VersionState | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    #: The successor it declares; with several (``successors``), the first one declared.
    superseded_by: str | None = None
    title: str | None = None
    doc_class: str | None = None
    #: Every successor it declares, forward (``superseded_by``) or reverse (a successor's
    #: ``replaces``), first declared first: a version may be superseded by several (a fan-out).
    #: Empty for a source that declares one at most: ``superseded_by`` alone then.
    successors: tuple[str, ...] = ()

    @property
    def declared_successors(self) -> tuple[str, ...]:
        """Every successor this version declares (``successors``, else ``superseded_by``)."""
        if self.successors:
            return self.successors
        return () if self.superseded_by is None else (self.superseded_by,)


class DeclarationKind(enum.StrEnum):
    """What a person declared: ``doc_id`` superseded by the document ``target``, or in the
    family ``target``."""

    SUPERSEDE = "supersede"
    FAMILY = "family"


@dataclass(frozen=True, slots=True)
class Declaration:
    """A decision a person recorded (``reconciler declare``), read by every run beside the
    systems of record (``rules.declarations``): who (the run's actor is ``declare``), when,
    why, on what (a proposal's evidence, score and id), the run that recorded it and the
    rollback that revoked it."""

    id: str
    kind: DeclarationKind
    doc_id: str
    target: str
    declared_by: str
    declared_at: datetime
    reason: str | None = None
    evidence: str | None = None
    score: float | None = None
    proposal: str | None = None
    run_id: str | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The declaration as the audit log and ``--format json`` spell it."""
        return {name: jsonable(getattr(self, name)) for name in self.__dataclass_fields__}


class ProblemKind(enum.StrEnum):
    """Why a source document could not be taken as it is; each becomes a finding later."""

    UNREADABLE = "unreadable"
    UNDECODABLE = "undecodable"
    INVALID_FRONTMATTER = "invalid_frontmatter"
    FRONTMATTER_NOT_MAPPING = "frontmatter_not_mapping"
    INVALID_FIELD = "invalid_field"
    DUPLICATE_ID = "duplicate_id"
    DANGLING_SUPERSEDED_BY = "dangling_superseded_by"
    SELF_SUPERSESSION = "self_supersession"
    SUPERSESSION_CYCLE = "supersession_cycle"
    #: Links a source cannot take as they are (a connector whose successors must be one).
    CONFLICTING_LINKS = "conflicting_links"
    LINK_OUTSIDE_ROOT = "link_outside_root"
    UNUSED_MAPPING = "unused_mapping"  # a mapped key no reader took from any document
    ID_NOT_READ = "id_not_read"  # an ``id`` body pattern missed the id's line: path is id
    DECLARATION_CONFLICT = "declaration_conflict"  # a source says otherwise: the source stands


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """A per-document problem found while scanning a source; never a crash of the scan."""

    source: str
    kind: ProblemKind
    message: str
    path: str | None = None
    doc_id: str | None = None
    #: The source-native key when known (a refused note's default id), to match a table row.
    source_key: str | None = None
    #: For ``INVALID_FIELD``: the ``SourceDocument`` field taken as absent (``state``,
    #: ``effective_from``...). A registered document keeps its registered value for it.
    field: str | None = None


@dataclass(frozen=True, slots=True)
class SourceSnapshot:
    """Everything one scan of one system of record saw."""

    source: str
    documents: tuple[SourceDocument, ...]
    problems: tuple[SourceProblem, ...] = ()
    scanned_at: datetime | None = None
    #: False when part of the source could not be read (a page of results failed): the
    #: documents it lacks may still exist, so none of them is taken as deleted.
    complete: bool = True


@dataclass(frozen=True, slots=True)
class ChunkState:
    """The identity and managed payload of one chunk, as scanned (never vector, never text).

    ``payload`` holds logical key names; keys absent from the point are absent here.
    """

    point_id: str | int
    doc_id: str | None
    chunk_id: str | None
    payload: Mapping[str, Any] = field(default_factory=dict)


#: One chunk as the check's lean scan yields it: (point id, doc_id as stored, the raw stored
#: values of ``MANAGED_KEYS`` in that order, an absent key read as ``None``). No dict, no
#: ``ChunkState``: the check's hot path compares raw values, normalising only a mismatch.
ManagedRow = tuple[str | int, Any, tuple[Any, ...]]


class ManagedPage:
    """One page of the check's lean scan: for each chunk one tuple, its ``doc_id`` as stored
    followed by the raw stored values of ``MANAGED_KEYS`` in that order (an absent key as
    ``None``), so that a whole page is hashed and matched in C.

    Point ids are converted only when asked for (``point_id(i)``): the check needs the id of
    a chunk only when its values differ from its row's, which is rare.
    """

    __slots__ = ("_point_id", "archived", "contents", "rows")

    def __init__(
        self,
        rows: Sequence[tuple[Any, ...]],
        point_id: Callable[[int], str | int],
        contents: Sequence[Any] | None = None,
    ) -> None:
        self.rows = rows  # ``(doc_id, *managed values)`` a chunk
        #: Each chunk's ``content_hash`` as stored (``None`` when absent), in the order of
        #: ``rows``; ``None`` for a page read without them (every chunk's unknown).
        self.contents = contents
        self._point_id = point_id
        self.archived = False  # whether it comes from a split store's archive collection

    def __len__(self) -> int:
        return len(self.rows)

    def point_id(self, index: int) -> str | int:
        """The id of the ``index``-th chunk of the page (an int, or a UUID's string)."""
        return self._point_id(index)

    def chunks(self) -> Iterator[ManagedRow]:
        """The page chunk by chunk: ``(point id, doc_id, managed values)``."""
        for index, row in enumerate(self.rows):
            yield self._point_id(index), row[0], row[1:]


@dataclass(frozen=True, slots=True)
class PayloadWrite:
    """Set managed ``payload`` (logical keys) on ``point_ids``; one per document in practice."""

    point_ids: tuple[str | int, ...]
    payload: Mapping[str, Any]
    doc_id: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A chunk to ingest: only the reference ingestion creates points."""

    point_id: str
    chunk_id: str
    text: str
    vector: tuple[float, ...]
    payload: Mapping[str, Any]


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


#: Types ``jsonable`` leaves as they are, matched exactly (a subclass, an ``IntEnum`` say,
#: goes the long way).
_PLAIN_LEAVES = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any) -> Any:
    """Plain JSON-ready values: datetimes as RFC 3339, enums as their value."""
    kind = type(value)
    if kind in _PLAIN_LEAVES:  # (the usual values first: an audit entry is mostly these)
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): jsonable(v) for k, v in value.items()}
    if kind is list:
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


# -- writes and their audit entries ---------------------------------------------------------


@dataclass(frozen=True)
class RowChange:
    """Set ``after`` fields on one document row (``before`` is what the scan saw)."""

    doc_id: str
    reason: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]


#: Document fields that audited JSON holds as RFC 3339 text.
_DATETIME_FIELDS = frozenset({"effective_from", "effective_to", "ingested_at", "updated_at"})


def fields_from_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn audited JSON field values back into row values (datetimes parsed)."""
    return {
        name: parse_instant(value) if name in _DATETIME_FIELDS and isinstance(value, str) else value
        for name, value in values.items()
    }


class AuditKind(enum.StrEnum):
    """What an audit entry records (its ``target_type``): the one list of them, which the
    writers write and the audit's readers read."""

    #: A row changed (before and after).
    ROW = "row"
    #: A re-ingest request queued in the outbox.
    REINGEST = "reingest"
    #: A run, refused or forced by the guard.
    RUN = "run"
    #: The intent of a batch of payload writes (before the write) and its confirmation.
    PAYLOAD = "payload"
    CONFIRM = "confirm"
    #: An ingestion's intent to (re-)write one document.
    INGEST = "ingest"
    #: How an interrupted run's last batch ended.
    RESOLVE = "resolve"
    #: A move between a split store's collections: the intent (before the copy), the copy
    #: confirmed (read back from the destination), the points gone from the source; and how
    #: the next runner finished the moves a dead run left.
    MOVE = "move"
    MOVE_COPIED = "move_copied"
    MOVE_DONE = "move_done"
    MOVE_RESOLVE = "move_resolve"
    #: A declaration recorded (``reconciler declare``).
    DECLARATION = "declaration"
    #: A payload index created.
    INDEX = "index"


@dataclass(frozen=True)
class AuditEntry:
    """One write, as recorded: who, why, what (``AuditKind``), before and after."""

    run_id: str
    at: datetime
    actor: str
    reason: str | None
    target_type: str
    target: str
    before: Any
    after: Any


@dataclass
class Verification:
    """The result of walking the audit chain."""

    entries: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the chain is intact."""
        return not self.problems
