"""The writes of a registration: the reference ingestion's (``reconciler.ingesting``) and the
adoption of a collection (``app/bootstrap.py``).

An ingestion's writes are crash-ordered, like an apply's (``IngestionWriter.register``): an
intent is audited (the document, its text's hash, how many chunks, their point ids and the
managed payload they carry), the old chunks of a re-ingested document are deleted, the row is
written with its new hash and chunk count, and the new chunks last; a confirmation follows
every ``CONFIRM_EVERY`` documents and the end of each source. ``writing.recovery`` reads what a killed ingestion left unconfirmed.

The reference ingestion writes its documents in batches (``IngestionWriter.hold``): the
intents of a batch in one audit commit (after the confirmation of the batch before, in the
same commit), the old chunks of its re-ingested documents deleted, its rows in one
transaction, its chunks in one upsert. Each document's writes keep their order, so whatever a
kill leaves of each is what it could leave of a document written alone, which recovery
resolves document by document; a batch never straddles a confirmation, so the audit holds the
entries one document at a time would have written, in the same order. Writing a document
alone cost a commit of the audit, a transaction of the table and a call of the index: at
10 chunks a document, that was most of an ingestion's time besides embedding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.model import AuditEntry, AuditKind, ChunkRecord, Document, RunMode, jsonable
from reconciler.payload import payload_for
from reconciler.ports import ChunkIndex, DocumentTable
from reconciler.writing.intents import IntentLog
from reconciler.writing.runs import RunRecord, recorded
from reconciler.writing.source_reads import Identity, record_attempt

#: Documents written between two confirmations of an ingestion's intents.
CONFIRM_EVERY = 64
#: Chunks held for one batch at most (a batch is written sooner when it reaches them).
BATCH_CHUNKS = 2048


@dataclass(frozen=True)
class Held:
    """One document embedded and waiting for its batch (``existing``: its row before, when
    re-ingested; ``done``: told how many chunks were written once they are)."""

    existing: Document | None
    row: Document
    records: Sequence[ChunkRecord]
    done: Callable[[int], None] | None = None


class IngestionWriter:
    """Every write of one ingestion run (``run``), in the order a crash leaves resolvable."""

    def __init__(self, table: DocumentTable, index: ChunkIndex, run: RunRecord) -> None:
        self.table = table
        self.index = index
        self.run = run
        #: The documents' intents, and how many were audited since the last confirmation.
        self.intents = IntentLog(
            table.append_audit, run_id=run.run_id, actor="ingest", now=lambda: datetime.now(UTC)
        )
        self.pending = 0
        #: The documents of the next batch, not intended yet, and their chunks.
        self.held: list[Held] = []
        self.held_chunks = 0

    def open_collection(self, *, dim: int) -> None:
        """Create the collection when it does not exist yet."""
        self.index.ensure_collection(dim=dim)

    def register(
        self, existing: Document | None, row: Document, records: Sequence[ChunkRecord]
    ) -> int:
        """Write one document (``existing``: its row before, when re-ingested) and its
        chunks, already embedded, now (after the documents held); return how many chunks
        were written."""
        self.flush()
        return self._write([Held(existing, row, records)])

    def hold(self, document: Held) -> None:
        """Add a document to the next batch, written when the batch is full (the confirmation
        due, or ``BATCH_CHUNKS``) or at ``flush``; a document held is not intended yet: a
        stop before its batch is written leaves no trace of it."""
        self.held.append(document)
        self.held_chunks += len(document.records)
        room = CONFIRM_EVERY - self.pending if self.pending < CONFIRM_EVERY else CONFIRM_EVERY
        if len(self.held) >= room or self.held_chunks >= BATCH_CHUNKS:
            self.flush()

    def flush(self) -> None:
        """Write the documents held."""
        batch, self.held, self.held_chunks = self.held, [], 0
        if batch:
            self._write(batch)

    def _write(self, batch: Sequence[Held]) -> int:
        self._intend(batch)
        for document in batch:
            if document.existing is not None:
                self.index.delete_document_chunks(document.row.doc_id)
        self.table.upsert_documents([document.row for document in batch])
        records = [record for document in batch for record in document.records]
        written = self.index.upsert_chunks(records) if records else 0
        for document in batch:
            if document.done is not None:
                document.done(len(document.records))
        return written

    def finish_request(self, request_id: int, *, ok: bool, error: str | None = None) -> None:
        """End a re-ingest request of the outbox."""
        self.table.finish_reingest(request_id, ok=ok, error=error)

    def source_unavailable(self, source: str, *, at: datetime, error: str | None) -> None:
        record_attempt(self.table, source, ok=False, at=at, error=error)

    def source_read(
        self, source: str, identities: Iterable[Identity], *, at: datetime, documents_seen: int
    ) -> None:
        """Record the identities of what ``source`` held, and its successful read."""
        self.table.record_identities(source, identities)
        record_attempt(self.table, source, ok=True, at=at, documents_seen=documents_seen)

    def _intend(self, batch: Sequence[Held]) -> None:
        """Audit the batch's intents, after the confirmation of those before when it is due
        (one commit)."""
        closing = [self.intents.confirmation()] if self.pending >= CONFIRM_EVERY else []
        if closing:
            self.pending = 0
        intents = [self._intent(d.existing, d.row, d.records) for d in batch]
        self.intents.intend(intents, closing=closing)
        self.pending += len(batch)

    def _intent(
        self, existing: Document | None, row: Document, records: Sequence[ChunkRecord]
    ) -> AuditEntry:
        return AuditEntry(
            run_id=self.run.run_id,
            at=datetime.now(UTC),
            actor="ingest",
            reason="re-ingest" if existing is not None else "ingest",
            target_type=AuditKind.INGEST,
            target=row.doc_id,
            before=None
            if existing is None
            else {"source_hash": existing.source_hash, "chunks": existing.chunk_count},
            after={
                "source": row.source,
                "source_key": row.source_key,
                "source_hash": row.source_hash,
                "chunks": row.chunk_count,
                # What every new chunk carries (``payload_for(row)``), and which points
                # they are: the log knows each chunk's payload from its first write
                # (``reconciler audit served``). Entries before this change lack both.
                "payload": payload_for(row),
                "points": [jsonable(record.point_id) for record in records],
            },
        )

    def confirm(self) -> None:
        """Write the documents held; every document intended so far is written."""
        self.flush()
        if not self.pending:
            return
        self.table.append_audit([self.intents.confirmation()])
        self.pending = 0


def register_adopted(
    table: DocumentTable,
    *,
    source: str,
    rows: Sequence[Document],
    chunk_counts: Mapping[str, int],
    unmapped: int,
    chunks_scanned: int,
) -> str:
    """Register the rows a bootstrap made of a collection, with their identities under
    ``source``, as one recorded run; return its id."""
    with recorded(table, mode=RunMode.BOOTSTRAP, actor="cli") as run:
        table.upsert_documents(rows, chunk_counts=chunk_counts)
        table.record_identities(
            source, [(d.source_key, d.doc_family_id, d.source_hash, None) for d in rows]
        )
        run.counts = {"created": len(rows), "unmapped": unmapped}
        run.stats = {"chunks_scanned": chunks_scanned, "rows_written": len(rows)}
    return run.run_id
