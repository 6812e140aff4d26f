"""A rollback, planned: a pure fold over what the stores hold, into a frozen plan.

``plan_rollback`` folds a ``RollbackInputs`` value (``rollback_inputs``: the audit entries of
the run and of the later runs a cascade undoes first, the rows and declarations they name, the
payload and collection of each point they wrote or moved, its points sharing their payloads)
into a ``RollbackPlan``: per run, newest first down a cascade, the declarations to revoke or
restore and, for the documents the inputs hold (``rollback_documents.plan_documents``), the
row fields to restore, the payload writes (grouped as the applier groups them), the points to
move back, what is left undone. It reads and writes no store. A rollback reads and folds its
documents a page at a time (``rollback_pages``: the inputs of one page, the same fold);
``rollback.read_history`` reads a whole run into one value (tests, the bench's reference).

A cascade is planned newest first against an ``Overlay``: an immutable value holding what the
steps planned before would have written (rows, payloads, where points are, declarations), over
the inputs. So the rollback of A after that of B reads the rows B's rollback restored, and a
point counts only when it would still differ: what ``--dry-run`` prints is what the executor
(``rollback.apply_rollback``) then writes. A dead run the rollback's runner would resolve
first (``recovery``) is planned as resolved: ``interrupted``, its unfinished moves finished.
The run-level checks (``runs_to_cascade``) and the documents' writes (``write_documents``) are
the paged rollback's too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.errors import ReconcilerError, RollbackRefused
from reconciler.model import AuditEntry, AuditKind, RowChange, RunStatus
from reconciler.writing.declaring import undo_declarations
from reconciler.writing.rollback_documents import (
    MoveBack,
    PayloadGroup,
    PayloadTargets,
    plan_documents,
)
from reconciler.writing.rollback_inputs import Overlay, RollbackInputs, RunHistory

if TYPE_CHECKING:
    from reconciler.writing.applying import Applier

__all__ = [
    "UNDONE",
    "MoveBack",
    "PayloadGroup",
    "RollbackPlan",
    "RunUndo",
    "declarations_undone",
    "fold",
    "left_listed",
    "plan_rollback",
    "runs_to_cascade",
    "undo_step_declarations",
    "write_documents",
]

#: Audit entries a rollback undoes.
UNDONE = (AuditKind.ROW, AuditKind.PAYLOAD, AuditKind.DECLARATION, AuditKind.MOVE)


@dataclass(frozen=True)
class RunUndo:
    """The rollback of one run, planned: what the executor writes, in this order, as one
    recorded ``rollback`` run (after the runs in ``cascaded``, each its own)."""

    rolled_back: str
    cascaded: tuple[RunUndo, ...]
    #: The declarations the run made or restored (to revoke) and those it revoked.
    revoked: tuple[str, ...]
    restored: tuple[str, ...]
    #: Of those, the ones not already as the rollback leaves them.
    declarations_changing: int
    rows: tuple[RowChange, ...]
    #: Every document's points the run wrote (or meant to), with what to set on them.
    payload_targets: PayloadTargets
    #: The payload writes the targets come to, given the points as the plan sees them.
    payloads: tuple[PayloadGroup, ...]
    #: A split store's moves back (``None``: one collection).
    moves: tuple[MoveBack, ...] | None
    not_undone: tuple[Mapping[str, Any], ...]

    @property
    def reason(self) -> str:
        """Why each write of this step is made (its audit entries' reason)."""
        return f"rollback of run {self.rolled_back}"

    @property
    def writes_nothing(self) -> bool:
        """Whether applying this step (cascade included) would change nothing."""
        return (
            not self.rows
            and not self.payloads
            and not self.declarations_changing
            and not any(m.moving for m in self.moves or ())
            and all(c.writes_nothing for c in self.cascaded)
        )

    def execute(self, applier: Applier) -> None:
        """The writes of this run's rollback (not its cascade's: ``steps``), in the order
        crash safety needs: declarations first (killed after them, the next run no longer
        reads them, so it does not write their effect again over the rows restored below),
        then rows, then the points from the restored rows (each re-read, written where it
        still differs), then a split store's moves back."""
        undo_step_declarations(applier, self.reason, self.revoked, self.restored)
        write_documents(applier, self.reason, self.rows, self.payload_targets, self.moves)

    def steps(self) -> list[RunUndo]:
        """This step and those it cascades to, in the order they are applied."""
        return [*(s for c in self.cascaded for s in c.steps()), self]


#: The plan of a rollback: the rolled-back run's step, its cascade inside.
RollbackPlan = RunUndo


# -- planning (pure) -------------------------------------------------------------------------


def plan_rollback(inputs: RollbackInputs, *, batch_points: int = 256) -> RollbackPlan:
    """The rollback of ``inputs.run_id``, cascade included (see the module docstring). Raises
    ``ReconcilerError`` when the run cannot be rolled back, ``RollbackRefused`` when later
    runs changed the same documents and ``inputs.cascade`` is not set."""
    return fold(inputs, Overlay(), batch_points=batch_points)[0]


def fold(
    inputs: RollbackInputs, overlay: Overlay, *, batch_points: int = 256
) -> tuple[RollbackPlan, Overlay]:
    """``plan_rollback`` over the stores as ``overlay`` says they are, and the overlay the
    plan leaves: folded again over that one, the plan of a rollback applied already."""
    plan, after, _handled = _plan_run(
        inputs, inputs.run_id, overlay, frozenset(), max(batch_points, 1)
    )
    return plan, after


def _plan_run(
    inputs: RollbackInputs,
    run_id: str,
    overlay: Overlay,
    handled: frozenset[str],
    batch_points: int,
) -> tuple[RunUndo, Overlay, frozenset[str]]:
    handled = handled | {run_id}  # a cascade never comes back to a run it is already undoing
    run = inputs.runs.get(run_id)
    writes = run is not None and any(e.target_type in UNDONE for e in run.entries)
    later = runs_to_cascade(run_id, run, writes=writes, cascade=inputs.cascade, handled=handled)
    assert run is not None
    cascaded = []
    for other in later:
        if other in handled:  # undone (or being undone) further up or earlier in this cascade
            continue
        undo, overlay, handled = _plan_run(inputs, other, overlay, handled, batch_points)
        cascaded.append(undo)
    entries = run.entries
    revoked, restored = declarations_undone(entries)
    changing = [d for d in revoked if overlay.active(inputs, d) is True] + [
        d for d in restored if overlay.active(inputs, d) is False
    ]
    overlay = overlay.written(
        declarations={**dict.fromkeys(revoked, False), **dict.fromkeys(restored, True)}
    )
    documents, overlay = plan_documents(inputs, run_id, entries, overlay, batch_points)
    undo = RunUndo(
        rolled_back=run_id,
        cascaded=tuple(cascaded),
        revoked=tuple(revoked),
        restored=tuple(restored),
        declarations_changing=len(changing),
        rows=documents.rows,
        payload_targets=documents.payload_targets,
        payloads=documents.payloads,
        moves=documents.moves,
        not_undone=(*left_listed(entries), *documents.not_undone),
    )
    return undo, overlay, handled


def runs_to_cascade(
    run_id: str, run: RunHistory | None, *, writes: bool, cascade: bool, handled: frozenset[str]
) -> list[str]:
    """The later runs the rollback of ``run_id`` undoes first (``run.later`` not yet
    ``handled``); raises when it cannot be rolled back (no such run, still running, nothing
    written), ``RollbackRefused`` when later runs stand and ``cascade`` is not set.
    ``writes``: whether the run has an entry a rollback undoes."""
    if run is None:
        raise ReconcilerError(f"no run {run_id!r} (see `reconciler status` for recent runs)")
    if run.status == RunStatus.RUNNING:
        raise ReconcilerError(
            f"run {run_id} is still running (or died without its lease being taken since): "
            "wait for it to end, or run `reconciler rollback` again once its lease is free"
        )
    if not writes:
        raise ReconcilerError(
            f"run {run_id} wrote no rows, payloads or declarations and moved no points: "
            "nothing to roll back"
        )
    later = [other for other in run.later if other not in handled]
    if later and not cascade:
        raise RollbackRefused(run_id, later)
    return later


def left_listed(entries: Iterable[AuditEntry]) -> list[dict[str, Any]]:
    """What a rollback does not undo and lists: re-ingest requests and payload indexes."""
    return [
        {"target_type": e.target_type, "target": e.target, "after": e.after}
        for e in entries
        if e.target_type in (AuditKind.REINGEST, AuditKind.INDEX)
    ]


def undo_step_declarations(
    applier: Applier, reason: str, revoked: Sequence[str], restored: Sequence[str]
) -> None:
    """A step's declarations revoked and restored, first of its writes (killed after them,
    the next run no longer reads them, so it does not write their effect again over the rows
    restored after)."""
    head = undo_declarations(
        applier.table,
        run_id=applier.run_id,
        actor=applier.actor,
        at=applier.clock.now(),
        revoked=revoked,
        restored=restored,
        reason=reason,
    )
    applier.result.audit_head = head or applier.result.audit_head


def write_documents(
    applier: Applier,
    reason: str,
    rows: Sequence[RowChange],
    payload_targets: PayloadTargets,
    moves: Sequence[MoveBack] | None,
) -> None:
    """The documents' writes of a rollback (a run's, or a page of them), in the order crash
    safety needs: rows, then the points from the restored rows (each re-read, written where it
    still differs), then a split store's moves back (what the run served stops first)."""
    if rows:
        if applier.keep_writing is not None:
            applier.keep_writing()  # (one check a step: the batches check theirs)
        head, _queued = applier.table.write_rows_and_outbox(
            run_id=applier.run_id,
            actor=applier.actor,
            changes=rows,
            reingests=[],
            at=applier.clock.now(),
        )
        applier.result.rows += len(rows)
        applier.result.audit_head = head or applier.result.audit_head
    applier.write_groups(
        (doc_id, list(ids), payload, reason) for doc_id, ids, payload in payload_targets
    )
    mover = applier.mover
    if mover is None or moves is None:
        return
    for to_archive in (True, False):  # (what the run served stops first)
        groups = [(m.doc_id, list(m.point_ids)) for m in moves if m.to_archive is to_archive]
        mover.move_points(groups, to_archive=to_archive, reason=reason)
        mover.finish()
    applier.result.moves = mover.moved
    applier.result.audit_head = mover.audit_head or applier.result.audit_head


def declarations_undone(entries: Iterable[AuditEntry]) -> tuple[list[str], list[str]]:
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
