"""The reference ingestion: the only code in this project that embeds or creates points.

It exists for the embedded default, the demo and the tests; production teams keep their own
pipeline and call ``payload_for`` from it. It registers **new** documents (and those the
re-ingest outbox asks for); it never changes the state of a document already registered — that
is the reconciler's job, and doing it here would hide the drift the reconciler must find.

Crash-ordered, like an apply: a document's chunks are made (chunked and embedded) before
anything is written; then ``writing.ingestion`` writes them, as it writes every write of an
ingestion: an intent is audited (the document, its text's hash, how many chunks), the old
chunks of a re-ingested document are deleted, the row is written with its new hash and chunk
count, and the new chunks last; a confirmation follows every few documents. Killed anywhere
in between, the stores hold no old text beside a row that moved
on: a row says how many chunks it has and which text they hold, so the checks see what is
missing (``payload/missing_chunks``) or stale (``payload/stale_chunks``), and the next holder
of the lease resolves the run's unconfirmed intents (``writing.recovery``): a document left
incomplete is queued for re-ingestion, and the run is marked interrupted.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from reconciler.chunking import chunk_markdown
from reconciler.embedding import Embedder
from reconciler.errors import RekeyPending
from reconciler.model import (
    ChunkRecord,
    Document,
    RunMode,
    RunStatus,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
)
from reconciler.payload import (
    LAYOUTS,
    POINT_NAMESPACE,
    chunk_id_for,
    chunk_payload,
    point_id_for,
)
from reconciler.ports import ChunkIndex, DocumentTable, QueuedReingest
from reconciler.ports.source import (
    ConnectorError,
    DocumentUnreadable,
    SourceUnavailable,
    SystemOfRecord,
)
from reconciler.rules.declared_state import family_rows, ordinals_by_family
from reconciler.rules.identity import resolve_families
from reconciler.rules.storable import screen
from reconciler.writing.ingestion import Held, IngestionWriter
from reconciler.writing.rekeying import pending_rekey
from reconciler.writing.runs import recorded

log = logging.getLogger(__name__)


@dataclass
class SourceIngest:
    """What one source's ingestion did."""

    source: str
    status: str = "ok"
    documents_seen: int = 0
    ingested: int = 0
    reingested: int = 0
    already_registered: int = 0
    chunks_written: int = 0
    problems: list[SourceProblem] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None


@dataclass
class IngestReport:
    """What an ingestion run did, per source."""

    run_id: str
    sources: list[SourceIngest] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every source was read."""
        return all(s.status == "ok" for s in self.sources)

    def totals(self) -> dict[str, int]:
        """Counts summed over sources."""
        keys = ("documents_seen", "ingested", "reingested", "already_registered", "chunks_written")
        totals = {key: sum(getattr(s, key) for s in self.sources) for key in keys}
        totals["problems"] = sum(len(s.problems) for s in self.sources)
        totals["failed"] = sum(len(s.failed) for s in self.sources)
        return totals


#: Told how an ingestion goes: ``("documents", done, listed)`` once the source is listed and
#: after each of its documents (``listed``: the documents of the sources listed so far),
#: ``("chunks", written, None)`` after each document's chunks are embedded and written.
#: Counts run over the whole ingestion.
IngestProgress = Callable[[str, int, int | None], None]


@dataclass
class _Tally:
    """Running counts of one ingestion, passed on to its progress hook."""

    hook: IngestProgress | None
    listed: int = 0
    documents: int = 0
    chunks: int = 0

    def add_listed(self, count: int) -> None:
        self.listed += count
        self._tell("documents", self.documents, self.listed)

    def each(self, docs: Iterable[SourceDocument]) -> Iterator[SourceDocument]:
        """``docs``, counting each once the loop body is done with it (a ``break`` leaves the
        document it broke on uncounted)."""
        for doc in docs:
            yield doc
            self.documents += 1
            self._tell("documents", self.documents, self.listed)

    def add_chunks(self, count: int) -> None:
        self.chunks += count
        self._tell("chunks", self.chunks, None)

    def _tell(self, what: str, count: int, total: int | None) -> None:
        if self.hook is not None:
            self.hook(what, count, total)


class Ingestor:
    """Chunks, embeds and registers documents from the configured sources."""

    def __init__(
        self,
        *,
        table: DocumentTable,
        index: ChunkIndex,
        embedder: Embedder,
        max_chunk_chars: int = 1200,
        progress: IngestProgress | None = None,
        unknown_siblings: str = "supersede",
        layout: str = "default",
    ) -> None:
        self.table = table
        #: ``[index] layout``: the framework whose payload layout new chunks are written in
        #: (the key map places the version keys; this adds what the framework reads besides).
        self.layout = LAYOUTS[layout]
        #: ``[policy] unknown_siblings``, for the time rule new rows are derived by.
        self.unknown_siblings = unknown_siblings
        self.index = index
        self.embedder = embedder
        self.max_chunk_chars = max_chunk_chars
        self.progress = progress

    def run(
        self,
        sources: Sequence[SystemOfRecord],
        *,
        now: datetime | None = None,
        outbox_only: bool = False,
        scanned: Mapping[str, SourceSnapshot] | None = None,
    ) -> IngestReport:
        """Ingest new documents, registered ones whose text changed, and pending re-ingest
        requests of every source (``outbox_only``: the requests alone). ``scanned``: sources
        already read (their screened snapshot, by name, the source's last scan), taken as
        read rather than scanned again."""
        now = now or datetime.now(UTC)
        scanned = dict(scanned or {})
        with recorded(self.table, mode=RunMode.INGEST, actor="cli", shard=WHOLE) as run:
            report = IngestReport(run_id=run.run_id)
            writes = IngestionWriter(self.table, self.index, run)
            writes.open_collection(dim=self.embedder.dim)
            tally = _Tally(self.progress)
            for source in sources:
                try:
                    report.sources.append(
                        self._ingest_source(
                            source,
                            now=now,
                            outbox_only=outbox_only,
                            tally=tally,
                            writes=writes,
                            scanned=scanned.pop(source.name, None),
                        )
                    )
                except BaseException:
                    # (the run ends failed; its unconfirmed intents are resolved by the next
                    # holder of the lease, as a killed run's are)
                    run.counts = {**report.totals(), "unconfirmed": writes.pending}
                    raise
                writes.confirm()
                run.counts = report.totals()
            run.status = RunStatus.SUCCEEDED if report.ok else RunStatus.FAILED
        return report

    def _ingest_source(
        self,
        source: SystemOfRecord,
        *,
        now: datetime,
        outbox_only: bool,
        tally: _Tally,
        writes: IngestionWriter,
        scanned: SourceSnapshot | None = None,
    ) -> SourceIngest:
        result = SourceIngest(source=source.name)
        try:
            snapshot = scanned if scanned is not None else screen(source.scan())
        except SourceUnavailable as exc:
            # An unreadable source is never an empty one: nothing registered changes.
            log.warning("source %s unavailable: %s", source.name, exc)
            writes.source_unavailable(source.name, at=now, error=str(exc))
            result.status, result.error = "unavailable", str(exc)
            return result
        result.documents_seen = len(snapshot.documents)
        tally.add_listed(len(snapshot.documents))
        result.problems = list(snapshot.problems)
        for problem in snapshot.problems:  # the report lists them: not a warning twice
            log.info(
                "source %s: %s %s: %s",
                source.name,
                problem.kind,
                problem.path or problem.doc_id,
                problem.message,
            )
        if not outbox_only:
            refuse_rekeyed(self.table, snapshot)
        by_id = {d.doc_id: d for d in snapshot.documents}
        known_by_key, known_by_hash = self.table.identities(source.name)
        assignment = resolve_families(
            snapshot.documents, known_by_key=known_by_key, known_by_hash=known_by_hash
        )
        ordinals = ordinals_by_family(snapshot.documents, assignment.family_of)

        registered = self.table.get_documents(by_id)
        # New rows: as each declares itself, with the window end its family gives it while
        # that is still ahead (a successor scheduled), as the first check would write it.
        fresh = family_rows(
            snapshot.documents,
            family_of=assignment.family_of,
            as_of=now,
            registered=registered,
            version_of=ordinals,
            unknown_siblings=self.unknown_siblings,
        )
        requests = {r.doc_id: r for r in self.table.pending_reingest() if r.source == source.name}
        for doc in tally.each(snapshot.documents):
            existing = registered.get(doc.doc_id)
            request = requests.pop(doc.doc_id, None)
            # A registered document whose text changed is re-ingested as if requested (its
            # state stays the reconciler's): a source that moved is caught up by ingest + run.
            edited = (
                existing is not None
                and not outbox_only
                and doc.content_hash is not None
                and existing.source_hash is not None
                and existing.source_hash != doc.content_hash
            )
            if existing is not None and request is None and not edited:
                result.already_registered += 1
                continue
            if existing is None and outbox_only and request is None:
                continue
            if existing is not None:
                row = dataclasses.replace(existing, source_hash=doc.content_hash, ingested_at=now)
            else:
                row = dataclasses.replace(fresh[doc.doc_id], ingested_at=now, updated_at=now)
            try:
                body = source.read_body(doc.source_key)
            except DocumentUnreadable as exc:
                result.failed.append((doc.doc_id, str(exc)))
                if request is not None:
                    writes.finish_request(request.id, ok=False, error=str(exc))
                continue
            except ConnectorError as exc:
                # The source went away mid-run: stop this source (what was ingested stays, the
                # remaining requests stay pending), carry on with the others.
                log.warning("source %s failed during ingestion: %s", source.name, exc)
                if request is not None:
                    writes.finish_request(request.id, ok=False, error=str(exc))
                result.status, result.error = "unavailable", str(exc)
                break
            records = self._chunks(row, body)  # (embedded before anything is written)
            row = dataclasses.replace(row, chunk_count=len(records))
            again = request is not None or edited
            done = _written(result, tally, writes, request, doc.doc_id, again=again)
            writes.hold(Held(existing, row, records, done))
        writes.flush()  # (what was read is written, the source read to its end or not)
        if result.status == "unavailable":
            writes.source_unavailable(source.name, at=now, error=result.error)
            return result
        for request in requests.values():
            message = "document no longer in the source"
            writes.finish_request(request.id, ok=False, error=message)
            result.failed.append((request.doc_id, message))
        writes.source_read(
            source.name,
            [
                (d.source_key, assignment.family_of[d.doc_id], d.content_hash, d.path)
                for d in snapshot.documents
            ],
            at=now,
            documents_seen=len(snapshot.documents),
        )
        return result

    def _chunks(self, document: Document, body: str) -> list[ChunkRecord]:
        """The document's chunks, embedded (nothing written)."""
        texts = chunk_markdown(body, max_chars=self.max_chunk_chars)
        if not texts:
            return []
        vectors = self.embedder.embed(texts)
        records = []
        for n, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            chunk_id = chunk_id_for(document.doc_id, n)
            point_id = point_id_for(chunk_id)
            stored, extra = self.layout.chunk_fields(
                text, doc_id=document.doc_id, point_id=point_id
            )
            records.append(
                ChunkRecord(
                    point_id=point_id,
                    chunk_id=chunk_id,
                    text=stored,
                    vector=vector,
                    payload={**chunk_payload(document, chunk_id=chunk_id), **extra},
                )
            )
        return records


def _written(
    result: SourceIngest,
    tally: _Tally,
    writes: IngestionWriter,
    request: QueuedReingest | None,
    doc_id: str,
    *,
    again: bool,
) -> Callable[[int], None]:
    """What is counted, and the re-ingest request finished, once a document's batch is
    written (``again``: a re-ingestion)."""

    def done(chunks: int) -> None:
        tally.add_chunks(chunks)
        result.chunks_written += chunks
        if request is not None:
            writes.finish_request(request.id, ok=True)
        if again:
            result.reingested += 1
        else:
            result.ingested += 1
        log.debug("ingested %s: %d chunk(s)", doc_id, chunks)

    return done


def refuse_rekeyed(table: DocumentTable, snapshot: SourceSnapshot) -> None:
    """Raise ``RekeyPending`` when the source names registered documents with new ids (or
    may: an ambiguous pair): an ingestion would register them again, each served twice."""
    plan = pending_rekey(table, snapshot)
    if plan.blocking:
        named = [f"{p.old_id} -> {p.new_id}" for p in plan.pairs]
        named += [f"{c.path}: {c.reason} ({', '.join(c.doc_ids)})" for c in plan.conflicts]
        more = f" and {len(named) - 3} more" if len(named) > 3 else ""
        raise RekeyPending(
            f"source {snapshot.source}: {len(plan.pairs)} registered document(s) now have new "
            f"ids, {len(plan.conflicts)} ambiguously ({'; '.join(named[:3])}{more}); nothing "
            "of this source was ingested. Run `reconciler rekey --dry-run` to see the pairs, "
            "then `reconciler rekey` to rename them in place (or revert the configuration "
            "change)"
        )


#: The shard an ingestion is recorded under, and whose lease it is run under: the whole
#: corpus (it may write any family).
WHOLE = "0/1"


__all__ = [
    "POINT_NAMESPACE",
    "ConnectorError",
    "IngestProgress",
    "IngestReport",
    "Ingestor",
    "SourceIngest",
    "point_id_for",
]
