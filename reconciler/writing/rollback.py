"""Roll a run back from its audit entries: a pointer flip, no re-index.

- **By key**: each row gets back the before-values of the fields the run changed, and only
  those; a field another run changed since is not touched by this rollback.
- **Derived**: chunk payloads are then written from the restored row with ``payload_for``,
  so rows and chunks agree (chunks of a document without a row get back the keys the run
  changed on them).
- **Guarded**: a later run that changed the same documents (and was not rolled back itself)
  makes the rollback refuse (``RollbackRefused``, exit 3), naming it; ``cascade`` rolls those
  back first, newest first.
- An **interrupted** run (its process died) is rolled back from its intents: every point it
  may have written is set from the restored rows.
- **Moves back**: in a split store, the points the run moved from one collection to the other
  go back where they were (audited as any move, ``moving``), those it put there that are
  still there; one that has moved again since is left and listed.

It runs as a new audited run by actor ``rollback``, under the lease of the rolled-back run's
shard (the caller takes it). ``dry_run`` runs the same code on stores whose writes stay in
memory (``dry``), so it reports exactly what the real rollback would do, cascade included;
nothing is written. Re-ingest requests and payload indexes are not undone (neither changes
what retrieval returns); they are listed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.errors import ReconcilerError, RollbackRefused
from reconciler.model import (
    MANAGED_KEYS,
    AuditEntry,
    AuditKind,
    RowChange,
    RunMode,
    RunStatus,
    fields_from_json,
    jsonable,
)
from reconciler.payload import payload_for
from reconciler.ports import ChunkIndex, DocumentTable
from reconciler.rules.rekeying import RekeyPair, RekeyPlan
from reconciler.writing.applying import Applier
from reconciler.writing.declaring import undo_declarations
from reconciler.writing.dry import dry_stores, is_dry
from reconciler.writing.rekeying import apply_rekey
from reconciler.writing.runs import recorded

ROLLBACK = RunMode.ROLLBACK


@dataclass
class RollbackResult:
    """What a rollback restored (or, dry, would restore)."""

    run_id: str | None
    rolled_back: str
    rows: int = 0
    payload_groups: int = 0
    points: int = 0
    #: Declarations revoked (made by the run) or restored (revoked by it).
    declarations: int = 0
    dry_run: bool = False
    cascaded: list[dict[str, Any]] = field(default_factory=list)
    not_undone: list[dict[str, Any]] = field(default_factory=list)
    #: Points moved back between the collections of a split store (``None``: not one).
    moves: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data for output."""
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "rolled_back": self.rolled_back,
            "dry_run": self.dry_run,
            "rows": self.rows,
            "payload_writes": self.payload_groups,
            "points": self.points,
            "declarations": self.declarations,
            "cascaded": self.cascaded,
            "not_undone": self.not_undone,
        }
        if self.moves is not None:
            data["moves"] = self.moves
        return data


def rollback(
    *,
    table: DocumentTable,
    index: ChunkIndex,
    run_id: str,
    batch_points: int = 256,
    cascade: bool = False,
    dry_run: bool = False,
    keep_writing: Callable[[], None] | None = None,
    shard: str = "0/1",
    _handled: set[str] | None = None,
) -> RollbackResult:
    """Restore what run ``run_id`` changed (see the module docstring); the rollback is
    recorded as a run of ``shard``, the shard whose lease the caller holds."""
    if dry_run and not is_dry(table):  # the same code as the real rollback, on dry stores
        table, index = dry_stores(table, index)
    handled = _handled if _handled is not None else set()
    handled.add(run_id)  # a cascade never comes back to a run it is already undoing
    run = table.get_run(run_id)
    if run is None:
        raise ReconcilerError(f"no run {run_id!r} (see `reconciler status` for recent runs)")
    if run.status == RunStatus.RUNNING:
        raise ReconcilerError(
            f"run {run_id} is still running (or died without its lease being taken since): "
            "wait for it to end, or run `reconciler rollback` again once its lease is free"
        )
    entries, hashes = table.run_entries_with_hashes(run_id)
    rekeys = [e for e in entries if e.target_type == AuditKind.REKEY]
    if rekeys:  # (issue 34: a re-keying is undone by its pairs swapped, nothing else)
        return rekey_back(table, index, run_id, rekeys, hashes[0], dry_run=dry_run, shard=shard)
    writes = [
        e
        for e in entries
        if e.target_type
        in (AuditKind.ROW, AuditKind.PAYLOAD, AuditKind.DECLARATION, AuditKind.MOVE)
    ]
    if not writes:
        raise ReconcilerError(
            f"run {run_id} wrote no rows, payloads or declarations and moved no points: "
            "nothing to roll back"
        )
    later = [
        other
        for other in later_runs(
            table,
            run_id,
            first_hash=hashes[0],
            targets={e.target for e in writes if e.target_type != AuditKind.DECLARATION},
        )
        if other not in handled
    ]
    if later and not cascade:
        raise RollbackRefused(run_id, later)
    cascaded = []
    for other in later:
        if other in handled:  # undone (or being undone) further up or earlier in this cascade
            continue
        cascaded.append(
            rollback(
                table=table,
                index=index,
                run_id=other,
                batch_points=batch_points,
                cascade=True,
                dry_run=dry_run,
                keep_writing=keep_writing,
                shard=shard,
                _handled=handled,
            ).to_json()
        )
    changes, skipped = _row_changes(table, run_id, entries)
    points = _points_by_doc(e for e in entries if e.target_type == AuditKind.PAYLOAD)
    result = RollbackResult(run_id=None, rolled_back=run_id, dry_run=dry_run, cascaded=cascaded)
    result.not_undone = [
        {"target_type": e.target_type, "target": e.target, "after": e.after}
        for e in entries
        if e.target_type in ("reingest", "index")
    ] + skipped
    now = datetime.now(UTC)
    revoked, restored = _declarations_undone(entries)
    with recorded(table, mode=ROLLBACK, actor=ROLLBACK, shard=shard) as record:
        result.run_id = record.run_id
        applier = Applier(
            table=table,
            index=index,
            run_id=record.run_id,
            actor=ROLLBACK,
            batch_points=batch_points,
            keep_writing=keep_writing,
        )
        # Declarations first: killed after this, the next run no longer reads them (a run
        # would otherwise write their effect again over the rows restored below).
        declared_head = undo_declarations(
            table,
            run_id=record.run_id,
            actor=ROLLBACK,
            at=now,
            revoked=revoked,
            restored=restored,
            reason=f"rollback of run {run_id}",
        )
        result.declarations = len(revoked) + len(restored)
        head, _queued = table.write_rows_and_outbox(
            run_id=record.run_id, actor=ROLLBACK, changes=changes, reingests=[], at=now
        )
        applier.result.audit_head = head or declared_head
        result.rows = len(changes)
        rows = table.get_documents(points)
        applier.write_groups(
            (
                (
                    doc_id,
                    ids,
                    payload_for(rows[doc_id]) if doc_id in rows else restored,
                    f"rollback of run {run_id}",
                )
                for doc_id, (ids, restored) in points.items()
            ),
        )
        result.payload_groups = applier.result.payload_writes
        result.points = applier.result.points
        head = applier.result.audit_head
        if applier.mover is not None:
            moves = [e for e in entries if e.target_type == AuditKind.MOVE]
            result.moves, left = _move_back(applier, moves, run_id)
            result.not_undone += left
            head = applier.mover.audit_head or head
        record.counts = {
            "declarations": result.declarations,
            "table": result.rows,
            "payload": result.payload_groups,
            "points": result.points,
            "audit_head": head,
            "rolled_back": run_id,
        }
        if result.moves is not None:
            record.counts["moves"] = result.moves
        record.stats = {
            "rows_written": result.rows,
            "payload_writes": result.payload_groups,
            "points_written": result.points,
        }
    if dry_run:
        result.run_id = None  # recorded only in the dry stores
    return result


def rekey_back(
    table: DocumentTable,
    index: ChunkIndex,
    run_id: str,
    intents: list[AuditEntry],
    first_hash: str,
    *,
    dry_run: bool,
    shard: str,
) -> RollbackResult:
    """Roll back a re-keying: its pairs swapped, written by the same writer
    (``writing.rekeying``); refused when a later run wrote the new ids' rows or chunks."""
    pairs = [RekeyPair.from_json(p) for intent in intents for p in intent.after["pairs"]]
    later = later_runs(table, run_id, first_hash=first_hash, targets={p.new_id for p in pairs})
    if later:
        raise RollbackRefused(run_id, later)
    plan = RekeyPlan(tuple(pairs)).swapped()
    result = RollbackResult(run_id=None, rolled_back=run_id, dry_run=dry_run)
    if dry_run:  # (what the intents name: the dry stores hold no re-keying)
        result.rows = len(pairs)
        result.points = sum(len(held) for i in intents for held in i.before["points"].values())
        return result
    with recorded(table, mode=ROLLBACK, actor=ROLLBACK, shard=shard) as record:
        result.run_id = record.run_id
        written = apply_rekey(
            table, index, plan, run_id=record.run_id, actor=ROLLBACK, now=lambda: datetime.now(UTC)
        )
        result.rows, result.points = written.rows, written.points
        record.counts = {
            "table": written.rows,
            "points": written.points,
            "audit_head": written.audit_head,
            "rolled_back": run_id,
        }
        record.stats = {"rows_written": written.rows, "points_written": written.points}
    return result


def _move_back(
    applier: Applier, intents: list[AuditEntry], run_id: str
) -> tuple[int, list[dict[str, Any]]]:
    """Move the points of a run's ``move`` intents back to the collection they left, where
    they are still in the one it put them in; return how many moved, and the others."""
    mover = applier.mover
    assert mover is not None
    main, archive = mover.split.collections
    moved = 0
    left: list[dict[str, Any]] = []
    for back_to_archive in (True, False):  # (what the run served stops first)
        leave, went = (archive, main) if back_to_archive else (main, archive)
        going = [e for e in intents if (e.before.get("from"), e.after.get("to")) == (leave, went)]
        groups = [(e.target, list(e.before["points"])) for e in going]
        done = mover.move_points(
            groups, to_archive=back_to_archive, reason=f"rollback of run {run_id}"
        )
        mover.finish()
        moved += len(done)
        back = {str(p) for p in done}
        for doc_id, ids in groups:
            stayed = [p for p in ids if str(p) not in back]
            if stayed:
                left.append(
                    {
                        "target_type": AuditKind.MOVE,
                        "target": doc_id,
                        "after": {"moved_since": stayed},
                    }
                )
    return moved, left


def _declarations_undone(entries: Iterable[AuditEntry]) -> tuple[list[str], list[str]]:
    """The declarations a run made or restored (to revoke) and those it revoked (to restore),
    each as the run last left it."""
    last: dict[str, bool] = {}
    for entry in entries:
        if entry.target_type == AuditKind.DECLARATION:
            last[entry.target] = entry.after is not None and entry.after.get("revoked_at") is None
    return (
        sorted(d for d, active in last.items() if active),
        sorted(d for d, active in last.items() if not active),
    )


def _row_changes(
    table: DocumentTable, run_id: str, entries: list[AuditEntry]
) -> tuple[list[RowChange], list[dict[str, Any]]]:
    """Each row field the run changed, back to its before-value, when the row still holds
    what the run wrote; a field changed since outside any rolled-back run (by hand, by an
    ingestion) is left as it is and listed. ``before`` is what the row holds now."""
    rows = table.get_documents({e.target for e in entries if e.target_type == AuditKind.ROW})
    changes: list[RowChange] = []
    skipped: list[dict[str, Any]] = []
    restored: dict[str, dict[str, Any]] = {}
    for entry in reversed(entries):
        if entry.target_type != AuditKind.ROW:
            continue
        row = rows.get(entry.target)
        if row is None:
            skipped.append(
                {"target_type": AuditKind.ROW, "target": entry.target, "after": "no row now"}
            )
            continue
        written, back = fields_from_json(entry.after), fields_from_json(entry.before)
        now = {**{f: getattr(row, f) for f in written}, **restored.get(entry.target, {})}
        ours = {f for f in written if jsonable(now[f]) == jsonable(written[f])}
        for field_name in sorted(set(written) - ours):
            skipped.append(
                {
                    "target_type": AuditKind.ROW,
                    "target": entry.target,
                    "after": {field_name: jsonable(now[field_name]), "changed_since": True},
                }
            )
        if ours:
            changes.append(
                RowChange(
                    doc_id=entry.target,
                    reason=f"rollback of run {run_id}",
                    before={f: now[f] for f in ours},
                    after={f: back[f] for f in ours},
                )
            )
            restored.setdefault(entry.target, {}).update({f: back[f] for f in ours})
    return changes, skipped


def _points_by_doc(
    intents: Iterable[AuditEntry],
) -> dict[str, tuple[list[Any], dict[str, Any]]]:
    """doc id -> (every point the run wrote or meant to write, the keys it changed on them
    with their before-values: what a document without a row gets back)."""
    found: dict[str, tuple[list[Any], dict[str, Any]]] = defaultdict(lambda: ([], {}))
    for intent in intents:
        ids, restored = found[intent.target]
        ids.extend(intent.before["points"])
        before, after = intent.before["payload"], intent.after["payload"]
        for key in MANAGED_KEYS:
            if key in after and before.get(key) != after.get(key):
                restored[key] = before.get(key)
    return dict(found)


def later_runs(
    table: DocumentTable, run_id: str, *, first_hash: str, targets: set[str]
) -> list[str]:
    """Runs after ``run_id`` that changed any of ``targets`` and still stand (newest first).

    A run that was rolled back does not stand, nor does the rollback that undid it.
    """
    touched = table.runs_touching_after(first_hash, targets, exclude=run_id)
    rollbacks = table.rollbacks()  # rollback run -> the run it rolled back
    undone = set(rollbacks.values())
    return [
        other for other in touched if other not in undone and rollbacks.get(other) not in touched
    ]
