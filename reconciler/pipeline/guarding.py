"""Stage 4 of a run: the blast-radius guard (``decide``): may the plan be written?

The guard weighs direction. A write that hides what is served (quarantine, supersede, retire,
a window closed before now) and every other change count against
``guard.max_changed_fraction``, as every write always did. A write that only lifts a quarantine
the reconciler set, because its cause is gone (the re-ingested text matches the source, the
source was read again), is weighed apart against ``guard.max_restored_fraction`` (by default 1:
never refused): otherwise the recovery from a forced run would be refused in its turn, and a
cron deployment would keep the documents it re-ingested hidden until someone forced it again.
In a split store, the chunks moved between its collections (and their families) are weighed
too, against ``guard.max_moved_fraction``: a move hides nothing from ``default_filter()``, but
a run that would move much of the corpus (the first run after ``archive_collection`` is set on
an existing deployment: ``reconciler split`` is the command for that) is stopped and shown.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.check_inputs import SourceState
from reconciler.model import (
    MANAGED_QUARANTINE_REASONS,
    OPEN_START,
    AuditEntry,
    AuditKind,
    Document,
    Finding,
    Severity,
)
from reconciler.pipeline.values import (
    GuardDecision,
    Options,
    Totals,
    Weights,
)
from reconciler.planning import (
    PayloadTarget,
    Plan,
    RowUpdate,
)
from reconciler.rules.time_rule import payload_instant, payload_served, row_served, start_of


class Direction(enum.StrEnum):
    """Which way a write moves what retrieval serves."""

    #: Something served now, or later, is served no more (or not now).
    HIDE = "hide"
    #: A quarantine the reconciler set is lifted because its cause is gone, nothing else moves.
    RESTORE = "restore"
    #: Anything else (a state or window that serves more, metadata, a later window end).
    CHANGE = "change"


#: The row fields that decide when a document is served (beside the quarantine).
_SERVING_FIELDS = ("version_state", "effective_from", "effective_to")


def _served_from(doc: Document, now: datetime) -> bool:
    """Whether ``doc`` is served at some instant from ``now`` on."""
    end = doc.effective_to
    return row_served(doc, max(start_of(doc), now)) if end > now else False


def row_direction(before: Document, after: Document, now: datetime) -> Direction:
    """The direction of one row's change (and of the payload write that follows it)."""
    if (row_served(before, now) and not row_served(after, now)) or (
        _served_from(before, now) and not _served_from(after, now)
    ):
        return Direction.HIDE
    lifted = (
        before.quarantined
        and before.quarantine_reason in MANAGED_QUARANTINE_REASONS
        and not after.quarantined
    )
    if lifted and all(getattr(before, f) == getattr(after, f) for f in _SERVING_FIELDS):
        return Direction.RESTORE
    return Direction.CHANGE


def payload_direction(target: PayloadTarget, now: datetime) -> Direction:
    """The direction of a payload write with no row change: chunks set to what their row says.

    The chunks it rewrites differ from ``target.payload``; which of them were served the plan
    does not say, so a payload that is not served from ``now`` on may hide some (orphans
    quarantined, chunks of a superseded row that a re-chunking run set back to ``current``):
    taken as hiding. One that is served changes what is served, at most."""
    payload = target.payload
    start = payload_instant(payload.get("effective_from"), OPEN_START)
    if target.partial or not payload_served(payload, max(start, now)):
        return Direction.HIDE
    return Direction.CHANGE


@dataclass(frozen=True)
class _Write:
    family: str
    points: int
    direction: Direction


def _writes(plan: Plan, now: datetime) -> Iterable[_Write]:
    """Every write of ``plan`` with its family, chunks and direction (a row change and its
    payload write share the row's direction)."""
    by_doc: dict[str | None, RowUpdate] = {u.doc_id: u for u in plan.row_updates}
    written: set[str] = set()
    for target in plan.payload_targets:
        update = by_doc.get(target.doc_id)
        family = target.family or f"(orphan){target.doc_id}"
        if update is not None:
            written.add(update.doc_id)
            direction = row_direction(update.before, update.after, now)
        else:
            direction = payload_direction(target, now)
        yield _Write(family, target.points, direction)
    for update in plan.row_updates:
        # (a document moving to another family changes the family it leaves too)
        if update.doc_id not in written or update.family != update.after.doc_family_id:
            yield _Write(update.family, 0, row_direction(update.before, update.after, now))


def weigh(plan: Plan, now: datetime) -> Weights:
    """What the guard weighs: the families and chunks each direction of ``plan`` touches.

    ``changed`` counts every write but restores (a family with both counts in both)."""
    families: dict[Direction, set[str]] = defaultdict(set)
    chunks: dict[Direction, int] = defaultdict(int)
    for write in _writes(plan, now):
        families[write.direction].add(write.family)
        chunks[write.direction] += write.points
    counted = families[Direction.HIDE] | families[Direction.CHANGE]
    moving = {move.family for move in plan.moves}
    return Weights(
        moving_families=len(moving),
        moving_chunks=plan.moved_points(),
        changed_families=len(counted),
        changed_chunks=chunks[Direction.HIDE] + chunks[Direction.CHANGE],
        hiding_families=len(families[Direction.HIDE]),
        hiding_chunks=chunks[Direction.HIDE],
        restoring_families=len(families[Direction.RESTORE]),
        restoring_chunks=chunks[Direction.RESTORE],
    )


def decide(
    options: Options,
    totals: Totals,
    plan: Plan,
    sources: Mapping[str, SourceState],
    now: datetime | None = None,
) -> GuardDecision:
    """The blast-radius guard: may ``plan`` be written? (A source that had documents and
    returned none; more than ``max_changed_fraction`` of families or chunks hidden or changed;
    more than ``max_restored_fraction`` restored. ``now``: the run's instant, which decides
    what is served; ``options.now``, else the clock's, when not given.)"""
    weights = weigh(plan, now or options.now or datetime.now(UTC))
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
            (("families", weights.changed_families), ("chunks", weights.changed_chunks)),
        ),
        (
            "restored",
            guard.max_restored_fraction,
            (("families", weights.restoring_families), ("chunks", weights.restoring_chunks)),
        ),
        *([moved] if options.split is not None else []),
    ):
        for what, changed in measured:
            total = families_total if what == "families" else chunks_total
            if scoped or changed <= guard.floor or changed / total <= limit:
                continue
            if direction not in over:
                over.append(direction)
            reasons.append(_blast_radius(direction, what, changed, total, limit, weights))
    reasons += shrunken_index(options, totals)
    writing = options.mode.writes and bool(reasons)
    return GuardDecision(
        totals=totals,
        changed_families=weights.changed_families,
        changed_chunks=weights.changed_chunks,
        max_changed_fraction=guard.max_changed_fraction,
        weights=weights,
        max_restored_fraction=guard.max_restored_fraction,
        over=tuple(over),
        reasons=tuple(reasons),
        refused=writing and not options.force,
        forced=writing and options.force,
        max_moved_fraction=guard.max_moved_fraction if options.split is not None else None,
    )


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
        actual[f"hiding_{what}"] = getattr(weights, f"hiding_{what}")
    return Finding(
        check="guard",
        kind="blast_radius",
        severity=Severity.CRITICAL,
        family=None,
        doc_id=None,
        expected={"direction": direction, what: f"<= {limit:.0%} of {total} ({key})"},
        actual=actual,
        action="refuse the run (rerun with --force after review)"
        + (
            "; to move an existing deployment into a split store, `reconciler split --dry-run` "
            "shows the moves and `reconciler split` makes them"
            if direction == "moved"
            else ""
        ),
    )


def shrunken_index(options: Options, totals: Totals) -> list[Finding]:
    """An index that lost more than the allowed fraction of the chunks the table registers is
    a failure of the store, not drift: no write goes on top of it. A scoped repair
    (``--doc``, ``--family``) measures only its documents, never the index: like the
    fraction rule, this rule does not hold it back (it asks a re-ingest of what it names)."""
    if options.families is not None or options.doc_id is not None:
        return []
    missing = totals.chunks_expected - totals.chunks_found
    limit = options.guard.max_changed_fraction
    if missing <= options.guard.floor or missing / max(totals.chunks_expected, 1) <= limit:
        return []
    return [
        Finding(
            check="guard",
            kind="index_shrunk",
            severity=Severity.CRITICAL,
            family=None,
            doc_id=None,
            expected={"chunks": f">= {1 - limit:.0%} of {totals.chunks_expected}"},
            actual={
                "chunks": totals.chunks_found,
                "fraction": round(totals.chunks_found / max(totals.chunks_expected, 1), 4),
            },
            action=(
                "refuse the run: the chunk index lost points the table registers (restore "
                "it, or re-ingest, then run again; --force writes anyway)"
            ),
        )
    ]


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
