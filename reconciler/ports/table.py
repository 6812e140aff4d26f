"""The document table port, role by role, each split into what reads it and what writes it:
documents and identities, the run log, the re-ingest outbox, the audit log. ``TableReader``
and ``TableWriter`` gather the readers and the writers; ``DocumentTable`` is both. Rows the
table hands back are typed by the read-only Protocols ``RunEntry``, ``SourceStatus`` and
``QueuedReingest``: the logic reads their attributes and never writes them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from reconciler.model import (
    Declaration,
    Document,
    ReingestRequest,
    RowChange,
)

# (the audit roles live in ``ports.audit``: re-exported here with the table's own)
from reconciler.ports.audit import AuditLog as AuditLog  # noqa: PLC0414
from reconciler.ports.audit import AuditReader as AuditReader  # noqa: PLC0414
from reconciler.ports.audit import AuditWalk as AuditWalk  # noqa: PLC0414
from reconciler.ports.audit import AuditWriter as AuditWriter  # noqa: PLC0414
from reconciler.ports.audit import ChainedEntry as ChainedEntry  # noqa: PLC0414
from reconciler.ports.plans import PlanReader, PlanWriter


@dataclass(frozen=True)
class DocumentRename:
    """One document given a new id in place (a re-keying): its row, its identity, the links
    and requests that name it."""

    source: str
    old_id: str
    new_id: str
    old_key: str
    new_key: str


class RunEntry(Protocol):
    """One run's record in the run log, as read back."""

    @property
    def run_id(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def status(self) -> str:
        """``running``, ``succeeded``, ``failed``, ``refused`` or ``interrupted``."""
        ...

    @property
    def started_at(self) -> datetime: ...
    @property
    def finished_at(self) -> datetime | None: ...
    @property
    def shard(self) -> str | None: ...
    @property
    def job(self) -> str | None: ...
    @property
    def checks(self) -> str | None:
        """The checks the run ran, comma-separated."""
        ...

    @property
    def counts(self) -> dict[str, Any] | None: ...
    @property
    def error(self) -> str | None: ...


class SourceStatus(Protocol):
    """When a source was last scanned, and how it went."""

    @property
    def source(self) -> str: ...
    @property
    def last_attempt_at(self) -> datetime | None: ...
    @property
    def last_success_at(self) -> datetime | None:
        """The last successful scan: the TTL clock of ``missing_in_source``."""
        ...

    @property
    def last_error(self) -> str | None: ...
    @property
    def documents_seen(self) -> int | None: ...
    @property
    def failures(self) -> int: ...


class QueuedReingest(Protocol):
    """A re-ingest request in the outbox."""

    @property
    def id(self) -> int: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def source_key(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def status(self) -> str:
        """``pending`` until consumed, then ``done``."""
        ...

    @property
    def attempts(self) -> int: ...


class DocumentReader(Protocol):
    """Document rows, the identity map (source key -> family) and each source's scan status, read."""

    def iter_documents(
        self,
        *,
        batch_size: int = 1000,
        source: str | None = None,
        families: Sequence[str] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> Iterator[Document]:
        """Stream documents ordered by family, version and id (never all at once)."""
        ...

    def iter_expected(
        self, *, batch_size: int = 1000, families: Sequence[str] | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """``iter_documents``' rows as tuples of ``EXPECTED_FIELDS`` (the state as stored; an
        instant as a ``datetime``, or as the text a table stores it as, which
        ``payload.managed_values`` and ``settling.quiet_rows`` read as it is)."""

    def iter_renamed(
        self, source: str, *, keys: Iterable[str], ids: Iterable[str], batch_size: int = 1000
    ) -> Iterator[Document]:
        """Stream the rows of ``source`` whose source key is one of ``keys`` and whose id is
        none of ``ids``, ordered by id: the rows a scan names with other ids (``writing.
        rekeying.pending_rekey``). Selected by the table, never all streamed to be sifted."""
        ...

    def known_families(self, families: Iterable[str]) -> set[str]:
        """Those of ``families`` that at least one document row belongs to."""
        ...

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """Documents by id (missing ids are absent)."""
        ...

    def families_of(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """doc_id -> the family its row is in, by id (missing ids are absent): what
        ``get_documents`` answers of those rows' ``doc_family_id``, without the rows."""
        ...

    def identities(
        self, source: str, *, near: tuple[Iterable[str], Iterable[str]] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The identity map of one source: (source_key -> family, content_hash -> family);
        ``near`` (keys, paths): only the identities of those keys or last seen at those
        paths (a read at some paths)."""
        ...

    def identities_at(self, source: str, paths: Iterable[str]) -> dict[str, str]:
        """The identity last seen at each of ``paths`` (path -> source_key), where known."""
        ...

    def identity_last_seen(
        self, source: str, *, near: tuple[Iterable[str], Iterable[str]] | None = None
    ) -> dict[str, datetime]:
        """When each source key of a source was last seen (source_key -> instant); ``near``
        as for ``identities``."""
        ...

    def identity_paths(
        self, source: str, *, at: Iterable[str] | None = None, besides: Iterable[str] = ()
    ) -> dict[str, str]:
        """Where each source key of a source was last seen (source_key -> path), for the keys
        recorded with a path: with ``at``, only those last seen at one of those paths; never
        those of ``besides``. Selected by the table (a re-keying's, ``pending_rekey``: the
        keys a scan lacks at the places it holds, none where nothing was re-keyed)."""
        ...

    def source_status(self) -> Mapping[str, SourceStatus]:
        """Every source's status, by source name."""
        ...


class DocumentWriter(Protocol):
    """Document rows and identities written, and each source's scan recorded."""

    def upsert_documents(
        self, documents: Iterable[Document], *, chunk_counts: Mapping[str, int] | None = None
    ) -> int:
        """Insert or update document rows in bulk; return the number written (ingestion and
        bootstrap; a reconciliation run writes rows through ``write_rows_and_outbox``)."""
        ...

    def record_identities(
        self, source: str, entries: Iterable[tuple[str, str, str | None, str | None]]
    ) -> int:
        """Record (source_key, family, content_hash, path) seen now; first_seen is kept."""
        ...

    def touch_identities(self, source: str, keys: Iterable[str]) -> None:
        """Mark identities as seen now without changing them (a document present but
        unreadable: the grace period of ``missing_in_source`` does not start)."""
        ...

    def rekey_documents(
        self, *, run_id: str, actor: str, at: datetime, renames: Sequence[DocumentRename]
    ) -> str:
        """Give documents their new ids in ONE transaction: each row (id and source key), its
        identity, every ``superseded_by`` that names it, its pending re-ingest requests and
        the declarations about it, with one ``rekey_row`` audit entry each. A rename already
        done (the old id gone, the new one there) is skipped, so it can be repeated. Returns
        the new audit head ("" when nothing was written)."""
        ...

    def record_source_attempt(
        self,
        source: str,
        *,
        ok: bool,
        at: datetime | None = None,
        error: str | None = None,
        documents_seen: int | None = None,
    ) -> None:
        """Record a scan of a source; success moves its TTL clock, failure keeps it."""
        ...


class DocumentRows(DocumentReader, DocumentWriter, Protocol):
    """Document rows, the identity map (source key -> family) and each source's scan status."""

    ...


class RunLogReader(Protocol):
    """Runs and their findings, read back."""

    def get_run(self, run_id: str) -> RunEntry | None:
        """One run's record."""
        ...

    def last_runs(self, limit: int = 5) -> Sequence[RunEntry]:
        """The most recent runs, newest first."""
        ...

    def run_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """Ids of runs that start with ``prefix`` (at most ``limit``, newest first)."""
        ...

    def rollbacks(self) -> dict[str, str]:
        """Succeeded rollback runs and the run each rolled back."""
        ...

    def runs_to_resolve(self, *, shard: str) -> list[tuple[str, str]]:
        """Runs of ``shard`` recorded as running, and failed runs that left a payload batch
        unconfirmed: (run_id, status), oldest first."""
        ...

    def findings_of(self, run_id: str) -> list[dict[str, Any]]:
        """The findings a run recorded."""
        ...


class RunLogWriter(Protocol):
    """Runs recorded from start to end, with their findings."""

    def start_run(
        self,
        *,
        mode: str,
        actor: str,
        forced: bool = False,
        shard: str | None = None,
        status: str = "running",
        run_id: str | None = None,
        job: str | None = None,
        checks: str | None = None,
    ) -> str:
        """Record a run as started (or refused); return its id."""
        ...

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        counts: Mapping[str, Any] | None = None,
        error: str | None = None,
        **stats: float,
    ) -> None:
        """Record a run's end (never over ``interrupted``, which is final); ``stats`` fill
        the metric columns (``chunks_scanned``, ``rows_written``...), others raise TypeError."""
        ...

    def set_run_counts(self, run_id: str, counts: Mapping[str, Any]) -> None:
        """Replace a finished run's counts (recovery clears what it resolved)."""
        ...

    def record_findings(
        self, run_id: str, findings: Sequence[Any], *, outstanding: Sequence[bool] | None = None
    ) -> None:
        """Store a run's findings (``Finding`` values) and whether each still holds."""
        ...


class RunLog(RunLogReader, RunLogWriter, Protocol):
    """Runs from start to end, and the findings each recorded."""

    ...


class OutboxReader(Protocol):
    """Pending re-ingest requests, read."""

    def pending_reingest(self, limit: int = 1000) -> Sequence[QueuedReingest]:
        """Pending re-ingest requests, oldest first."""
        ...

    def pending_reingest_for(self, doc_ids: Iterable[str], *, chunk: int = 500) -> set[str]:
        """Those of ``doc_ids`` that already have a pending re-ingest request."""
        ...


class OutboxWriter(Protocol):
    """Re-ingest requests queued and finished, and a run's row writes committed with them."""

    def request_reingest(
        self, *, doc_id: str, source: str, source_key: str, reason: str, run_id: str | None = None
    ) -> None:
        """Queue a re-ingest request (idempotent while one is pending for the document)."""
        ...

    def finish_reingest(self, request_id: int, *, ok: bool, error: str | None = None) -> None:
        """Mark a request done, or count a failed attempt (it stays pending)."""
        ...

    def write_rows_and_outbox(
        self,
        *,
        run_id: str,
        actor: str,
        changes: Sequence[RowChange],
        reingests: Sequence[tuple[ReingestRequest, str]],
        at: datetime,
    ) -> tuple[str, int]:
        """Row updates, re-ingest requests and their audit entries in ONE transaction.

        Returns the new audit head hash ("" when nothing was written) and the number of
        re-ingest requests queued (one already pending for a document is not repeated).
        """
        ...


class ReingestOutbox(OutboxReader, OutboxWriter, Protocol):
    """Re-ingest requests, and a run's row writes committed with them."""

    ...


class DeclarationReader(Protocol):
    """A person's declarations (``reconciler declare``), read."""

    def declarations(
        self, *, active: bool = True, ids: Iterable[str] | None = None
    ) -> list[Declaration]:
        """Declarations in the order they were made (``active``: only those not revoked;
        ``ids``: only those)."""
        ...


class DeclarationWriter(Protocol):
    """Declarations recorded and revoked, each with its audit entry."""

    def write_declarations(
        self,
        *,
        run_id: str,
        actor: str,
        at: datetime,
        added: Sequence[Declaration] = (),
        revoked: Sequence[str] = (),
        restored: Sequence[str] = (),
        reason: str | None = None,
    ) -> str:
        """Record ``added``, revoke the declarations ``revoked`` names (by run ``run_id``),
        and take back the revocation of those ``restored`` names, with one audit entry each
        (target type ``declaration``), in ONE transaction; return the new audit head hash
        ("" when nothing was written)."""
        ...


class Declarations(DeclarationReader, DeclarationWriter, Protocol):
    """A person's declarations, a declared source of family and supersession."""

    ...


class TableReader(
    DocumentReader, RunLogReader, OutboxReader, AuditReader, DeclarationReader, PlanReader, Protocol
):
    """Everything the document table answers, and nothing that changes it."""

    def stats(self) -> dict[str, Any]:
        """Counts for ``reconciler status``: documents by state, families, chunks, quarantine,
        pending re-ingest requests."""
        ...

    def metrics_snapshot(self, *, recent_runs: int = 500) -> dict[str, Any]:
        """Everything the Prometheus collector exposes that lives in the table."""
        ...


class TableWriter(
    DocumentWriter, RunLogWriter, OutboxWriter, AuditWriter, DeclarationWriter, PlanWriter, Protocol
):
    """Every write the document table takes (the writing side's: ``tests/unit/test_writers.py``)."""

    ...


class DocumentTable(TableReader, TableWriter, Protocol):
    """The document table: rows, identities, source status, run log, outbox, audit log and
    declarations, in one transactional store (a row write and its audit entries commit together)."""

    def close(self) -> None:
        """Release the connections."""
        ...
