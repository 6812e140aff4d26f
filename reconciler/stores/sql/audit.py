"""The append-only, hash-chained audit log of every write (table, payload, index, re-ingest).

Each entry's hash covers its content and the previous entry's hash, so altering or removing
any entry breaks the chain from there on; each run also records the hash of its last entry,
so cutting entries off the end is caught too. ``verify`` walks the chain by streaming.

The functions take an engine (or, for ``append``, the caller's session, so a write and its
entries commit together); ``SqlAuditLog`` is the audit repository the document table composes.
The entry and verification values live in ``reconciler.model`` (re-exported here).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, Text, select, type_coerce, union
from sqlalchemy.orm import Session, sessionmaker

from reconciler.model import (
    AuditEntry,
    AuditKind,
    Verification,
    jsonable,
)
from reconciler.ports.table import ChainedEntry
from reconciler.stores.sql.audit_body import (
    DOCUMENTS,
    GENESIS,
    LOG,
    at_text_of,
    insert_statement,
    lock_head,
    move_head,
    texts_of,
)
from reconciler.stores.sql.audit_body import canonical_plain as _canonical_plain
from reconciler.stores.sql.audit_body import digest as _digest
from reconciler.stores.sql.audit_body import entry_body as _entry_body
from reconciler.stores.sql.audit_pages import IndexWalk, about, insert_indexed, readable_parts
from reconciler.stores.sql.audit_protection import (
    ProtectedVerification,
    anchor_after_commit,
    anchor_of,
    audit_key,
    say_protection,
)
from reconciler.stores.sql.audit_reading import (
    run_documents,
    run_entries,
    run_entries_of,
    run_entries_with_hashes,
    runs_touching_after,
    runs_touching_run,
    show,
)
from reconciler.stores.sql.bulk import insert_through_driver
from reconciler.stores.sql.schema import AuditHeadRow, AuditRow, RunRow

__all__ = [
    "GENESIS",
    "AuditEntry",
    "ChainWalk",
    "SqlAuditLog",
    "Verification",
    "append",
    "canonical",
    "entries_about",
    "entry_hash_of",
    "run_entries",
    "run_entries_with_hashes",
    "runs_touching_after",
    "show",
    "verify",
]


def canonical(value: Any) -> str:
    """The JSON text that is hashed (sorted keys, no spaces; stable across JSON and JSONB)."""
    return _canonical_plain(jsonable(value))


def entry_hash_of(prev_hash: str, entry: AuditEntry, key: bytes | None = None) -> str:
    """sha256 over the previous hash and the entry's content (with ``key``: their HMAC-SHA256
    under it, a keyed entry: ``audit_protection``)."""
    return _hash_of(prev_hash, entry, jsonable(entry.before), jsonable(entry.after), key)


def _keying(
    prev_hash: str, entry: AuditEntry, stored: str, key: bytes | None, *, keyed_first: bool = False
) -> bool | None:
    """Whether the entry's stored hash is its keyed one (True), its plain one (False), or
    neither (None: altered, or keyed under a key not given). ``keyed_first``: try the key
    first (past the first keyed entry, every one should be: one hash, not two)."""
    if key is not None and keyed_first and entry_hash_of(prev_hash, entry, key) == stored:
        return True
    if entry_hash_of(prev_hash, entry) == stored:
        return False
    if key is not None and not keyed_first and entry_hash_of(prev_hash, entry, key) == stored:
        return True
    return None


def _hash_of(
    prev_hash: str, entry: AuditEntry, before: Any, after: Any, key: bytes | None = None
) -> str:
    """``entry_hash_of``, given the entry's before and after already made plain (``jsonable``)."""
    return _digest(
        prev_hash, _entry_body(entry, _canonical_plain(before), _canonical_plain(after)), key
    )


#: An entry's before and after: their canonical text, stored as it is.
_AS_IS = {"before": "before", "after": "after"}
#: Their parameters' names in Core's statement.
_TEXTS = {"before": "before_text", "after": "after_text"}


def _core_rows(session: Session, rows: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """The log's Core insert and ``rows`` as its parameters (``insert_statement``)."""
    return insert_statement(session), [
        {_TEXTS.get(k, k): v for k, v in row.items()} for row in rows
    ]


def append(session: Session, entries: Sequence[AuditEntry]) -> str:
    """Append entries inside the caller's transaction; return the new head hash.

    Appends are serialised through the head row (``lock_head``), and ``prev_hash`` is unique:
    parallel runners (shards) extend one chain and never fork it. Each entry's before and
    after are made canonical once: that text is hashed (inside the body) and stored as it is.
    """
    prev, count = lock_head(session)
    key = audit_key()
    rows: list[dict[str, Any]] = []
    at, at_text = None, ""  # (a batch's entries share their instant: its text made once)
    for entry in entries:
        before_text, after_text = texts_of(entry)
        if entry.at is not at:
            at, at_text = entry.at, at_text_of(entry.at)
        digest = _digest(prev, _entry_body(entry, before_text, after_text, at_text), key)
        rows.append(
            {
                "run_id": entry.run_id,
                "at": entry.at,
                "actor": entry.actor,
                "reason": entry.reason,
                "target_type": entry.target_type,
                "target": entry.target,
                "before": before_text,
                "after": after_text,
                "prev_hash": prev,
                "entry_hash": digest,
            }
        )
        prev = digest
    count += len(entries)
    # On SQLite, straight to the driver (one executemany; a page of intents a statement a
    # row, for the seq its documents' index needs: ``insert_indexed``); else through Core.
    pages = any(entry.target_type == AuditKind.PAYLOAD_PAGE for entry in entries)
    if rows and (pages or not insert_through_driver(session, LOG, rows, as_is=_AS_IS)):
        insert_indexed(session, rows, entries, as_is=_AS_IS, core=_core_rows)
    move_head(session, prev, count)
    anchor_after_commit(session, count, prev, key)
    return prev


def verify(engine: Engine, *, batch_size: int = 1000) -> Verification:
    """Recompute every hash in order; report each break, each run whose head is gone, an end
    cut off the chain, and every entry that cannot be read (by its ``seq``, never a crash)."""
    walk = ChainWalk(engine, batch_size=batch_size)
    for _entry in walk:
        pass
    return walk.verification


class ChainWalk:
    """The whole chain, streamed in order and verified on the way: iterate it once; its
    ``verification`` is complete when the iteration ends (``verify`` is this walk, with
    nothing done with the entries).

    Each ``ChainedEntry`` comes with its ``seq`` and hashes; one that cannot be read comes with
    ``entry=None`` (and is a problem). Memory: the runs' heads (one per run) and where the
    chain's head was met, never a set of every entry. ``last_seq`` is the last entry walked: a
    reader that goes back to the log for some of its entries (``entries_about``) stops there,
    so what it reads is what was verified.
    """

    def __init__(self, engine: Engine, *, batch_size: int = 1000) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self._result = ProtectedVerification()
        self.verification: Verification = self._result
        self.last_seq = 0

    def __iter__(self) -> Iterator[ChainedEntry]:
        result = self._result
        prev = GENESIS
        key = audit_key()
        anchor, where = anchor_of(result, key)
        keyed_from: int | None = None
        unkeyed_after: list[int] = []
        raw = [
            type_coerce(column, Text()) if column.key in _PARSED else column for column in _COLUMNS
        ]
        with Session(self.engine) as session, Session(self.engine) as index_session:
            head = session.get(AuditHeadRow, 1)  # read first: later appends come after it
            run_heads: dict[str, str] = {}
            for run_id, counts in session.execute(select(RunRow.run_id, RunRow.counts)):
                run_head = counts.get("audit_head") if isinstance(counts, dict) else None
                if run_head:
                    run_heads[run_head] = run_id
            found_heads: set[str] = set()
            head_position: int | None = None
            rows = session.execute(
                select(*raw).order_by(AuditRow.seq).execution_options(yield_per=self.batch_size)
            )
            index = IndexWalk(index_session, batch_size=self.batch_size)  # (after: it sees more)
            for values in rows:
                row = dict(zip((c.key for c in _COLUMNS), values, strict=True))
                result.entries += 1
                seq, entry_hash = row["seq"], row["entry_hash"]
                self.last_seq = seq
                if row["prev_hash"] != prev:
                    result.problems.append(
                        f"entry {seq}: links to {str(row['prev_hash'])[:12]}, but the entry "
                        f"before it hashes to {prev[:12]} (an entry was removed or reordered)"
                    )
                entry: AuditEntry | None
                try:
                    entry = _parse(row)
                except (ValueError, TypeError) as exc:
                    result.problems.append(f"entry {seq}: cannot be read ({exc}); altered")
                    entry = None
                else:
                    keyed = _keying(
                        row["prev_hash"], entry, entry_hash, key, keyed_first=bool(keyed_from)
                    )
                    if keyed is None:
                        result.problems.append(
                            f"entry {seq} (run {entry.run_id}, {entry.target_type} "
                            f"{entry.target}): content does not match its hash (altered"
                            + (")" if key else ", or keyed under a key this process lacks)")
                        )
                    elif keyed and keyed_from is None:
                        keyed_from = seq
                    elif not keyed and keyed_from is not None:
                        unkeyed_after.append(seq)
                if anchor and result.entries == anchor.entries and entry_hash != anchor.head:
                    result.problems.append(
                        f"entry {seq}, number {anchor.entries}, hashes to {entry_hash[:12]} "
                        f"but {where} anchored {anchor.head[:12]} there at {anchor.at}: "
                        "the chain was rewritten up to it"
                    )
                prev = entry_hash
                if entry_hash in run_heads:
                    found_heads.add(entry_hash)
                if head is not None and entry_hash == head.entry_hash:
                    head_position = result.entries
                index.check(seq, entry, result.problems)
                # (a page's documents, each as its own intent, verified as one entry)
                for part in readable_parts(entry, seq, result.problems):
                    yield ChainedEntry(seq, entry_hash, row["prev_hash"], part)
            for run_head, run_id in sorted(run_heads.items(), key=lambda item: item[1]):
                if run_head not in found_heads:
                    result.problems.append(
                        f"run {run_id}: its last audit entry {run_head[:12]} is missing "
                        "(entries removed)"
                    )
            index.finish(self.last_seq, result.problems)
            say_protection(result, key, keyed_from, unkeyed_after, anchor, where)
            if head is None:
                result.problems.append("the chain's head record is missing (table audit_head)")
            elif head.entries and head_position != head.entries:
                result.problems.append(
                    f"the chain's head is entry {head.entry_hash[:12]}, number {head.entries}, "
                    "but "
                    + (
                        f"that entry is number {head_position}"
                        if head_position is not None
                        else "the log no longer holds it"
                    )
                    + " (entries were removed from the end, with or without their runs)"
                )


def entries_about(
    engine: Engine, targets: Iterable[str], *, upto: int, after: int = 0, chunk: int = 500
) -> Iterator[ChainedEntry]:
    """Every entry whose target is one of ``targets`` (documents, runs), after ``seq``
    ``after`` and up to ``upto``, streamed in order within each group of ``chunk`` targets (one
    group: in chain order). Each is checked against its own hash again on the way (a walk of
    the whole chain has verified the links): one altered since comes as ``entry=None``."""
    wanted = sorted(set(targets))
    raw = [type_coerce(column, Text()) if column.key in _PARSED else column for column in _COLUMNS]
    key = audit_key()
    with Session(engine) as session:
        for first in range(0, len(wanted), chunk):
            group = wanted[first : first + chunk]
            rows = session.execute(
                select(*raw)
                .where(about(group), AuditRow.seq > after, AuditRow.seq <= upto)
                .order_by(AuditRow.seq)
                .execution_options(yield_per=1000)
            )
            asked = set(group)
            for values in rows:
                row = dict(zip((c.key for c in _COLUMNS), values, strict=True))
                entry: AuditEntry | None
                try:
                    entry = _parse(row)
                except (ValueError, TypeError):
                    entry = None
                if (
                    entry is not None
                    and _keying(row["prev_hash"], entry, row["entry_hash"], key) is None
                ):
                    entry = None
                for part in readable_parts(entry, row["seq"], [], asked):
                    yield ChainedEntry(row["seq"], row["entry_hash"], row["prev_hash"], part)


#: The columns verify reads, in order; those in ``_PARSED`` are read raw and parsed here, so
#: one unreadable entry is named instead of failing the walk.
_COLUMNS = (
    AuditRow.seq,
    AuditRow.run_id,
    AuditRow.at,
    AuditRow.actor,
    AuditRow.reason,
    AuditRow.target_type,
    AuditRow.target,
    AuditRow.before,
    AuditRow.after,
    AuditRow.prev_hash,
    AuditRow.entry_hash,
)
_PARSED = frozenset({"at", "before", "after"})


def _parse(row: dict[str, Any]) -> AuditEntry:
    at = row["at"]
    if not isinstance(at, datetime):
        at = datetime.fromisoformat(str(at))
    return AuditEntry(
        run_id=row["run_id"],
        at=at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC),
        actor=row["actor"],
        reason=row["reason"],
        target_type=row["target_type"],
        target=row["target"],
        before=_json(row["before"], "before"),
        after=_json(row["after"], "after"),
    )


def _json(value: Any, name: str) -> Any:
    if not isinstance(value, str):
        return value  # PostgreSQL's driver hands JSONB over parsed
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not JSON: {exc}") from None


class SqlAuditLog:
    """The audit repository: appends in their own transaction, reads, and the chain's walk."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def append_audit(self, entries: Sequence[AuditEntry]) -> str:
        """Append audit entries in their own transaction; return the new head hash."""
        if not entries:
            return ""
        with self._sessions.begin() as session:
            return append(session, entries)

    def audit_entries(
        self, *, run_id: str | None = None, target: str | None = None, limit: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """Audit entries, oldest first, optionally for one run or one target (doc id)."""
        return show(self.engine, run_id=run_id, target=target, limit=limit)

    def verify_audit(self, *, batch_size: int = 1000) -> Verification:
        """Walk the chain (see ``verify``)."""
        return verify(self.engine, batch_size=batch_size)

    def walk_audit(self, *, batch_size: int = 1000) -> ChainWalk:
        """The whole chain, streamed and verified on the way (see ``ChainWalk``)."""
        return ChainWalk(self.engine, batch_size=batch_size)

    def audit_entries_about(
        self, targets: Iterable[str], *, upto: int, after: int = 0
    ) -> Iterator[ChainedEntry]:
        """The entries about ``targets`` after ``seq`` ``after``, up to ``upto``, each checked
        against its hash (see ``entries_about``)."""
        return entries_about(self.engine, targets, upto=upto, after=after)

    def audit_targets(self, *, kinds: Iterable[str], upto: int) -> Iterator[str]:
        """Every target of an entry of one of ``kinds`` up to ``upto``, once each, in order."""
        kinds = sorted(set(kinds))
        targets = select(AuditRow.target.label("target")).where(
            AuditRow.target_type.in_(kinds), AuditRow.seq <= upto
        )
        if AuditKind.PAYLOAD in kinds:  # (and the documents of the pages of intents)
            paged = select(DOCUMENTS.c.target.label("target")).where(DOCUMENTS.c.seq <= upto)
            found = union(targets, paged).subquery()  # (UNION: each once)
        else:
            found = targets.distinct().subquery()
        with Session(self.engine) as session:
            yield from session.scalars(
                select(found.c.target).order_by(found.c.target).execution_options(yield_per=1000)
            )

    def run_entries_with_hashes(self, run_id: str) -> tuple[list[AuditEntry], list[str]]:
        """Every entry of one run, in order, with each entry's own hash."""
        return run_entries_with_hashes(self.engine, run_id)

    def runs_touching_after(self, entry_hash: str, targets: set[str], *, exclude: str) -> list[str]:
        """Runs other than ``exclude`` that wrote one of ``targets`` after ``entry_hash``."""
        return runs_touching_after(self.engine, entry_hash, targets, exclude=exclude)

    def run_documents(
        self, run_ids: Collection[str], *, after: str | None = None, limit: int = 1000
    ) -> list[str]:
        """The documents ``run_ids`` wrote or moved, a page (see the port)."""
        return run_documents(self.engine, run_ids, after=after, limit=limit)

    def run_entries_of(
        self, run_id: str, *, kinds: Collection[str], targets: Collection[str] | None = None
    ) -> list[AuditEntry]:
        """One run's entries of ``kinds``, those about ``targets`` if given (see the port)."""
        return run_entries_of(self.engine, run_id, kinds=kinds, targets=targets)

    def runs_touching_run(self, run_id: str) -> list[str]:
        """Runs after ``run_id`` began that wrote a document it wrote (see the port)."""
        return runs_touching_run(self.engine, run_id)
