"""The ``watch_marks`` table: how far ``serve``'s watch of each source has been reconciled.

A mark is written only after the apply that reconciled the changes up to it has committed
(crash order): a process killed between the two reads the older mark at its next start and
reconciles those changes again, which is harmless (a reconciliation is idempotent)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.model import OPEN_END
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.schema import DocumentRow, IdentityRow, WatchMarkRow


@dataclass(frozen=True)
class WatchMark:
    """One source's mark: the commit (git) and the source's date of the newest change
    reconciled, and when it was."""

    source: str
    mark: str | None
    changed_until: datetime | None
    reconciled_at: datetime


class SqlWatchMarks:
    """Read and advance the marks."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def of(cls, table: SqlDocumentTable) -> SqlWatchMarks:
        """The marks kept beside a document table."""
        return cls(table.engine)

    def marks(self) -> dict[str, WatchMark]:
        """Every source's mark, by source name."""
        with Session(self.engine) as session:
            return {
                row.source: WatchMark(row.source, row.mark, row.changed_until, row.reconciled_at)
                for row in session.scalars(select(WatchMarkRow))
            }

    def known_paths(self, source: str) -> set[str]:
        """Every path the identity map holds for a source (a rescan compares them with the
        source's files: a path gone is a deletion, one new a new document)."""
        with Session(self.engine) as session:
            rows = session.scalars(
                select(IdentityRow.path).where(
                    IdentityRow.source == source, IdentityRow.path.is_not(None)
                )
            )
            return {path for path in rows if path is not None}

    def identities_of(self, source: str, keys: Iterable[str]) -> dict[str, tuple[str, str | None]]:
        """The identity map's family and path of each of ``keys`` it holds."""
        wanted = sorted(set(keys))
        found: dict[str, tuple[str, str | None]] = {}
        with Session(self.engine) as session:
            for start in range(0, len(wanted), 500):
                stmt = select(IdentityRow.source_key, IdentityRow.doc_family_id, IdentityRow.path)
                found.update(
                    (key, (family, path))
                    for key, family, path in session.execute(
                        stmt.where(
                            IdentityRow.source == source,
                            IdentityRow.source_key.in_(wanted[start : start + 500]),
                        )
                    )
                )
        return found

    def members(self, source: str, families: Iterable[str]) -> dict[str, str | None]:
        """Key -> path of every identity of ``source`` the map places in ``families``."""
        wanted = sorted(set(families))
        found: dict[str, str | None] = {}
        with Session(self.engine) as session:
            for start in range(0, len(wanted), 500):
                stmt = select(IdentityRow.source_key, IdentityRow.path).where(
                    IdentityRow.source == source,
                    IdentityRow.doc_family_id.in_(wanted[start : start + 500]),
                )
                found.update((key, path) for key, path in session.execute(stmt))
        return found

    def advance(
        self,
        source: str,
        *,
        mark: str | None,
        changed_until: datetime | None,
        reconciled_at: datetime,
    ) -> None:
        """Set a source's mark (one transaction)."""
        with self._sessions.begin() as session:
            row = session.get(WatchMarkRow, source)
            if row is None:
                session.add(
                    WatchMarkRow(
                        source=source,
                        mark=mark,
                        changed_until=changed_until,
                        reconciled_at=reconciled_at,
                    )
                )
                return
            row.mark = mark
            if changed_until is not None and (
                row.changed_until is None or changed_until > row.changed_until
            ):
                row.changed_until = changed_until
            row.reconciled_at = reconciled_at


def next_boundary(table: SqlDocumentTable, after: datetime) -> datetime | None:
    """The earliest ``effective_from`` or ``effective_to`` in the document table later than
    ``after`` (an open end is no boundary); ``None`` when there is none."""
    with Session(table.engine) as session:
        starts = session.scalar(
            select(func.min(DocumentRow.effective_from)).where(DocumentRow.effective_from > after)
        )
        ends = session.scalar(
            select(func.min(DocumentRow.effective_to)).where(
                DocumentRow.effective_to > after, DocumentRow.effective_to < OPEN_END
            )
        )
    found = [
        value if value.tzinfo else value.replace(tzinfo=UTC)
        for value in (starts, ends)
        if value is not None
    ]
    return min(found) if found else None
