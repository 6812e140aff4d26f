"""Roll a run back from its audit entries: a pointer flip, no re-index.

Restores the before-values of every row and payload the run wrote, exactly (a key that was
absent is removed again), as a new audited run by actor ``rollback``. Re-ingest requests and
payload indexes are not undone (neither changes what retrieval returns); they are listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.applying import Applier, restore_payload
from reconciler.errors import ReconcilerError
from reconciler.ports import ChunkIndex
from reconciler.stores import audit
from reconciler.stores.sql import RowChange, SqlDocumentTable, fields_from_json


@dataclass
class RollbackResult:
    """What a rollback restored."""

    run_id: str
    rolled_back: str
    rows: int = 0
    payload_groups: int = 0
    points: int = 0
    not_undone: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain data for output."""
        return {
            "run_id": self.run_id,
            "rolled_back": self.rolled_back,
            "rows": self.rows,
            "payload_writes": self.payload_groups,
            "points": self.points,
            "not_undone": self.not_undone,
        }


def rollback(
    *, table: SqlDocumentTable, index: ChunkIndex, run_id: str, batch_points: int = 256
) -> RollbackResult:
    """Restore what run ``run_id`` changed; raise ReconcilerError if it wrote nothing."""
    entries = audit.run_entries(table.engine, run_id)
    if table.get_run(run_id) is None:
        raise ReconcilerError(f"no run {run_id!r} (see `reconciler status` for recent runs)")
    writes = [e for e in entries if e.target_type in ("row", "payload")]
    if not writes:
        raise ReconcilerError(f"run {run_id} wrote no rows or payloads: nothing to roll back")
    now = datetime.now(UTC)
    new_run = table.start_run(mode="rollback", actor="rollback")
    result = RollbackResult(run_id=new_run, rolled_back=run_id)
    reason = f"rollback of run {run_id}"
    try:
        changes = [
            RowChange(
                doc_id=e.target,
                reason=reason,
                before=fields_from_json(e.after),
                after=fields_from_json(e.before),
            )
            for e in reversed(entries)
            if e.target_type == "row"
        ]
        head, _queued = table.write_rows_and_outbox(
            run_id=new_run, actor="rollback", changes=changes, reingests=[], at=now
        )
        result.rows = len(changes)
        applier = Applier(
            table=table, index=index, run_id=new_run, actor="rollback", batch_points=batch_points
        )
        applier.result.audit_head = head
        applier.write_groups(
            (
                (
                    e.target,
                    list(e.before["points"]),
                    dict(e.after["payload"]),
                    restore_payload(e.before["payload"]),
                    reason,
                )
                for e in reversed(entries)
                if e.target_type == "payload"
            ),
            now=now,
        )
        result.payload_groups = applier.result.payload_writes
        result.points = applier.result.points
        result.not_undone = [
            {"target_type": e.target_type, "target": e.target, "after": e.after}
            for e in entries
            if e.target_type not in ("row", "payload", "run")
        ]
    except Exception as exc:
        table.finish_run(new_run, status="failed", error=str(exc))
        raise
    counts = {
        "table": result.rows,
        "payload": result.payload_groups,
        "points": result.points,
        "audit_head": applier.result.audit_head,
        "rolled_back": run_id,
    }
    table.finish_run(new_run, status="succeeded", counts=counts)
    return result
