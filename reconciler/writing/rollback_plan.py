"""A rollback, planned: a pure fold over what the stores hold, into a frozen plan.

``rollback.read_history`` reads, once, all a rollback looks at (the audit entries of the run
and of the later runs a cascade undoes first, the rows and declarations they name, the payload
and collection of each point they wrote or moved): a ``RollbackInputs`` value
(``rollback_inputs``, its points sharing their payloads), which ``plan_rollback`` folds into
a ``RollbackPlan``: per run, newest first down a cascade, the row fields to restore, the
payload writes (grouped as the applier groups them), the declarations to revoke or restore,
the points to move back, what is left undone. It reads and writes no store.

A cascade is planned newest first against an ``Overlay``: an immutable value holding what the
steps planned before would have written (rows, payloads, where points are, declarations), over
the inputs. So the rollback of A after that of B reads the rows B's rollback restored, and a
point counts only when it would still differ: what ``--dry-run`` prints is what the executor
(``rollback.apply_rollback``) then writes. A dead run the rollback's runner would resolve first
(``recovery``) is planned as resolved: ``interrupted``, its unfinished moves finished.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.errors import ReconcilerError, RollbackRefused
from reconciler.model import (
    MANAGED_KEYS,
    AuditEntry,
    AuditKind,
    Document,
    RowChange,
    RunStatus,
    VersionState,
    fields_from_json,
    jsonable,
)
from reconciler.payload import payload_for
from reconciler.planning import PayloadTarget
from reconciler.writing.declaring import undo_declarations
from reconciler.writing.differs import expected_of, still_differs
from reconciler.writing.rollback_inputs import Overlay, Point, RollbackInputs, Shared

if TYPE_CHECKING:
    from reconciler.writing.applying import Applier

#: Audit entries a rollback undoes.
UNDONE = (AuditKind.ROW, AuditKind.PAYLOAD, AuditKind.DECLARATION, AuditKind.MOVE)


@dataclass(frozen=True)
class PayloadGroup:
    """One payload write: ``payload`` on a document's points that held ``before``."""

    doc_id: str
    point_ids: tuple[Any, ...]
    payload: Mapping[str, Any]
    before: Mapping[str, Any]


@dataclass(frozen=True)
class MoveBack:
    """The points of a run's ``move`` intent for one document, to take back to the
    collection they left (``to_archive``: back into the archive); ``moving`` of them are
    still where the run put them."""

    doc_id: str
    point_ids: tuple[Any, ...]
    to_archive: bool
    moving: tuple[Any, ...]


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
    payload_targets: tuple[tuple[str, tuple[Any, ...], Mapping[str, Any]], ...]
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
        head = undo_declarations(
            applier.table,
            run_id=applier.run_id,
            actor=applier.actor,
            at=applier.clock.now(),
            revoked=self.revoked,
            restored=self.restored,
            reason=self.reason,
        )
        applier.result.audit_head = head or applier.result.audit_head
        if applier.keep_writing is not None and self.rows:
            applier.keep_writing()  # (one check a step: the batches check theirs)
        head, _queued = applier.table.write_rows_and_outbox(
            run_id=applier.run_id,
            actor=applier.actor,
            changes=self.rows,
            reingests=[],
            at=applier.clock.now(),
        )
        applier.result.rows = len(self.rows)
        applier.result.audit_head = head or applier.result.audit_head
        applier.write_groups(
            (doc_id, list(ids), payload, self.reason)
            for doc_id, ids, payload in self.payload_targets
        )
        mover = applier.mover
        if mover is None or self.moves is None:
            return
        for to_archive in (True, False):  # (what the run served stops first)
            groups = [
                (m.doc_id, list(m.point_ids)) for m in self.moves if m.to_archive is to_archive
            ]
            mover.move_points(groups, to_archive=to_archive, reason=self.reason)
            mover.finish()
        applier.result.moves = mover.moved
        applier.result.audit_head = mover.audit_head or applier.result.audit_head

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
    if run is None:
        raise ReconcilerError(f"no run {run_id!r} (see `reconciler status` for recent runs)")
    if run.status == RunStatus.RUNNING:
        raise ReconcilerError(
            f"run {run_id} is still running (or died without its lease being taken since): "
            "wait for it to end, or run `reconciler rollback` again once its lease is free"
        )
    entries = run.entries
    if not any(e.target_type in UNDONE for e in entries):
        raise ReconcilerError(
            f"run {run_id} wrote no rows, payloads or declarations and moved no points: "
            "nothing to roll back"
        )
    later = [other for other in run.later if other not in handled]
    if later and not inputs.cascade:
        raise RollbackRefused(run_id, later)
    cascaded = []
    for other in later:
        if other in handled:  # undone (or being undone) further up or earlier in this cascade
            continue
        undo, overlay, handled = _plan_run(inputs, other, overlay, handled, batch_points)
        cascaded.append(undo)
    reason = f"rollback of run {run_id}"
    revoked, restored = _declarations_undone(entries)
    changing = [d for d in revoked if overlay.active(inputs, d) is True] + [
        d for d in restored if overlay.active(inputs, d) is False
    ]
    overlay = overlay.written(
        declarations={**dict.fromkeys(revoked, False), **dict.fromkeys(restored, True)}
    )
    changes, skipped = _row_changes(inputs, overlay, run_id, entries)
    overlay = overlay.written(rows=_rows_after(inputs, overlay, changes))
    targets = tuple(
        (doc_id, tuple(ids), _payload_of(overlay.row(inputs, doc_id), restored_keys))
        for doc_id, (ids, restored_keys) in _points_by_doc(
            e for e in entries if e.target_type == AuditKind.PAYLOAD
        ).items()
    )
    groups, written = _payload_groups(inputs, overlay, targets, reason, batch_points)
    overlay = overlay.written(points=written)
    moves: tuple[MoveBack, ...] | None = None
    not_undone = [
        {"target_type": e.target_type, "target": e.target, "after": e.after}
        for e in entries
        if e.target_type in (AuditKind.REINGEST, AuditKind.INDEX)
    ] + skipped
    if inputs.collections is not None:
        moves, left, moved = _moves_back(inputs, overlay, entries)
        overlay = overlay.written(points=moved)
        not_undone += left
    undo = RunUndo(
        rolled_back=run_id,
        cascaded=tuple(cascaded),
        revoked=tuple(revoked),
        restored=tuple(restored),
        declarations_changing=len(changing),
        rows=tuple(changes),
        payload_targets=targets,
        payloads=tuple(groups),
        moves=moves,
        not_undone=tuple(not_undone),
    )
    return undo, overlay, handled


def _payload_of(row: Document | None, restored: Mapping[str, Any]) -> Mapping[str, Any]:
    """What a document's chunks get back: from its restored row, else the keys the run
    changed on them, with their before-values."""
    return MappingProxyType(payload_for(row) if row is not None else dict(restored))


def _payload_groups(
    inputs: RollbackInputs,
    overlay: Overlay,
    targets: Iterable[tuple[str, tuple[Any, ...], Mapping[str, Any]]],
    reason: str,
    batch_points: int,
) -> tuple[list[PayloadGroup], dict[str, Point | None]]:
    """The payload writes the applier makes for ``targets`` (``Applier.write_groups``: per
    document, ``batch_points`` ids at a time, the points that still differ grouped by what
    they hold), and the points as they leave them."""
    groups: list[PayloadGroup] = []
    written: dict[str, Point | None] = {}
    shared = Shared()  # (a document's points, written alike, share what they leave)
    for doc_id, ids, payload in targets:
        partial = set(payload) != set(MANAGED_KEYS)
        target = PayloadTarget(doc_id, None, payload, len(ids), (reason,), partial=partial)
        expected = expected_of(target)
        for start in range(0, len(ids), batch_points):
            variants: dict[Any, tuple[dict[str, Any], list[Any]]] = {}
            for pid in dict.fromkeys(ids[start : start + batch_points]):
                key = str(pid)
                point = written[key] if key in written else overlay.point(inputs, pid)
                if point is None:
                    continue
                differs = still_differs(point.payload, target, expected)
                if differs is None:
                    continue
                before, variant = differs
                variants.setdefault(variant, (before, []))[1].append(pid)
                written[key] = shared.written(point, payload)
            groups += [
                PayloadGroup(doc_id, tuple(pids), payload, before)
                for before, pids in variants.values()
            ]
    return groups, written


def _moves_back(
    inputs: RollbackInputs, overlay: Overlay, entries: Sequence[AuditEntry]
) -> tuple[tuple[MoveBack, ...], list[dict[str, Any]], dict[str, Point | None]]:
    """The points of a run's ``move`` intents to take back to the collection they left, where
    they are still in the one it put them in (what the run served stops first); the others,
    listed; the points as the moves leave them."""
    assert inputs.collections is not None
    main, archive = inputs.collections
    moves: list[MoveBack] = []
    left: list[dict[str, Any]] = []
    moved: dict[str, Point | None] = {}
    shared = Shared()
    for back_to_archive in (True, False):  # (what the run served stops first)
        leave, went = (archive, main) if back_to_archive else (main, archive)
        going = [
            e
            for e in entries
            if e.target_type == AuditKind.MOVE
            and (e.before.get("from"), e.after.get("to")) == (leave, went)
        ]
        for entry in going:
            ids = tuple(entry.before["points"])
            moving = []
            for pid in ids:
                key = str(pid)
                point = moved[key] if key in moved else overlay.point(inputs, pid)
                if point is not None and point.where == went:
                    moving.append(pid)
                    moved[key] = shared.moved(point, leave)
            moves.append(MoveBack(entry.target, ids, back_to_archive, tuple(moving)))
        back = {str(p) for m in moves[len(moves) - len(going) :] for p in m.moving}
        for entry in going:
            stayed = [p for p in entry.before["points"] if str(p) not in back]
            if stayed:
                left.append(
                    {
                        "target_type": AuditKind.MOVE,
                        "target": entry.target,
                        "after": {"moved_since": stayed},
                    }
                )
    return tuple(moves), left, moved


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
    inputs: RollbackInputs, overlay: Overlay, run_id: str, entries: Sequence[AuditEntry]
) -> tuple[list[RowChange], list[dict[str, Any]]]:
    """Each row field the run changed, back to its before-value, when the row still holds
    what the run wrote; a field changed since outside any rolled-back run (by hand, by an
    ingestion) is left as it is and listed. ``before`` is what the row holds now."""
    changes: list[RowChange] = []
    skipped: list[dict[str, Any]] = []
    restored: dict[str, dict[str, Any]] = {}
    for entry in reversed(entries):
        if entry.target_type != AuditKind.ROW:
            continue
        row = overlay.row(inputs, entry.target)
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


def _rows_after(
    inputs: RollbackInputs, overlay: Overlay, changes: Sequence[RowChange]
) -> dict[str, Document]:
    """The rows as ``changes`` leave them (a row that does not exist stays absent)."""
    rows: dict[str, Document] = {}
    for change in changes:
        row = rows.get(change.doc_id) or overlay.row(inputs, change.doc_id)
        if row is None:
            continue
        values = dict(change.after)
        if values.get("version_state") is not None:
            values["version_state"] = VersionState(values["version_state"])
        rows[change.doc_id] = replace(row, **values)
    return rows


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
