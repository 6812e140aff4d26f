"""The plug points of the engine: the document table, the chunk index, the lease, the systems
of record.

Adapters live in ``reconciler.stores`` and ``connectors``; the
logic sees only these Protocols: ``table`` (``DocumentTable``: four roles, documents, run log,
outbox, audit log, each split into a reader and a writer; ``TableReader``, ``TableWriter``),
``index`` (``ChunkIndex``: ``ChunkReader``, ``ChunkWriter``, ``ChunkIngestion``,
``ChunkMover``; ``SplitIndex``, one kept in two collections), ``lease``
(``Lease``, the single-runner lease, and ``LeaseFactory``, which the composition root hands
the commands) and ``source`` (``SystemOfRecord`` and the connector errors). The SQL adapter
implements each table role as one repository class (``reconciler.stores.sql``). A stage that only reads is typed with a reader, so mypy refuses
a write there; ``tests/unit/test_writers.py`` holds which modules call a writer's methods.
"""

from reconciler.ports.index import (
    ChunkIndex,
    ChunkIngestion,
    ChunkMover,
    ChunkReader,
    ChunkWriter,
    SplitIndex,
    split_of,
)
from reconciler.ports.lease import Lease, LeaseFactory
from reconciler.ports.plans import PlanReader, PlanWriter, SavedPlan, SavedPlans
from reconciler.ports.source import SystemOfRecord
from reconciler.ports.table import (
    AuditLog,
    AuditReader,
    AuditWalk,
    AuditWriter,
    DeclarationReader,
    Declarations,
    DeclarationWriter,
    DocumentReader,
    DocumentRename,
    DocumentRows,
    DocumentTable,
    DocumentWriter,
    OutboxReader,
    OutboxWriter,
    QueuedReingest,
    ReingestOutbox,
    RunEntry,
    RunLog,
    RunLogReader,
    RunLogWriter,
    SourceStatus,
    TableReader,
    TableWriter,
)

#: The Protocols whose methods change a store.
WRITERS = (
    ChunkWriter,
    ChunkIngestion,
    ChunkMover,
    DocumentWriter,
    RunLogWriter,
    OutboxWriter,
    AuditWriter,
    DeclarationWriter,
    PlanWriter,
)

__all__ = [
    "WRITERS",
    "AuditLog",
    "AuditReader",
    "AuditWalk",
    "AuditWriter",
    "ChunkIndex",
    "ChunkIngestion",
    "ChunkMover",
    "ChunkReader",
    "ChunkWriter",
    "DeclarationReader",
    "DeclarationWriter",
    "Declarations",
    "DocumentReader",
    "DocumentRename",
    "DocumentRows",
    "DocumentTable",
    "DocumentWriter",
    "Lease",
    "LeaseFactory",
    "OutboxReader",
    "OutboxWriter",
    "PlanReader",
    "PlanWriter",
    "QueuedReingest",
    "ReingestOutbox",
    "RunEntry",
    "RunLog",
    "RunLogReader",
    "RunLogWriter",
    "SavedPlan",
    "SavedPlans",
    "SourceStatus",
    "SplitIndex",
    "SystemOfRecord",
    "TableReader",
    "TableWriter",
    "split_of",
]
