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

It is planned and applied a page of documents at a time (``rollback_pages``: memory flat
however many points the run wrote): its steps first (the run ids in cascade order, their
declarations), then each page of documents by the pure fold (``rollback_documents``,
``rollback_plan``). Each step runs as a new audited run by actor ``rollback``, under the lease
of the rolled-back run's shard (the caller takes it), through the executor (``executing``).
``dry_run`` adds up the pages' plans: what the real rollback would do, cascade included;
nothing is written. Re-ingest requests and payload indexes are not undone (neither changes
what retrieval returns); they are listed. ``read_history`` reads a whole run at once, into
what ``rollback_plan.plan_rollback`` folds (the reference the pages are folded by; its
memory grows with the run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from reconciler.errors import RollbackRefused
from reconciler.model import AuditEntry, AuditKind, RunMode, RunStatus
from reconciler.ports import ChunkIndex, DocumentTable, split_of
from reconciler.rules.rekeying import RekeyPair, RekeyPlan
from reconciler.writing.applying import Applier
from reconciler.writing.executing import execute
from reconciler.writing.recovery import ResolutionPlan
from reconciler.writing.rekeying import Rekeying
from reconciler.writing.rollback_inputs import RollbackInputs, RunHistory
from reconciler.writing.rollback_pages import (
    PAGE_DOCUMENTS,
    PagedUndo,
    StepCounts,
    StepPlan,
    dry_counts,
    plan_steps,
    read_points,
    standing,
)
from reconciler.writing.rollback_plan import UNDONE, RollbackPlan
from reconciler.writing.runs import recorded

ROLLBACK = RunMode.ROLLBACK
__all__ = [
    "ROLLBACK",
    "RollbackResult",
    "apply_rollback",
    "later_runs",
    "read_history",
    "rollback",
]


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

    @classmethod
    def planned(cls, plan: RollbackPlan) -> RollbackResult:
        """What ``plan`` would restore: a dry run's output."""
        return cls(
            run_id=None,
            rolled_back=plan.rolled_back,
            rows=len(plan.rows),
            payload_groups=len(plan.payloads),
            points=sum(len(g.point_ids) for g in plan.payloads),
            declarations=len(plan.revoked) + len(plan.restored),
            dry_run=True,
            cascaded=[cls.planned(c).to_json() for c in plan.cascaded],
            not_undone=[dict(n) for n in plan.not_undone],
            moves=None if plan.moves is None else sum(len(m.moving) for m in plan.moves),
        )

    @classmethod
    def counted(
        cls, step: StepPlan, counts: Mapping[str, StepCounts], *, split: bool
    ) -> RollbackResult:
        """What ``step`` (cascade included) would restore, its pages counted: a dry run's."""
        mine = counts[step.rolled_back]
        return cls(
            run_id=None,
            rolled_back=step.rolled_back,
            rows=mine.rows,
            payload_groups=mine.payload_groups,
            points=mine.points,
            declarations=len(step.revoked) + len(step.restored),
            dry_run=True,
            cascaded=[cls.counted(c, counts, split=split).to_json() for c in step.cascaded],
            not_undone=[dict(n) for n in mine.not_undone],
            moves=mine.moves if split else None,
        )

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
    resolving: Sequence[ResolutionPlan] = (),
    page_documents: int = PAGE_DOCUMENTS,
) -> RollbackResult:
    """Restore what run ``run_id`` changed (see the module docstring); the rollback is
    recorded as a run of ``shard``, the shard whose lease the caller holds. ``dry_run``: the
    plan, rendered; ``resolving``: the dead runs a dry run's real runner would resolve first
    (planned as resolved); ``page_documents``: documents planned and applied at once."""
    run = table.get_run(run_id)
    # (a dead run a dry run's runner would resolve first is read as ended: a killed re-keying
    # is then rolled back by its pairs swapped, as the real rollback, which resolves it, does)
    dead = {p.run_id for p in resolving}
    ended = run is not None and (run.status != RunStatus.RUNNING or run_id in dead)
    if ended and table.run_entries_of(run_id, kinds=[AuditKind.REKEY]):
        # (issue 34: a re-keying is undone by its pairs swapped, nothing else)
        entries, hashes = table.run_entries_with_hashes(run_id)
        rekeys = [e for e in entries if e.target_type == AuditKind.REKEY]
        return rekey_back(table, index, run_id, rekeys, hashes[0], dry_run=dry_run, shard=shard)
    plan = plan_steps(table, run_id, cascade=cascade, resolving=resolving)
    if dry_run:
        counts = dry_counts(
            table,
            index,
            plan,
            page_size=page_documents,
            batch_points=batch_points,
            resolving=resolving,
        )
        return RollbackResult.counted(plan, counts, split=split_of(index) is not None)
    return apply_rollback(
        plan,
        table=table,
        index=index,
        batch_points=batch_points,
        keep_writing=keep_writing,
        shard=shard,
        page_documents=page_documents,
    )


def apply_rollback(
    plan: StepPlan,
    *,
    table: DocumentTable,
    index: ChunkIndex,
    batch_points: int = 256,
    keep_writing: Callable[[], None] | None = None,
    shard: str = "0/1",
    page_documents: int = PAGE_DOCUMENTS,
) -> RollbackResult:
    """Apply each step of ``plan`` (the cascaded ones first, newest first) as its own
    recorded ``rollback`` run, a page of documents at a time, through the executor; what
    each restored."""
    done: dict[str, RollbackResult] = {}
    for step in plan.steps():
        with recorded(table, mode=ROLLBACK, actor=ROLLBACK, shard=shard) as record:
            applier = Applier(
                table=table,
                index=index,
                run_id=record.run_id,
                actor=ROLLBACK,
                batch_points=batch_points,
                keep_writing=keep_writing,
            )
            left: list[Mapping[str, Any]] = list(step.listed)
            paged = PagedUndo(step, left.extend, page_documents, batch_points)
            written = execute(paged, applier)
            result = RollbackResult(
                run_id=record.run_id,
                rolled_back=step.rolled_back,
                rows=written.rows,
                payload_groups=written.payload_writes,
                points=written.points,
                declarations=len(step.revoked) + len(step.restored),
                cascaded=[done[c.rolled_back].to_json() for c in step.cascaded],
                not_undone=[dict(n) for n in left],
                moves=None if applier.mover is None else written.moves,
            )
            record.counts = {
                "declarations": result.declarations,
                "table": result.rows,
                "payload": result.payload_groups,
                "points": result.points,
                "audit_head": written.audit_head,
                "rolled_back": step.rolled_back,
            }
            if result.moves is not None:
                record.counts["moves"] = result.moves
            record.stats = {
                "rows_written": result.rows,
                "payload_writes": result.payload_groups,
                "points_written": result.points,
            }
        done[step.rolled_back] = result
    return done[plan.rolled_back]


def read_history(
    table: DocumentTable,
    index: ChunkIndex,
    run_id: str,
    *,
    cascade: bool = False,
    resolving: Sequence[ResolutionPlan] = (),
) -> RollbackInputs:
    """Read what the rollback of ``run_id`` looks at (reads only). ``resolving``: the dead
    runs the rollback's runner would resolve first (a dry run's: the stores still hold them
    as they were), read as resolved."""
    runs: dict[str, RunHistory] = {}
    resolved = {p.run_id: p for p in resolving}
    _read_run(table, run_id, runs, resolved, cascade=cascade)
    entries = [e for run in runs.values() for e in run.entries]
    targets = {e.target for e in entries if e.target_type in (AuditKind.ROW, AuditKind.PAYLOAD)}
    ids = [
        p
        for e in entries
        if e.target_type in (AuditKind.PAYLOAD, AuditKind.MOVE)
        for p in e.before["points"]
    ]
    decl_ids = {e.target for e in entries if e.target_type == AuditKind.DECLARATION}
    declarations = (
        {d.id: d.revoked_at is None for d in table.declarations(active=False, ids=decl_ids)}
        if decl_ids
        else {}
    )
    split = split_of(index)
    points = read_points(index, ids, resolving)
    return RollbackInputs(
        run_id=run_id,
        runs=MappingProxyType(runs),
        rows=MappingProxyType(table.get_documents(targets) if targets else {}),
        points=MappingProxyType(points),
        declarations=MappingProxyType(declarations),
        collections=None if split is None else split.collections,
        cascade=cascade,
    )


def _read_run(
    table: DocumentTable,
    run_id: str,
    runs: dict[str, RunHistory],
    resolved: Mapping[str, ResolutionPlan],
    *,
    cascade: bool,
) -> None:
    """Read one run (and, with ``cascade``, the later runs it would undo first)."""
    run = table.get_run(run_id)
    if run is None:
        return
    status = run.status
    if run_id in resolved and status == RunStatus.RUNNING:
        status = RunStatus.INTERRUPTED
    entries, _hashes = table.run_entries_with_hashes(run_id)
    writes = [e for e in entries if e.target_type in UNDONE]
    later: list[str] = []
    if writes and status != RunStatus.RUNNING:
        later = standing(table, table.runs_touching_run(run_id))
    runs[run_id] = RunHistory(run_id, status, tuple(entries), tuple(later))
    for other in later if cascade else ():
        if other not in runs:
            _read_run(table, other, runs, resolved, cascade=cascade)


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
    """Roll back a re-keying: the plan of its pairs swapped (``writing.rekeying``), executed
    as any plan; refused when a later run wrote the new ids' rows or chunks."""
    pairs = [RekeyPair.from_json(p) for intent in intents for p in intent.after["pairs"]]
    later = later_runs(table, run_id, first_hash=first_hash, targets={p.new_id for p in pairs})
    if later:
        raise RollbackRefused(run_id, later)
    plan = RekeyPlan(tuple(pairs)).swapped()
    result = RollbackResult(run_id=None, rolled_back=run_id, dry_run=dry_run)
    if dry_run:  # (what the intents name)
        result.rows = len(pairs)
        result.points = sum(len(held) for i in intents for held in i.before["points"].values())
        return result
    with recorded(table, mode=ROLLBACK, actor=ROLLBACK, shard=shard) as record:
        result.run_id = record.run_id
        applier = Applier(table=table, index=index, run_id=record.run_id, actor=ROLLBACK)
        written = execute(Rekeying.planned(table, index, plan), applier)
        result.rows, result.points = written.rows, written.points
        record.counts = {
            "table": written.rows,
            "points": written.points,
            "audit_head": written.audit_head,
            "rolled_back": run_id,
        }
        record.stats = {"rows_written": written.rows, "points_written": written.points}
    return result


def later_runs(
    table: DocumentTable, run_id: str, *, first_hash: str, targets: set[str]
) -> list[str]:
    """Runs after ``run_id`` that changed any of ``targets`` and still stand (newest first).

    A run that was rolled back does not stand, nor does the rollback that undid it.
    """
    return standing(table, table.runs_touching_after(first_hash, targets, exclude=run_id))
