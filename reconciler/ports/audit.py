"""The audit log's port (a role of the document table, ``ports.table``): the chain walked and
read (by run, by target, a run's documents page by page), and appended to."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.model import AuditEntry, Verification


@dataclass(frozen=True)
class ChainedEntry:
    """An entry as the chain holds it: its place (``seq``), its own hash and the one it links
    to; ``entry`` is ``None`` when the stored entry cannot be read (a problem of the walk)."""

    seq: int
    entry_hash: str
    prev_hash: str
    entry: AuditEntry | None


class AuditWalk(Protocol):
    """The whole audit chain, streamed in order and verified on the way (iterate it once)."""

    #: What the walk found wrong; complete once the iteration has ended.
    verification: Verification
    #: The ``seq`` of the last entry walked.
    last_seq: int

    def __iter__(self) -> Iterator[ChainedEntry]: ...


class AuditReader(Protocol):
    """The audit log read: a run's entries, entries for display, the chain verified."""

    def walk_audit(self) -> AuditWalk:
        """The whole chain, streamed and verified on the way."""
        ...

    def audit_entries_about(
        self, targets: Iterable[str], *, upto: int, after: int = 0
    ) -> Iterator[ChainedEntry]:
        """The entries whose target is one of ``targets`` (documents, runs), after ``seq``
        ``after`` and up to ``upto``, streamed (in chain order for up to 500 targets), each
        checked against its own hash (``entry=None``: altered)."""
        ...

    def audit_targets(self, *, kinds: Iterable[str], upto: int) -> Iterator[str]:
        """Every target of an entry of one of ``kinds`` up to ``seq`` ``upto``, once each, in
        order, streamed (the store's own DISTINCT: nothing held here)."""
        ...

    def run_entries_with_hashes(self, run_id: str) -> tuple[list[AuditEntry], list[str]]:
        """Every entry of one run, in order, with each entry's own hash."""
        ...

    def run_documents(
        self, run_ids: Collection[str], *, after: str | None = None, limit: int = 1000
    ) -> list[str]:
        """The documents the runs ``run_ids`` wrote or moved (the targets of their ``row``,
        ``payload`` and ``move`` entries, a page's documents), each once, in the store's order
        of ids, those after ``after``, at most ``limit``: a rollback's pages (nothing held)."""
        ...

    def run_entries_of(
        self, run_id: str, *, kinds: Collection[str], targets: Collection[str] | None = None
    ) -> list[AuditEntry]:
        """The entries of one run of ``kinds`` (a page of intents is its documents'
        ``payload`` intents), in order; with ``targets``, only those about them: a rollback
        reads a page of documents' entries, or a run's few declarations."""
        ...

    def runs_touching_run(self, run_id: str) -> list[str]:
        """Runs other than ``run_id`` with a row or payload entry after ``run_id``'s first
        entry about one of the documents ``run_id`` wrote or moved, or that re-keyed one of
        them (a ``rekey_row`` entry naming it as the old id), newest first
        (``runs_touching_after`` of ``run_documents``, joined in the store: nothing held)."""
        ...

    def audit_entries(
        self, *, run_id: str | None = None, target: str | None = None, limit: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """Entries for display (JSON-ready), oldest first, optionally of one run or target."""
        ...

    def verify_audit(self) -> Verification:
        """Walk the whole chain; report each break, cut end and unreadable entry."""
        ...

    def runs_touching_after(self, entry_hash: str, targets: set[str], *, exclude: str) -> list[str]:
        """Runs other than ``exclude`` with a row or payload entry about one of ``targets``,
        or a ``rekey_row`` entry renaming one, after the entry ``entry_hash``, newest first."""
        ...


class AuditWriter(Protocol):
    """The audit log appended to."""

    def append_audit(self, entries: Sequence[AuditEntry]) -> str:
        """Append entries in their own transaction; return the new head hash ("" if none)."""
        ...


class AuditLog(AuditReader, AuditWriter, Protocol):
    """The append-only, hash-chained log of every write."""

    ...
