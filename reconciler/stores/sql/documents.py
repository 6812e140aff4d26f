"""The documents repository: document rows, the identity map and each source's scan status."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Engine,
    String,
    bindparam,
    func,
    literal_column,
    select,
    type_coerce,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from reconciler.errors import TableUnavailable
from reconciler.model import EXPECTED_FIELDS, OPEN_END, Document, state_of
from reconciler.stores.sql.connection import now
from reconciler.stores.sql.schema import DocumentRow, IdentityRow, SourceStatusRow

#: The table's columns of a document, in the order of ``Document``'s fields (the order the
#: stream selects them in, so a row is built positionally: ``document_from_values``).
_DOC_FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(Document))
if _DOC_FIELDS[5:7] != ("version_state", "effective_to"):  # what the reader converts, by place
    raise RuntimeError(
        "document_from_values converts Document's 6th and 7th fields as version_state and "
        f"effective_to; the dataclass now declares {_DOC_FIELDS[5:7]} there: update both"
    )


#: The columns of an instant (``iter_expected`` reads them on SQLite as stored).
_INSTANTS = frozenset({"effective_from", "effective_to"})


def document_from_row(row: Any) -> Document:
    """Convert a table row (ORM object or Core row) to a ``Document`` value."""
    return document_from_values(tuple(getattr(row, name) for name in _DOC_FIELDS))


def document_from_values(values: Sequence[Any]) -> Document:
    """Convert a row's values in ``_DOC_FIELDS`` order (a Core row of those columns)."""
    # Positionally: a frozen dataclass sets each field through object.__setattr__ either way,
    # and keywords cost a third again (the check builds one a row). Only the state and the
    # end are read differently from how they are stored.
    doc_id, source, source_key, family, version, state, effective_to, *rest = values
    return Document(
        doc_id,
        source,
        source_key,
        family,
        version,
        state_of(state),
        effective_to or OPEN_END,
        *rest,
    )


def _document_values(doc: Document, at: datetime) -> dict[str, Any]:
    values = {name: getattr(doc, name) for name in _DOC_FIELDS}
    values["version_state"] = str(doc.version_state)
    values["effective_to"] = doc.effective_to or OPEN_END
    values["updated_at"] = doc.updated_at or at
    return values


def upsert(
    session: Session, dialect: str, table: Any, rows: list[dict[str, Any]], keys: list[str]
) -> None:
    """Insert or update ``rows`` of ``table`` on ``keys`` in chunks (both dialects): one
    statement of one row's parameters, executed for many (its compiled form cached; a
    statement of the chunk's values was compiled anew each time, 5x the CPU a row)."""
    if not rows:
        return
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(table)
    updates = {c: getattr(stmt.excluded, c) for c in rows[0] if c not in keys}
    upsert_rows = stmt.on_conflict_do_update(index_elements=keys, set_=updates)
    for start in range(0, len(rows), 500):
        session.execute(upsert_rows, rows[start : start + 500])


class SqlDocuments:
    """Document rows, the identity map (source key -> family) and source scan status."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    # -- documents --------------------------------------------------------------------------

    def iter_documents(
        self,
        *,
        batch_size: int = 1000,
        source: str | None = None,
        families: Sequence[str] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> Iterator[Document]:
        """Stream documents ordered by family, version and id (``yield_per``; never all at once)."""
        columns = DocumentRow.__table__.c
        stmt = select(*(columns[name] for name in _DOC_FIELDS)).order_by(
            columns.doc_family_id, columns.doc_version, columns.doc_id
        )
        if source is not None:
            stmt = stmt.where(columns.source == source)
        if families is not None:
            stmt = stmt.where(columns.doc_family_id.in_(list(families)))
        if doc_ids is not None:
            stmt = stmt.where(columns.doc_id.in_(list(doc_ids)))
        # Core rows, server-side cursor where the driver has one: no ORM identity map grows.
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=batch_size).execute(stmt)
            for row in result:
                yield document_from_values(row)

    def iter_expected(
        self, *, batch_size: int = 1000, families: Sequence[str] | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """``iter_documents``' rows as tuples of ``EXPECTED_FIELDS`` (``DocumentReader``): the
        columns the check's scan reads, as the Core rows hold them (a tuple each). On SQLite
        the two instants come as the texts stored (``stored_form``'s, or whatever else a
        writer left there), not parsed: the scan cuts the payload's text from them and
        compares them as they are (issue 38: parsing them was a fifth of the table pass)."""
        columns = DocumentRow.__table__.c
        stored = self.dialect == "sqlite"
        stmt = select(
            *(
                type_coerce(columns[name], String)
                if stored and name in _INSTANTS
                else columns[name]
                for name in EXPECTED_FIELDS
            )
        ).order_by(columns.doc_family_id, columns.doc_version, columns.doc_id)
        if families is not None:
            stmt = stmt.where(columns.doc_family_id.in_(list(families)))
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=batch_size).execute(stmt)
            yield from map(tuple, result)

    def iter_renamed(
        self, source: str, *, keys: Iterable[str], ids: Iterable[str], batch_size: int = 1000
    ) -> Iterator[Document]:
        """Stream the rows of ``source`` whose source key is one of ``keys`` and whose id is
        none of ``ids``, ordered by id (``DocumentReader.iter_renamed``): one statement, the
        keys and ids bound as one value each (a JSON array SQLite's ``json_each`` reads, an
        array PostgreSQL's ``unnest`` does), so only those rows leave the database."""
        wanted, held = list(set(keys)), list(set(ids))
        if not wanted:
            return
        columns = DocumentRow.__table__.c
        stmt = (
            select(*(columns[name] for name in _DOC_FIELDS))
            .where(
                columns.source == source,
                columns.source_key.in_(self._bound_values("keys")),
                columns.doc_id.not_in(self._bound_values("ids")),
            )
            .order_by(columns.doc_id)
        )
        with self.engine.connect() as conn:
            bound = self._bound({"keys": wanted, "ids": held})
            result = conn.execution_options(yield_per=batch_size).execute(stmt, bound)
            for row in result:
                yield document_from_values(row)

    def _bound_values(self, name: str) -> Any:
        """A subquery of the strings bound as ``name``: PostgreSQL's ``unnest`` of an array,
        SQLite's ``json_each`` of a JSON array."""
        if self.dialect == "postgresql":
            return select(func.unnest(bindparam(name, type_=postgresql.ARRAY(String))))
        return select(literal_column("value")).select_from(func.json_each(bindparam(name)))

    def _bound(self, values: Mapping[str, list[str]]) -> dict[str, Any]:
        """The values of ``_bound_values``'s subqueries, as the dialect binds them."""
        if self.dialect == "postgresql":
            return dict(values)
        return {name: json.dumps(strings) for name, strings in values.items()}

    def known_families(self, families: Iterable[str]) -> set[str]:
        """Those of ``families`` that at least one document row belongs to (500 per query)."""
        wanted = sorted(set(families))
        columns = DocumentRow.__table__.c
        found: set[str] = set()
        with self.engine.connect() as conn:
            for start in range(0, len(wanted), 500):
                stmt = (
                    select(columns.doc_family_id)
                    .where(columns.doc_family_id.in_(wanted[start : start + 500]))
                    .distinct()
                )
                found.update(conn.scalars(stmt))
        return found

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """Documents by id (missing ids are absent)."""
        ids = list(dict.fromkeys(doc_ids))
        found: dict[str, Document] = {}
        columns = DocumentRow.__table__.c
        stmt = select(*(columns[name] for name in _DOC_FIELDS))
        # Core rows of the fields, built positionally (no ORM object a row).
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 500):
                rows = conn.execute(stmt.where(columns.doc_id.in_(ids[start : start + 500])))
                for values in rows:
                    doc = document_from_values(values)
                    found[doc.doc_id] = doc
        return found

    def families_of(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """doc_id -> its row's family, by id (missing ids are absent; 500 per query): two
        columns a row, no ``Document`` built (``declare`` checks 200,000 ids at 100,000
        proposals and needs no more of them)."""
        ids = list(dict.fromkeys(doc_ids))
        found: dict[str, str] = {}
        columns = DocumentRow.__table__.c
        stmt = select(columns.doc_id, columns.doc_family_id)
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 500):
                rows = conn.execute(stmt.where(columns.doc_id.in_(ids[start : start + 500])))
                found.update(rows.all())
        return found

    def upsert_documents(
        self, documents: Iterable[Document], *, chunk_counts: Mapping[str, int] | None = None
    ) -> int:
        """Insert or update document rows in bulk (both dialects); return the number written."""
        at = now()
        rows = []
        for doc in documents:
            values = _document_values(doc, at)
            if chunk_counts is not None and doc.doc_id in chunk_counts:
                values["chunk_count"] = chunk_counts[doc.doc_id]
            rows.append(values)
        # Rows in one statement must share their columns.
        with_counts = [r for r in rows if "chunk_count" in r]
        without = [r for r in rows if "chunk_count" not in r]
        try:
            with self._sessions.begin() as session:
                upsert(session, self.dialect, DocumentRow.__table__, with_counts, ["doc_id"])
                upsert(session, self.dialect, DocumentRow.__table__, without, ["doc_id"])
        except OperationalError as exc:
            raise TableUnavailable(f"document table write failed: {exc.orig}") from None
        return len(rows)

    # -- identity map -----------------------------------------------------------------------

    def identities(
        self, source: str, *, near: tuple[Iterable[str], Iterable[str]] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The identity map of one source: (source_key -> family, content_hash -> family);
        ``near`` (keys, paths): only the identities of those keys or last seen at those
        paths (a read at some paths)."""
        by_key: dict[str, str] = {}
        by_hash: dict[str, str] = {}
        stmt = select(IdentityRow.source_key, IdentityRow.doc_family_id, IdentityRow.content_hash)
        for key, family, content_hash in self._identity_rows(stmt, source, near):
            by_key[key] = family
            if content_hash:
                by_hash.setdefault(content_hash, family)
        return by_key, by_hash

    def _identity_rows(
        self, stmt: Any, source: str, near: tuple[Iterable[str], Iterable[str]] | None
    ) -> Iterator[Any]:
        """The rows ``stmt`` selects of one source's identities (all, or those ``near``)."""
        stmt = stmt.where(IdentityRow.source == source)
        with Session(self.engine) as session:
            if near is None:
                yield from session.execute(stmt.execution_options(yield_per=5000))
                return
            keys, paths = sorted(set(near[0])), sorted(set(near[1]))
            seen: set[str] = set()
            for column, values in ((IdentityRow.source_key, keys), (IdentityRow.path, paths)):
                for start in range(0, len(values), 500):
                    for row in session.execute(stmt.where(column.in_(values[start : start + 500]))):
                        if row[0] not in seen:
                            seen.add(row[0])
                            yield row

    def record_identities(
        self, source: str, entries: Iterable[tuple[str, str, str | None, str | None]]
    ) -> int:
        """Record (source_key, family, content_hash, path) seen now; first_seen is kept."""
        at = now()
        rows = [
            {
                "source": source,
                "source_key": key,
                "doc_family_id": family,
                "content_hash": content_hash,
                "path": path,
                "first_seen": at,
                "last_seen": at,
            }
            for key, family, content_hash, path in entries
        ]
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        with self._sessions.begin() as session:
            for start in range(0, len(rows), 500):
                stmt = insert(IdentityRow).values(rows[start : start + 500])
                session.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["source", "source_key"],
                        set_={
                            "doc_family_id": stmt.excluded.doc_family_id,
                            "content_hash": stmt.excluded.content_hash,
                            "path": stmt.excluded.path,
                            "last_seen": stmt.excluded.last_seen,
                        },
                    )
                )
        return len(rows)

    def identities_at(self, source: str, paths: Iterable[str]) -> dict[str, str]:
        """The identity last seen at each of ``paths`` (path -> source_key), where known."""
        wanted = sorted(set(paths))
        found: dict[str, tuple[datetime, str]] = {}
        stmt = select(IdentityRow.path, IdentityRow.source_key, IdentityRow.last_seen)
        with Session(self.engine) as session:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                rows = session.execute(
                    stmt.where(IdentityRow.source == source, IdentityRow.path.in_(chunk))
                )
                for path, key, seen in rows:
                    if path is not None and (path not in found or (seen, key) > found[path]):
                        found[path] = (seen, key)
        return {path: key for path, (_seen, key) in found.items()}

    def touch_identities(self, source: str, keys: Iterable[str]) -> None:
        """Mark identities as seen now without changing them (a document that is present but
        cannot be parsed: the grace period of ``missing_in_source`` does not start)."""
        chosen = sorted(set(keys))
        at = now()
        with self._sessions.begin() as session:
            for start in range(0, len(chosen), 500):
                session.execute(
                    update(IdentityRow)
                    .where(
                        IdentityRow.source == source,
                        IdentityRow.source_key.in_(chosen[start : start + 500]),
                    )
                    .values(last_seen=at)
                )

    def identity_last_seen(
        self, source: str, *, near: tuple[Iterable[str], Iterable[str]] | None = None
    ) -> dict[str, datetime]:
        """When each source key of a source was last seen (source_key -> instant); ``near``
        as for ``identities``."""
        stmt = select(IdentityRow.source_key, IdentityRow.last_seen)
        return {key: seen for key, seen in self._identity_rows(stmt, source, near)}

    def identity_paths(
        self, source: str, *, at: Iterable[str] | None = None, besides: Iterable[str] = ()
    ) -> dict[str, str]:
        """Where each source key of a source was last seen (source_key -> path), for the keys
        recorded with a path (``DocumentReader.identity_paths``: ``at`` and ``besides``
        bound as ``iter_renamed`` binds its keys and ids, one statement)."""
        stmt = select(IdentityRow.source_key, IdentityRow.path).where(
            IdentityRow.source == source, IdentityRow.path.is_not(None)
        )
        bound: dict[str, list[str]] = {}
        if at is not None:
            bound["at"] = list(set(at))
            stmt = stmt.where(IdentityRow.path.in_(self._bound_values("at")))
        other = list(set(besides))
        if other:
            bound["besides"] = other
            stmt = stmt.where(IdentityRow.source_key.not_in(self._bound_values("besides")))
        with Session(self.engine) as session:
            rows = session.execute(stmt.execution_options(yield_per=5000), self._bound(bound))
            return {key: path for key, path in rows if path is not None}

    # -- source status ----------------------------------------------------------------------

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
        at = at or now()
        values: dict[str, Any] = {"source": source, "last_attempt_at": at, "last_error": error}
        if ok:
            values["last_success_at"] = at
            values["documents_seen"] = documents_seen
        with self._sessions.begin() as session:
            upsert(session, self.dialect, SourceStatusRow.__table__, [values], ["source"])
            if not ok:
                session.execute(
                    update(SourceStatusRow)
                    .where(SourceStatusRow.source == source)
                    .values(failures=SourceStatusRow.failures + 1)
                )

    def source_status(self) -> dict[str, SourceStatusRow]:
        """Every source's status row."""
        with Session(self.engine) as session:
            return {row.source: row for row in session.scalars(select(SourceStatusRow))}
