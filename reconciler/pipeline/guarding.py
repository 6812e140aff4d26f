"""Stage 4 of a run: the blast-radius guard (``decide``): may the plan be written?

The guard weighs the served set. Every document a plan writes is judged at the run's instant
by what ``default_filter()`` returns of it before and after, now or from now on
(``row_direction``), and counted once, in the family it is served in:

- **hidden**: served (now, or later) before the run and not after: quarantined, superseded,
  retired, a window closed before now or not begun;
- **revealed**: served after at an instant it was not before (a version un-retired, a link
  removed, a scheduled version brought forward where its family served nothing now), except
  a restore;
- **restored**: a quarantine the reconciler set, lifted because its cause is gone (the
  re-ingested text matches the source, the source was read again), nothing else moving;
- **relabelled**: served before and after, something else written (a family merge or move,
  metadata, a window end still ahead, ``pending`` becoming ``current``, a handover in force
  or a scheduled one brought forward: ``rules.handover``);
- **unserved**: served neither before nor after (an unserved version relabelled, quarantined
  or moved to the archive).

Only the change of the served set is weighed against ``guard.max_changed_fraction``: the
families and chunks hidden or revealed (a family with both counts once). Restores are weighed
apart, against ``guard.max_restored_fraction`` (by default 1: never refused), so the recovery
from a forced run is never refused in its turn. Relabels and writes to what is unserved are
reported and never refuse a run. In a split store, the chunks moved between its collections
(and their families) are weighed against ``guard.max_moved_fraction``: a move hides nothing
from ``default_filter()``, but a run that would move much of the corpus (the first run after
``archive_collection`` is set on an existing deployment: ``reconciler split`` is the command for
that) is stopped and shown.

A refused run still writes what cannot hide anything (``GuardDecision.allowed``): every
document's writes but those of a direction over its limit (the hidden and revealed ones when
the served set would change too much, the restores when too many would be restored, every
move when too many would move), and a handover in a family whose other writes are held (a
predecessor closed while what takes over is held back would leave its family serving
nothing); the documents held back are named (``GuardDecision.held``).
When a source that had documents returned none or the index lost its points, nothing that was
read can be trusted and nothing is written; nor is anything by a refused ``declare`` run,
whose declarations are not recorded.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from reconciler.check_inputs import SourceState
from reconciler.model import (
    AuditEntry,
    AuditKind,
    Finding,
    Severity,
)
from reconciler.pipeline.directions import (
    SERVED_SET,
    Direction,
    Effect,
    effects,
    payload_direction,
)
from reconciler.pipeline.index_guard import shrunken_index
from reconciler.pipeline.values import (
    GuardDecision,
    Options,
    Totals,
    Weights,
)
from reconciler.planning import (
    Plan,
)


def weigh(plan: Plan, now: datetime, found: Sequence[Effect] | None = None) -> Weights:
    """What the guard weighs of ``plan``: the families and chunks of each direction, each
    document counted once, in the family it is served in before the run. ``found``:
    ``effects(plan, now)``, when the caller has them."""
    families: dict[Direction, set[str]] = defaultdict(set)
    chunks: dict[Direction, int] = defaultdict(int)
    for effect in effects(plan, now) if found is None else found:
        families[effect.direction].add(effect.family)
        chunks[effect.direction] += effect.points
    served = families[Direction.HIDE] | families[Direction.REVEAL]
    changed = set().union(*(families[d] for d in Direction if d is not Direction.RESTORE))
    moving = {move.family for move in plan.moves}
    return Weights(
        moving_families=len(moving),
        moving_chunks=plan.moved_points(),
        changed_families=len(changed),
        changed_chunks=sum(chunks[d] for d in Direction if d is not Direction.RESTORE),
        hiding_families=len(families[Direction.HIDE]),
        hiding_chunks=chunks[Direction.HIDE],
        restoring_families=len(families[Direction.RESTORE]),
        restoring_chunks=chunks[Direction.RESTORE],
        revealed_families=len(families[Direction.REVEAL]),
        revealed_chunks=chunks[Direction.REVEAL],
        relabelled_families=len(families[Direction.RELABEL]),
        relabelled_chunks=chunks[Direction.RELABEL],
        unserved_families=len(families[Direction.UNSERVED]),
        unserved_chunks=chunks[Direction.UNSERVED],
        weighed_families=len(served),
        weighed_chunks=chunks[Direction.HIDE] + chunks[Direction.REVEAL],
    )


#: The run's count of what is served now or later (``scanning.served_totals``): given the
#: families the plan reveals, (families, chunks or None, those of the given families served).
Served = Callable[[frozenset[str]], tuple[int, int | None, frozenset[str]]]


def decide(
    options: Options,
    totals: Totals,
    plan: Plan,
    sources: Mapping[str, SourceState],
    now: datetime | None = None,
    corpus: Callable[[], Totals] | None = None,
    served: Served | None = None,
    corpus_served: Served | None = None,
) -> GuardDecision:
    """The blast-radius guard: may ``plan`` be written? (A source that had documents and
    returned none; more than ``max_changed_fraction`` of families or chunks hidden or
    revealed; more than ``max_restored_fraction`` restored. ``now``: the run's instant, which
    decides what is served; ``options.now``, else the clock's, when not given.) A refused
    run's ``allowed`` plan is what it still writes (``hold_back``).

    A scoped repair is exempt from the fraction rules for what a person named (``--family``,
    ``--doc``) only: what the widening added (families a move joins or leaves) and every
    family of a ``watch`` run (the changed files' families: a bulk edit is as automated as a
    cron run) are weighed, against the whole corpus (``corpus``: its totals, read only when
    that part is past the floor).

    A change of the served set is a fraction of what is served before or after it
    (``served``: the families with a row served now or later and their chunks, counted over
    the run's rows only when a change is past the floor, with what the plan reveals; the
    totals where it is not given, for a ``declare`` run and for a scoped repair's part
    weighed against the corpus)."""
    now = now or options.now or datetime.now(UTC)
    found = effects(plan, now)  # (once: the weights, what is held back and what is hidden)
    weights = weigh(plan, now, found)
    families_total = max(totals.families, 1)
    chunks_total = max(totals.chunks, 1)
    reasons: list[Finding] = []
    for name, state in sources.items():
        if (
            state.scanned
            and state.readable
            and state.documents == 0
            and totals.rows_by_source.get(name)
        ):
            reasons.append(
                Finding(
                    check="guard",
                    kind="source_empty",
                    severity=Severity.CRITICAL,
                    family=None,
                    doc_id=None,
                    expected={
                        "source": name,
                        "documents": f"> 0 ({totals.rows_by_source[name]} registered, not retired)",
                    },
                    actual={"source": name, "documents": 0},
                    action="refuse the run: a source that had documents returned none",
                )
            )
    guard = options.guard
    # (a run that declares is scoped to the families it touches, and weighed like a whole run)
    scoped = (options.families is not None or options.doc_id is not None) and not (
        options.declarations
    )
    part_weighed = weights  # (what the fractions weigh: a scoped repair's unnamed part alone)
    part_found: Sequence[Effect] = found
    if scoped:
        unnamed = [e for e in found if not _named(options, e)]
        if unnamed:
            part = weigh(plan, now, unnamed)
            past = max(part.weighed_families, part.weighed_chunks)
            if past > guard.floor or (
                guard.max_restored_fraction < 1
                and max(part.restoring_families, part.restoring_chunks) > guard.floor
            ):
                # (weighed like a whole run: this part, against the corpus)
                scoped = False
                part_weighed, part_found = part, unnamed
                totals = corpus() if corpus is not None else totals
                families_total = max(totals.families, 1)
                chunks_total = max(totals.chunks, 1)
    # (a change of the served set is weighed against what is served: an archive of retired
    # rows beside 15 served ones must not let all 15 be hidden)
    # (a declare run, a scoped repair's part: against what the whole corpus serves)
    own_rows = part_weighed is weights and not options.declarations
    counter = served if own_rows else corpus_served
    totals = _served_counted(
        totals, counter, part_weighed, part_found, guard.floor, own_rows=not scoped
    )
    served_families = totals.served_families or families_total
    served_chunks = totals.served_chunks or chunks_total
    over: list[str] = []
    moved = (
        "moved",
        guard.max_moved_fraction,
        (("families", weights.moving_families), ("chunks", weights.moving_chunks)),
    )
    for direction, limit, measured in (
        (
            "changed",
            guard.max_changed_fraction,
            (("families", part_weighed.weighed_families), ("chunks", part_weighed.weighed_chunks)),
        ),
        (
            "restored",
            guard.max_restored_fraction,
            (
                ("families", part_weighed.restoring_families),
                ("chunks", part_weighed.restoring_chunks),
            ),
        ),
        *([moved] if options.split is not None else []),
    ):
        for what, changed in measured:
            if direction == "changed":
                total = served_families if what == "families" else served_chunks
            else:
                total = families_total if what == "families" else chunks_total
            if scoped or changed <= guard.floor or changed / total <= limit:
                continue
            if direction not in over:
                over.append(direction)
            reasons.append(_blast_radius(direction, what, changed, total, limit, part_weighed))
    reasons += shrunken_index(options, totals)
    writing = options.mode.writes and bool(reasons)
    refused = writing and not options.force
    allowed, held = hold_back(
        plan, now, reasons, tuple(over), declaring=bool(options.declarations), found=found
    )
    return GuardDecision(
        totals=totals,
        changed_families=weights.changed_families,
        changed_chunks=weights.changed_chunks,
        max_changed_fraction=guard.max_changed_fraction,
        weights=weights,
        max_restored_fraction=guard.max_restored_fraction,
        over=tuple(over),
        reasons=tuple(reasons),
        refused=refused,
        forced=writing and options.force,
        max_moved_fraction=guard.max_moved_fraction if options.split is not None else None,
        allowed=allowed if refused else None,
        held=held if refused else (),
        hidden=tuple(
            sorted({e.doc_id for e in found if e.direction is Direction.HIDE and e.doc_id}, key=str)
        ),
    )


def _served_counted(
    totals: Totals,
    served: Served | None,
    weights: Weights,
    found: Sequence[Effect],
    floor: int,
    *,
    own_rows: bool,
) -> Totals:
    """``totals`` with what is served counted (``served``: over the run's rows, or the whole
    corpus's for a declare run and a scoped repair's part), where a change of the served set
    is past the floor and the fractions are weighed (``own_rows``): paid only then. What is
    served before or after the run: what is served now or later, and what the plan hides or
    reveals beyond it (a family it weighs that served nothing before; its revealed chunks,
    and hidden ones past those served), so a fraction of it is never over 1
    (``max_changed_fraction = 1`` never trips)."""
    if not own_rows or served is None or totals.served_families is not None:
        return totals
    if max(weights.weighed_families, weights.weighed_chunks) <= floor:
        return totals
    # (a payload write that serves nothing is taken as hiding even where its chunks were not
    # served, orphans quarantined: what it hides counts as served before, at least)
    weighed = frozenset(e.family for e in found if e.direction in SERVED_SET)
    families, chunks, serving = served(weighed)
    if chunks is not None:
        chunks = max(chunks, weights.hiding_chunks) + weights.revealed_chunks
    return dataclasses.replace(
        totals, served_families=families + len(weighed - serving), served_chunks=chunks
    )


def _named(options: Options, effect: Effect) -> bool:
    """Whether a scoped repair's person named what ``effect`` writes (its family, its
    document); a ``watch`` run names nothing (its families are the changed files')."""
    if options.actor == "watch":
        return False
    if options.doc_id is not None and effect.doc_id == options.doc_id:
        return True
    return options.families is not None and effect.family in options.families


#: The directions each measure over its limit holds back (moves: every move).
_HELD_BY: Mapping[str, frozenset[Direction]] = {
    "changed": SERVED_SET,
    "restored": frozenset({Direction.RESTORE}),
}


def hold_back(
    plan: Plan,
    now: datetime,
    reasons: Iterable[Finding],
    over: tuple[str, ...],
    *,
    declaring: bool = False,
    found: Sequence[Effect] | None = None,
) -> tuple[Plan, tuple[str, ...]]:
    """What a refused run still writes, and the documents it holds back (sorted).

    Every write of a document whose direction is over its limit is held back (its row, its
    chunks, its re-ingest request, its move); every move when ``moved`` is over; the rest
    cannot change the served set past a limit and is written: relabels, writes to what is
    unserved, restores under their limit, payload indexes, other documents' re-ingest
    requests; but a handover (``RowUpdate.handed_over``, ``takes_over``) in a family whose
    other writes are held is held with them. When a source that had documents returned none or the index lost points
    (``source_empty``, ``index_shrunk``), or the run declares (its declarations are not
    recorded when refused, and what they move would be moved back), nothing is written.
    ``found``: ``effects(plan, now)``, when the caller has them."""
    kinds = {r.kind for r in reasons}
    if not kinds:
        return plan, ()
    if declaring or kinds & {"source_empty", "index_shrunk"}:
        every = {u.doc_id for u in plan.row_updates} | {
            t.doc_id for t in plan.payload_targets if t.doc_id is not None
        }
        return Plan(), tuple(sorted(every))
    directions = frozenset().union(*(_HELD_BY.get(o, frozenset()) for o in over))
    held = {
        e.doc_id
        for e in (effects(plan, now) if found is None else found)
        if e.direction in directions and e.doc_id
    }
    # (a handover is written with what takes over, or held with it: a predecessor closed
    # while its successor's reveal is held would leave its family serving nothing)
    families = {u.after.doc_family_id for u in plan.row_updates if u.doc_id in held}
    held |= {
        u.doc_id
        for u in plan.row_updates
        if (u.handed_over or u.takes_over) and u.after.doc_family_id in families
    }
    allowed = Plan(
        row_updates=tuple(u for u in plan.row_updates if u.doc_id not in held),
        payload_targets=tuple(
            t
            for t in plan.payload_targets
            if (
                t.doc_id not in held
                if t.doc_id is not None
                else payload_direction(t, now) not in directions
            )
        ),
        reingests=tuple(r for r in plan.reingests if r.doc_id not in held),
        indexes=plan.indexes,
        moves=() if "moved" in over else tuple(m for m in plan.moves if m.doc_id not in held),
    )
    return allowed, tuple(sorted(held))


def _blast_radius(
    direction: str, what: str, changed: int, total: int, limit: float, weights: Weights
) -> Finding:
    """The ``guard/blast_radius`` finding of one direction and measure over its limit."""
    key = f"max_{direction}_fraction"
    actual: dict[str, object] = {
        "direction": direction,
        what: changed,
        "fraction": round(changed / total, 4),
    }
    if direction == "changed":
        actual[f"hidden_{what}"] = getattr(weights, f"hiding_{what}")
        actual[f"revealed_{what}"] = getattr(weights, f"revealed_{what}")
    return Finding(
        check="guard",
        kind="blast_radius",
        severity=Severity.CRITICAL,
        family=None,
        doc_id=None,
        expected={"direction": direction, what: f"<= {limit:.0%} of {total} ({key})"},
        actual=actual,
        action="refuse the run's writes of this direction; the rest is written (review "
        "the plan, then rerun with --force if it is right)"
        + (
            "; to move an existing deployment into a split store, `reconciler split --dry-run` "
            "shows the moves and `reconciler split` makes them"
            if direction == "moved"
            else ""
        ),
    )


def forced_entry(
    run_id: str, decision: GuardDecision, options: Options, now: datetime
) -> AuditEntry:
    return AuditEntry(
        run_id=run_id,
        at=now,
        actor=options.actor,
        reason="--force past the blast-radius guard",
        target_type=AuditKind.RUN,
        target=run_id,
        before={"guard": [r.kind for r in decision.reasons]},
        after={"forced": True},
    )
