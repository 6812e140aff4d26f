"""Plain values shared by every layer: version states, documents, source snapshots, chunks,
and the writes of a run with their audit entries.

Nothing here imports a driver. Stores and connectors produce these values; checks and the
planner consume them; so the logic is tested with plain data. One module by what they hold:
``states`` (version states, run modes, the payload keys), ``encoding`` (instants, text the
stores accept, JSON), ``documents``, ``chunks``, ``findings`` and ``audit``; every name is
imported from here.
"""

from reconciler.model.audit import (
    PAGE_TARGET,
    AuditEntry,
    AuditKind,
    Verification,
    documents_of,
    page_entry,
    page_targets,
)
from reconciler.model.chunks import (
    ChunkRecord,
    ChunkState,
    ManagedPage,
    ManagedRow,
    PayloadWrite,
)
from reconciler.model.documents import (
    EXPECTED_FIELDS,
    Declaration,
    DeclarationKind,
    Document,
    ProblemKind,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    replaced,
)
from reconciler.model.encoding import (
    encoder_of,
    fields_from_json,
    is_stored_form,
    jsonable,
    parse_instant,
    rfc3339,
    storable,
    stored_form,
    stored_instant,
    utc,
)
from reconciler.model.findings import (
    MANAGED_QUARANTINE_REASONS,
    Finding,
    ReingestRequest,
    RowChange,
    Severity,
)
from reconciler.model.states import (
    ALL_KEYS,
    HISTORICAL_STATES,
    IDENTITY_KEYS,
    MANAGED_KEYS,
    OPEN_END,
    OPEN_START,
    PLACEMENT_KEYS,
    SERVABLE_STATES,
    RunMode,
    RunStatus,
    VersionState,
    state_of,
)

__all__ = [
    "ALL_KEYS",
    "EXPECTED_FIELDS",
    "HISTORICAL_STATES",
    "IDENTITY_KEYS",
    "MANAGED_KEYS",
    "MANAGED_QUARANTINE_REASONS",
    "OPEN_END",
    "OPEN_START",
    "PAGE_TARGET",
    "PLACEMENT_KEYS",
    "SERVABLE_STATES",
    "AuditEntry",
    "AuditKind",
    "ChunkRecord",
    "ChunkState",
    "Declaration",
    "DeclarationKind",
    "Document",
    "Finding",
    "ManagedPage",
    "ManagedRow",
    "PayloadWrite",
    "ProblemKind",
    "ReingestRequest",
    "RowChange",
    "RunMode",
    "RunStatus",
    "Severity",
    "SourceDocument",
    "SourceProblem",
    "SourceSnapshot",
    "Verification",
    "VersionState",
    "documents_of",
    "encoder_of",
    "fields_from_json",
    "is_stored_form",
    "jsonable",
    "page_entry",
    "page_targets",
    "parse_instant",
    "replaced",
    "rfc3339",
    "state_of",
    "storable",
    "stored_form",
    "stored_instant",
    "utc",
]
