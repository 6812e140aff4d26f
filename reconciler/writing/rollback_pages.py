"""A rollback planned and applied a page of documents at a time, memory flat however many
points the run (or a run its cascade undoes) wrote.

A rollback's effect on one document depends on that document's entries, row and points only
(its row fields restored, its chunks' payloads derived from that row, its points moved back);
the declarations it revokes or restores are few and global. So the plan value is the list of
steps (``StepPlan``: run ids in cascade order, declarations, re-ingests and indexes listed:
small, read by ``plan_steps``), and the bulky part, the documents', is planned page by page
of the runs' documents (``DocumentTable.run_documents``: in the store's order, ``after`` the
last one, ``limit`` a page), each page from its own entries (``run_entries_of``), rows and
points (``read_page``), through ``rollback_documents.plan_documents``:

- ``--dry-run`` (``dry_run``) pages over the documents of every step at once and folds each
  page over all steps, newest first, its ``Overlay`` holding that page's documents only
  (exactly what ``rollback_plan.fold`` does for all of them), adding up the counts;
- applying (``PagedUndo``, one a step, each its own recorded run, through the executor) pages
  over the step's own documents and plans each page from the stores as they are then (the
  steps before it applied: no overlay), then writes it (``rollback_plan.write_documents``).

So what ``--dry-run`` prints is what the rollback then writes, for any page size. Only the
``not_undone`` list (output) grows with what the runs left undone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.errors import RollbackRefused
from reconciler.model import AuditKind, RunStatus
from reconciler.ports import ChunkIndex, DocumentTable, split_of
from reconciler.writing.differs import managed
from reconciler.writing.recovery import ResolutionPlan
from reconciler.writing.rollback_documents import DocumentsUndo, MoveBack, plan_documents
from reconciler.writing.rollback_inputs import Overlay, Point, RollbackInputs, RunHistory, Shared
from reconciler.writing.rollback_plan import (
    declarations_undone,
    left_listed,
    runs_to_cascade,
    undo_step_declarations,
    write_documents,
)

if TYPE_CHECKING:
    from reconciler.writing.applying import Applier

#: Documents a page (a rollback's planning and applying hold about this many at once).
PAGE_DOCUMENTS = 500
#: Points read by id a request, planning.
READ_BATCH = 1000
#: A run's entries about its documents (paged), and those about none (read whole: few).
DOCUMENT_KINDS = (AuditKind.ROW, AuditKind.PAYLOAD, AuditKind.MOVE)
RUN_KINDS = (AuditKind.DECLARATION, AuditKind.REINGEST, AuditKind.INDEX)


@dataclass(frozen=True)
class StepPlan:
    """The rollback of one run, before its documents: what is global to it (declarations,
    what is listed) and the steps it cascades to, each applied before it."""

    rolled_back: str
    cascaded: tuple[StepPlan, ...]
    #: The declarations the run made or restored (to revoke) and those it revoked.
    revoked: tuple[str, ...]
    restored: tuple[str, ...]
    #: Re-ingest requests and payload indexes: not undone, listed.
    listed: tuple[Mapping[str, Any], ...]

    @property
    def reason(self) -> str:
        """Why each write of this step is made (its audit entries' reason)."""
        return f"rollback of run {self.rolled_back}"

    def steps(self) -> list[StepPlan]:
        """This step and those it cascades to, in the order they are applied."""
        return [*(s for c in self.cascaded for s in c.steps()), self]


@dataclass(frozen=True)
class PagedUndo:
    """One step applied (``executing.execute``): its declarations, then its documents a page
    at a time, each page planned from the stores as they are then. ``left`` is told what
    each page leaves undone (the step's output lists it)."""

    step: StepPlan
    left: Callable[[Iterable[Mapping[str, Any]]], None]
    page_size: int = PAGE_DOCUMENTS
    batch_points: int = 256

    def execute(self, applier: Applier) -> None:
        """Declarations first (killed after them, the next run no longer reads them, so it
        does not write their effect again over the rows restored below), then each page's
        rows, points and moves into the archive (``rollback_plan.write_documents``); in a
        split store, a second pass over the pages then moves out of the archive, so what the
        run served stops on every page before what it retired is served again (a family
        whose versions lie on two pages never has both served)."""
        step = self.step
        undo_step_declarations(applier, step.reason, step.revoked, step.restored)
        for undo in self._pages(applier):
            self.left(undo.not_undone)
            moves = None if undo.moves is None else _moves(undo.moves, to_archive=True)
            write_documents(applier, step.reason, undo.rows, undo.payload_targets, moves)
        if applier.mover is None:
            return
        for undo in self._pages(applier):  # (planned again: the points as the pass left them)
            if undo.moves is not None:
                moves = _moves(undo.moves, to_archive=False)
                write_documents(applier, step.reason, (), (), moves)

    def _pages(self, applier: Applier) -> Iterator[DocumentsUndo]:
        """Each page of the step's documents, planned from the stores as they are now."""
        run_id = self.step.rolled_back
        for page in pages(applier.table, [run_id], self.page_size):
            inputs = read_page(applier.table, applier.index, [run_id], page)
            undo, _after = plan_documents(
                inputs, run_id, inputs.runs[run_id].entries, Overlay(), self.batch_points
            )
            yield in_page_order(undo, page)


def _moves(moves: Sequence[MoveBack], *, to_archive: bool) -> tuple[MoveBack, ...]:
    """The moves back of one direction."""
    return tuple(m for m in moves if m.to_archive is to_archive)


# -- the steps ---------------------------------------------------------------------------------


def plan_steps(
    table: DocumentTable,
    run_id: str,
    *,
    cascade: bool = False,
    resolving: Sequence[ResolutionPlan] = (),
) -> StepPlan:
    """The steps of the rollback of ``run_id`` (reads only): raises as ``plan_rollback``
    does when it cannot be rolled back or later runs stand without ``cascade``.
    ``resolving``: the dead runs its runner would resolve first, read as resolved."""
    return _plan_step(table, run_id, {p.run_id for p in resolving}, cascade, frozenset())[0]


def _plan_step(
    table: DocumentTable,
    run_id: str,
    resolved: set[str],
    cascade: bool,
    handled: frozenset[str],
) -> tuple[StepPlan, frozenset[str]]:
    handled = handled | {run_id}  # a cascade never comes back to a run it is already undoing
    run, writes = _read_run(table, run_id, resolved)
    later = runs_to_cascade(run_id, run, writes=writes, cascade=cascade, handled=handled)
    assert run is not None
    cascaded = []
    for other in later:
        if other in handled:  # undone (or being undone) further up or earlier in this cascade
            continue
        if table.run_entries_of(other, kinds=[AuditKind.REKEY]):
            raise RollbackRefused(run_id, [other], rekeyed=True)
        step, handled = _plan_step(table, other, resolved, cascade, handled)
        cascaded.append(step)
    revoked, restored = declarations_undone(run.entries)
    listed = tuple(left_listed(run.entries))
    return StepPlan(run_id, tuple(cascaded), tuple(revoked), tuple(restored), listed), handled


def _read_run(
    table: DocumentTable, run_id: str, resolved: set[str]
) -> tuple[RunHistory | None, bool]:
    """One run as its step needs it (its entries about no document, the later runs that
    stand), and whether it has an entry a rollback undoes."""
    run = table.get_run(run_id)
    if run is None:
        return None, False
    status = run.status
    if run_id in resolved and status == RunStatus.RUNNING:
        status = RunStatus.INTERRUPTED
    entries = table.run_entries_of(run_id, kinds=RUN_KINDS)
    writes = any(e.target_type == AuditKind.DECLARATION for e in entries) or bool(
        table.run_documents([run_id], limit=1)
    )
    later: list[str] = []
    if writes and status != RunStatus.RUNNING:
        later = standing(table, table.runs_touching_run(run_id))
    return RunHistory(run_id, status, tuple(entries), tuple(later)), writes


def standing(table: DocumentTable, touched: Sequence[str]) -> list[str]:
    """Of ``touched`` (runs, newest first), those that still stand: a run that was rolled back
    does not, nor does the rollback that undid it; but a rollback rolled back itself undoes
    nothing (``undone_runs``), so the run it had undone stands again."""
    rollbacks = table.rollbacks()  # rollback run -> the run it rolled back
    undone = undone_runs(rollbacks)
    return [
        other for other in touched if other not in undone and rollbacks.get(other) not in touched
    ]


def undone_runs(rollbacks: Mapping[str, str]) -> set[str]:
    """The runs a rollback that still stands undid (``rollbacks``: rollback run -> the run it
    rolled back): one whose every rollback was rolled back in turn is redone, not undone."""
    undoers: dict[str, list[str]] = {}
    for by, run in rollbacks.items():
        undoers.setdefault(run, []).append(by)
    known: dict[str, bool] = {}

    def is_undone(run: str) -> bool:
        if run not in known:
            known[run] = False  # (a rollback is later than what it undid: no cycle, but safe)
            known[run] = any(not is_undone(by) for by in undoers.get(run, ()))
        return known[run]

    return {run for run in undoers if is_undone(run)}


# -- the pages ---------------------------------------------------------------------------------


def pages(table: DocumentTable, run_ids: Sequence[str], size: int) -> Iterator[list[str]]:
    """The documents ``run_ids`` wrote or moved, ``size`` at a time, in the store's order."""
    after: str | None = None
    while True:
        page = table.run_documents(run_ids, after=after, limit=max(size, 1))
        if not page:
            return
        yield page
        after = page[-1]


def in_page_order(undo: DocumentsUndo, page: Sequence[str]) -> DocumentsUndo:
    """``undo`` with what it leaves undone in the order of ``page`` (the store's order of
    ids), each document's as the fold listed them: the pages come in that order too, so the
    list is the same however the documents are paged (a dry run pages every step's documents
    together, a step its own; the fold lists a page's rows newest entry first)."""
    at = {doc_id: n for n, doc_id in enumerate(page)}
    ordered = sorted(undo.not_undone, key=lambda left: at.get(str(left["target"]), len(at)))
    return replace(undo, not_undone=tuple(ordered))


def read_page(
    table: DocumentTable,
    index: ChunkIndex,
    runs: Sequence[RunHistory | str],
    page: Sequence[str],
    resolving: Sequence[ResolutionPlan] = (),
) -> RollbackInputs:
    """What the rollback of ``runs`` looks at for the documents of ``page`` (reads only):
    their row, payload and move entries of each run, their rows, the points they name."""
    histories = {}
    for run in runs:
        run_id = run if isinstance(run, str) else run.run_id
        entries = table.run_entries_of(run_id, kinds=DOCUMENT_KINDS, targets=page)
        histories[run_id] = RunHistory(run_id, "", tuple(entries))
    ids = [
        p
        for history in histories.values()
        for e in history.entries
        if e.target_type in (AuditKind.PAYLOAD, AuditKind.MOVE)
        for p in e.before["points"]
    ]
    split = split_of(index)
    return RollbackInputs(
        run_id="",
        runs=MappingProxyType(histories),
        rows=MappingProxyType(table.get_documents(page)),
        points=MappingProxyType(read_points(index, ids, resolving)),
        declarations=MappingProxyType({}),
        collections=None if split is None else split.collections,
    )


def read_points(
    index: ChunkIndex, ids: Sequence[Any], resolving: Sequence[ResolutionPlan] = ()
) -> dict[str, Point]:
    """Point id (as text) -> the point, for ``ids`` (in no collection: absent), their
    managed keys only, equal ones shared; the unfinished moves of ``resolving`` finished."""
    split = split_of(index)
    points: dict[str, Point] = {}
    shared = Shared()  # (a document's points: one payload, one point, held once)
    unique = list(dict.fromkeys(ids))
    parts: list[tuple[str | None, ChunkIndex]] = [(None, index)]
    if split is not None:
        main, archive = split.collections
        parts = [(main, split.main), (archive, split.archive)]
    for name, part in parts if unique else ():
        if split is not None and not part.exists():
            continue
        for start in range(0, len(unique), READ_BATCH):  # (the managed keys kept, no more)
            for state in part.retrieve(unique[start : start + READ_BATCH]):
                points[str(state.point_id)] = shared.point(managed(state.payload), name)
    for move in (m for plan in resolving for m in plan.moves):  # finished: source -> dest
        for stored in move.held:
            held = points.get(str(stored.point_id))
            if held is not None:
                points[str(stored.point_id)] = shared.moved(held, move.dest)
    return points


# -- the dry run -------------------------------------------------------------------------------


@dataclass
class StepCounts:
    """What one step would write, added up page by page."""

    rows: int = 0
    payload_groups: int = 0
    points: int = 0
    moves: int = 0
    not_undone: list[Mapping[str, Any]] = field(default_factory=list)

    def add(self, undo: DocumentsUndo) -> None:
        """Count a page's plan in."""
        self.rows += len(undo.rows)
        self.payload_groups += len(undo.payloads)
        self.points += sum(len(g.point_ids) for g in undo.payloads)
        self.moves += sum(len(m.moving) for m in undo.moves or ())
        self.not_undone.extend(undo.not_undone)


def dry_counts(
    table: DocumentTable,
    index: ChunkIndex,
    plan: StepPlan,
    *,
    page_size: int = PAGE_DOCUMENTS,
    batch_points: int = 256,
    resolving: Sequence[ResolutionPlan] = (),
) -> dict[str, StepCounts]:
    """Each step's counts (by rolled-back run): every step's documents paged together, each
    page folded over the steps in the order they are applied (the cascade's, newest first,
    then the run's), the overlay holding that page's documents only."""
    steps = plan.steps()
    counts = {s.rolled_back: StepCounts(not_undone=list(s.listed)) for s in steps}
    run_ids = [s.rolled_back for s in steps]
    for page in pages(table, run_ids, page_size):
        inputs = read_page(table, index, run_ids, page, resolving)
        overlay = Overlay()
        for run_id in run_ids:
            entries = inputs.runs[run_id].entries
            undo, overlay = plan_documents(inputs, run_id, entries, overlay, batch_points)
            counts[run_id].add(in_page_order(undo, page))
    return counts
