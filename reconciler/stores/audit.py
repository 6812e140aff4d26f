"""The append-only, hash-chained audit log of every write (table, payload, index, re-ingest).

Each entry's hash covers its content and the previous entry's hash, so altering or removing
any entry breaks the chain from there on; each run also records the hash of its last entry,
so cutting entries off the end is caught too. ``verify`` walks the chain by streaming.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from reconciler.model import jsonable, rfc3339
from reconciler.stores.schema import AuditRow, RunRow

GENESIS = "0" * 64


@dataclass(frozen=True)
class AuditEntry:
    """One write, as recorded: who, why, what, before and after."""

    run_id: str
    at: datetime
    actor: str
    reason: str | None
    target_type: str
    target: str
    before: Any
    after: Any


def canonical(value: Any) -> str:
    """The JSON text that is hashed (sorted keys, no spaces; stable across JSON and JSONB)."""
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def entry_hash(prev_hash: str, entry: AuditEntry) -> str:
    """sha256 over the previous hash and the entry's content."""
    body = canonical(
        {
            "run_id": entry.run_id,
            "at": rfc3339(entry.at),
            "actor": entry.actor,
            "reason": entry.reason,
            "target_type": entry.target_type,
            "target": entry.target,
            "before": entry.before,
            "after": entry.after,
        }
    )
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()


def last_hash(session: Session) -> str:
    """The hash at the head of the chain (``GENESIS`` when empty)."""
    head = session.scalar(select(AuditRow.entry_hash).order_by(AuditRow.seq.desc()).limit(1))
    return head or GENESIS


def append(session: Session, entries: Sequence[AuditEntry]) -> str:
    """Append entries inside the caller's transaction; return the new head hash."""
    prev = last_hash(session)
    for entry in entries:
        digest = entry_hash(prev, entry)
        session.add(
            AuditRow(
                run_id=entry.run_id,
                at=entry.at,
                actor=entry.actor,
                reason=entry.reason,
                target_type=entry.target_type,
                target=entry.target,
                before=jsonable(entry.before),
                after=jsonable(entry.after),
                prev_hash=prev,
                entry_hash=digest,
            )
        )
        prev = digest
    session.flush()
    return prev


def _entry(row: AuditRow) -> AuditEntry:
    return AuditEntry(
        run_id=row.run_id,
        at=row.at,
        actor=row.actor,
        reason=row.reason,
        target_type=row.target_type,
        target=row.target,
        before=row.before,
        after=row.after,
    )


@dataclass
class Verification:
    """The result of walking the chain."""

    entries: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the chain is intact."""
        return not self.problems


def verify(engine: Engine, *, batch_size: int = 1000) -> Verification:
    """Recompute every hash in order; report each break and each run whose head is gone."""
    result = Verification()
    prev = GENESIS
    seen_heads: set[str] = set()
    with Session(engine) as session:
        rows = session.execute(
            select(AuditRow).order_by(AuditRow.seq).execution_options(yield_per=batch_size)
        ).scalars()
        for row in rows:
            result.entries += 1
            if row.prev_hash != prev:
                result.problems.append(
                    f"entry {row.seq}: links to {row.prev_hash[:12]}, but the entry before it "
                    f"hashes to {prev[:12]} (an entry was removed or reordered)"
                )
            digest = entry_hash(row.prev_hash, _entry(row))
            if digest != row.entry_hash:
                result.problems.append(
                    f"entry {row.seq} (run {row.run_id}, {row.target_type} {row.target}): "
                    "content does not match its hash (altered)"
                )
            prev = row.entry_hash
            seen_heads.add(row.entry_hash)
            session.expunge(row)
        for run_id, counts in session.execute(select(RunRow.run_id, RunRow.counts)):
            head = (counts or {}).get("audit_head")
            if head and head not in seen_heads:
                result.problems.append(
                    f"run {run_id}: its last audit entry {head[:12]} is missing (entries removed)"
                )
    return result


def show(
    engine: Engine, *, run_id: str | None = None, target: str | None = None, limit: int = 1000
) -> Iterator[dict[str, Any]]:
    """Audit entries, oldest first, optionally for one run or one target (doc id)."""
    stmt = select(AuditRow).order_by(AuditRow.seq)
    if run_id is not None:
        stmt = stmt.where(AuditRow.run_id == run_id)
    if target is not None:
        stmt = stmt.where(AuditRow.target == target)
    with Session(engine) as session:
        for row in session.scalars(stmt.limit(limit)):
            yield {
                "seq": row.seq,
                "run_id": row.run_id,
                "at": rfc3339(row.at),
                "actor": row.actor,
                "reason": row.reason,
                "target_type": row.target_type,
                "target": row.target,
                "before": row.before,
                "after": row.after,
                "entry_hash": row.entry_hash,
            }


def run_entries(engine: Engine, run_id: str) -> list[AuditEntry]:
    """Every entry of one run, in order (for rollback)."""
    with Session(engine) as session:
        rows = session.scalars(
            select(AuditRow).where(AuditRow.run_id == run_id).order_by(AuditRow.seq)
        )
        return [_entry(row) for row in rows]
