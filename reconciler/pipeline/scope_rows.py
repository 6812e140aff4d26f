"""A scoped run's rows read once: the families of a ``declare`` (or ``repair --family``) run
streamed from the table by the scan, again by the moves, again by the family views, three
times the same statement and the same answer, now one read handed along.

``ScopeRows`` is a value: the rows of one scope as the table ordered them (family, version,
id), read when the scope is known, before anything is written, and passed to the stages that
stream that scope. Every other question goes to the table as before, and a run of the whole
corpus (no scope) keeps streaming it, its memory flat in the corpus.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.model import Document
from reconciler.ports import DocumentReader
from reconciler.ports.table import SourceStatus


@dataclass(frozen=True)
class ScopeRows:
    """``table`` with the rows of the families ``scope`` already read (``rows``, in the
    table's order): ``iter_documents(families=...)`` of exactly those families answers from
    them, whatever order the families are named in (the statement orders its rows itself)."""

    table: DocumentReader
    scope: frozenset[str]
    rows: tuple[Document, ...]

    @classmethod
    def read(cls, table: DocumentReader, scope: frozenset[str], batch_size: int) -> ScopeRows:
        """The rows of ``scope``, streamed from ``table`` once."""
        rows = tuple(table.iter_documents(batch_size=batch_size, families=sorted(scope)))
        return cls(table=table, scope=scope, rows=rows)

    def iter_documents(
        self,
        *,
        batch_size: int = 1000,
        source: str | None = None,
        families: Sequence[str] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> Iterator[Document]:
        """The rows read, when asked for exactly the scope's families; else the table's."""
        if (
            families is not None
            and source is None
            and doc_ids is None
            and frozenset(families) == self.scope
        ):
            return iter(self.rows)
        return self.table.iter_documents(
            batch_size=batch_size, source=source, families=families, doc_ids=doc_ids
        )

    def iter_expected(
        self, *, batch_size: int = 1000, families: Sequence[str] | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """The table's own (its columns as stored, which the rows read here no longer are)."""
        return self.table.iter_expected(batch_size=batch_size, families=families)

    def iter_renamed(
        self, source: str, *, keys: Iterable[str], ids: Iterable[str], batch_size: int = 1000
    ) -> Iterator[Document]:
        return self.table.iter_renamed(source, keys=keys, ids=ids, batch_size=batch_size)

    def known_families(self, families: Iterable[str]) -> set[str]:
        return self.table.known_families(families)

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        return self.table.get_documents(doc_ids)

    def families_of(self, doc_ids: Iterable[str]) -> dict[str, str]:
        return self.table.families_of(doc_ids)

    def identities(
        self, source: str, *, near: tuple[Iterable[str], Iterable[str]] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        return self.table.identities(source, near=near)

    def identities_at(self, source: str, paths: Iterable[str]) -> dict[str, str]:
        return self.table.identities_at(source, paths)

    def identity_last_seen(
        self, source: str, *, near: tuple[Iterable[str], Iterable[str]] | None = None
    ) -> dict[str, datetime]:
        return self.table.identity_last_seen(source, near=near)

    def identity_paths(
        self, source: str, *, at: Iterable[str] | None = None, besides: Iterable[str] = ()
    ) -> dict[str, str]:
        return self.table.identity_paths(source, at=at, besides=besides)

    def source_status(self) -> Mapping[str, SourceStatus]:
        return self.table.source_status()
