"""What the checks look at: per-family views of the three stores, built by streaming, and the
run-wide ``CheckContext``.

Memory is bounded by the batch size plus small per-document aggregates: the chunk scan keeps,
per document, a count of chunks whose managed payload already equals ``payload_for(row)`` and
the few payload variants that do not; the table is streamed family by family; sources hand
over metadata only (never bodies).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Protocol

from reconciler.model import (
    Document,
    Finding,
    SourceDocument,
    SourceProblem,
    defaults,
)
from reconciler.payload import Variant, normalize, payload_for
from reconciler.rules.time_rule import settle, successor_links


def digest(variant: Variant) -> bytes:
    """A 16-byte fingerprint of a canonical payload."""
    return hashlib.blake2b(repr(variant).encode("utf-8"), digest_size=16).digest()


def expected_variant(document: Document) -> Variant:
    """The canonical payload every chunk of ``document`` must carry."""
    return normalize(payload_for(document))


@dataclass(slots=True)
class ChunkAggregate:
    """One document's chunks: how many, how many already right, and the other variants."""

    count: int = 0
    matching: int = 0
    variants: dict[Variant, int] = field(default_factory=dict)
    #: Chunks whose ``content_hash`` names another text than the row's ``source_hash`` (an
    #: older version's chunks left behind, or a pipeline that re-chunked a stale export).
    stale: int = 0
    #: In a split store, of ``count`` the chunks in the archive collection (the rest are in
    #: the main one).
    archived: int = 0

    @property
    def drifted(self) -> int:
        """Chunks whose managed payload differs from the row's."""
        return self.count - self.matching


class _Slots(Protocol):
    @property
    def size(self) -> int: ...

    def slot(self, doc_id: Any) -> int | None: ...


class Registered:
    """The doc ids of the rows a tally (``chunk_tally.ChunkTally``) registered, as a
    container: membership and size (the ids themselves are not kept)."""

    def __init__(self, tally: _Slots) -> None:
        self._tally = tally

    def __contains__(self, doc_id: object) -> bool:
        return self._tally.slot(doc_id) is not None

    def __len__(self) -> int:
        return self._tally.size


def variant_values(variant: Variant) -> tuple[Any, ...]:
    """The values of a canonical payload, in ``MANAGED_KEYS`` order."""
    return tuple(value for _key, value in variant)


@dataclass(frozen=True)
class SourceState:
    """One configured source as this run saw it."""

    name: str
    readable: bool
    scanned: bool
    documents: int = 0
    error: str | None = None
    ttl: timedelta | None = None
    last_success_at: datetime | None = None
    #: False when the scan was partial: absent documents are not taken as deleted.
    complete: bool = True
    #: Read at some paths only (``Options.paths``: ``serve``'s watch): complete for the
    #: documents of the run's families, and no count of the whole source.
    scoped: bool = False


@dataclass(frozen=True)
class CheckContext:
    """Run-wide facts every check may read (the instant, the sources' state, the policies)."""

    now: datetime
    sources: Mapping[str, SourceState]
    successor_policy: str = defaults.SUCCESSOR_NOT_INGESTED
    #: ``[policy] unknown_siblings``: "supersede" or "report" (see ``rules.time_rule``).
    unknown_siblings: str = defaults.UNKNOWN_SIBLINGS
    missing_grace: timedelta = defaults.MISSING_IN_SOURCE_GRACE
    #: content hash -> the doc ids whose source holds that text now, across every source read
    #: (the hash check's ``id_reused``: a registered text found under another id).
    holders: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: ``[policy] status_contradicts_link``: "report" or "ignore" (``checks.contradictions``).
    status_contradicts_link: str = defaults.STATUS_CONTRADICTS_LINK
    #: A split store's collections, (main, archive) (``[index] archive_collection``): a chunk
    #: in the other one than its row's state puts it in is ``payload/misplaced``. ``None``:
    #: one collection.
    split: tuple[str, str] | None = None
    #: Sources no connector reads, whose declared documents are judged from their rows and
    #: declarations (``rules.declarations``): readable, never complete (absence is no
    #: deletion), never expired.
    declared_only: frozenset[str] = frozenset()

    def source_readable(self, name: str) -> bool:
        """Whether the source was read in this run (or speaks through declarations alone)."""
        if name in self.declared_only:
            return True
        state = self.sources.get(name)
        return state is not None and state.scanned and state.readable

    def source_complete(self, name: str) -> bool:
        """Whether the source was read completely (absence then means deletion)."""
        state = self.sources.get(name)
        return self.source_readable(name) and state is not None and state.complete

    def ttl_expired(self, name: str) -> bool:
        """Whether a polling source has gone unread for longer than its TTL."""
        state = self.sources.get(name)
        if state is None or state.ttl is None:
            return False
        if state.scanned and state.readable:
            return False
        if state.last_success_at is None:
            return True
        return self.now - state.last_success_at > state.ttl


@dataclass(frozen=True, slots=True)
class FamilyView:
    """Everything known about one family: rows, source documents, chunk aggregates."""

    family: str
    rows: tuple[Document, ...] = ()
    #: Source documents by doc_id: those of the rows, and new ones resolved to this family.
    sources: Mapping[str, SourceDocument] = field(default_factory=dict)
    #: Source documents this family's documents name as successors (any family).
    successors: Mapping[str, SourceDocument] = field(default_factory=dict)
    #: Per-document problems the connector reported (doc_id -> problems).
    problems: Mapping[str, tuple[SourceProblem, ...]] = field(default_factory=dict)
    #: When each document was last seen in its source (doc_id -> instant).
    last_seen: Mapping[str, datetime] = field(default_factory=dict)
    chunks: Mapping[str, ChunkAggregate] = field(default_factory=dict)
    #: Documents named by a ``superseded_by`` of this family (source or row) that have a row
    #: in the table, in any family or shard: a successor outside it is "not ingested".
    registered: frozenset[str] = frozenset()
    #: doc_id -> why a declaration places it in this family, in words (``rules.declarations``).
    because: Mapping[str, str] = field(default_factory=dict)
    #: What the checks work out from this view once and share (``settled``, the family check's
    #: declared rows): key -> value. Not part of the family's content (no init, compare, repr
    #: or hash), and a copy made by ``dataclasses.replace`` starts empty. Its values are read,
    #: never changed.
    memo: dict[Hashable, Any] = field(
        default_factory=dict, init=False, compare=False, repr=False, hash=False
    )

    def settled(self, now: datetime, unknown_siblings: str = "supersede") -> Mapping[str, Document]:
        """The rows as the time rule leaves them at ``now``: ``settle(self.rows, now,
        unknown_siblings=..., links=self.links())``, worked out once per view for the checks that share it (the
        dates and siblings checks, the family check's comparison). Read-only."""
        key = ("settled", now, unknown_siblings)
        settled: dict[str, Document] | None = self.memo.get(key)
        if settled is None:
            settled = self.memo[key] = settle(
                self.rows, now, unknown_siblings=unknown_siblings, links=self.links()
            )
        return MappingProxyType(settled)

    def links(self) -> Mapping[str, tuple[str, ...]]:
        """The successors each of the family's source documents declares (the time rule's
        ``links``; a row names one at most, and a draft's or retired one's none)."""
        return successor_links(self.sources.values())

    def row(self, doc_id: str) -> Document | None:
        """The row of ``doc_id`` in this family, if any."""
        for row in self.rows:
            if row.doc_id == doc_id:
                return row
        return None

    def new_documents(self) -> Iterator[SourceDocument]:
        """Source documents of this family that have no row yet."""
        ids = {row.doc_id for row in self.rows}
        for doc_id, doc in sorted(self.sources.items()):
            if doc_id not in ids:
                yield doc


@dataclass(frozen=True)
class CollectionView:
    """What a check over the whole collection sees, once a run has scanned it (the collection
    part of a registered check, ``collection_<name>``)."""

    #: Chunks scanned; chunks the rows say they have, and how many of those were found.
    chunks_scanned: int
    chunks_expected: int
    chunks_found: int
    #: Whether the run covers the whole shard (no ``--doc``, no ``--family``).
    whole: bool
    #: ``--doc``: only that document's findings are kept.
    doc_id: str | None
    #: A split store's collections, (main, archive) (``CheckContext.split``).
    split: tuple[str, str] | None
    #: The chunks whose doc_id has no row (``None``: no doc_id), by doc_id.
    orphans: tuple[tuple[str | None, ChunkAggregate], ...]
    #: Reads the payload indexes the collection holds (``None``: its engine keeps none).
    payload_indexes: Callable[[], Mapping[str, str]] | None

    def in_scope(self, finding: Finding) -> bool:
        """Whether ``finding`` is one the run reports (``--doc`` keeps its document's)."""
        return self.doc_id is None or finding.doc_id == self.doc_id


@dataclass(frozen=True)
class SourcesView:
    """What a check over the sources sees, in a run of the whole shard (the sources part of a
    registered check, ``sources_<name>``)."""

    now: datetime
    states: Mapping[str, SourceState]
    #: Every document the sources yielded.
    documents: tuple[SourceDocument, ...]
    #: doc_id -> the problems the connector reported about it.
    problems: Mapping[str, tuple[SourceProblem, ...]]
    #: Problems no document identity could be given to.
    loose_problems: tuple[SourceProblem, ...]
    #: The problems of documents no family took and no row holds (in no source, unregistered).
    unclaimed: tuple[SourceProblem, ...]
    #: source -> the rows that source should still hold (not retired).
    rows_by_source: Mapping[str, int]


@dataclass(frozen=True)
class Wide:
    """What a check over the collection or the sources found: its findings, and how many
    things it checked (``None``: the families it checked are the count)."""

    findings: tuple[Finding, ...] = ()
    checked: int | None = None
