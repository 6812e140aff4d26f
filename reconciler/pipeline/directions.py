"""What each write of a plan does to the served set (the guard's directions, ``guarding``):
a row's change (``row_direction``), a payload write's (``payload_direction``), and every
document of a plan once (``effects``), a window now ending earlier with nothing taking over at
its end weighed as a hide, and a version superseded now by a successor of its family that
serves in its place, and a successor scheduled ahead brought forward to serve now in its
family's place, weighed as relabels (``rules.handover``)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from reconciler.model import MANAGED_QUARANTINE_REASONS, OPEN_START, Document, VersionState
from reconciler.planning import PayloadTarget, Plan, RowUpdate
from reconciler.rules.handover import ends_earlier, taken_over
from reconciler.rules.time_rule import payload_instant, payload_served, row_served, start_of


class Direction(enum.StrEnum):
    """What a document's write does to what ``default_filter()`` returns of it."""

    #: Served now, or later, before the write; not after.
    HIDE = "hide"
    #: Served after at an instant it was not before: not served now before and served now
    #: after (a version un-retired, a draft made current, a scheduled version brought forward
    #: where its family served nothing now), or served from now on after and at no instant
    #: from now on before; not a restore. A scheduled successor brought forward to serve now
    #: alone in its family in place of the version it served is a relabel (``_directions``).
    REVEAL = "reveal"
    #: A quarantine the reconciler set is lifted because its cause is gone, nothing else moves.
    RESTORE = "restore"
    #: Served before and after; something else changes (family, metadata, a window end ahead,
    #: a handover in force or a scheduled one brought forward: ``rules.handover``).
    RELABEL = "relabel"
    #: Served neither before nor after (an unserved version relabelled or moved).
    UNSERVED = "unserved"


#: The directions that change the served set (``guard.max_changed_fraction``).
SERVED_SET = frozenset({Direction.HIDE, Direction.REVEAL})

#: The row fields that decide when a document is served (beside the quarantine).
_SERVING_FIELDS = ("version_state", "effective_from", "effective_to")


def _served_from(doc: Document, now: datetime) -> bool:
    """Whether ``doc`` is served at some instant from ``now`` on."""
    end = doc.effective_to
    return row_served(doc, max(start_of(doc), now)) if end > now else False


def row_direction(before: Document, after: Document, now: datetime) -> Direction:
    """The direction of one row's change (and of the payload write that follows it)."""
    now_before, now_after = row_served(before, now), row_served(after, now)
    later_before, later_after = _served_from(before, now), _served_from(after, now)
    if (now_before and not now_after) or (later_before and not later_after):
        return Direction.HIDE
    lifted = (
        before.quarantined
        and before.quarantine_reason in MANAGED_QUARANTINE_REASONS
        and not after.quarantined
    )
    if lifted and all(getattr(before, f) == getattr(after, f) for f in _SERVING_FIELDS):
        return Direction.RESTORE
    if (now_after and not now_before) or (later_after and not later_before):
        return Direction.REVEAL
    if later_before or now_before:
        return Direction.RELABEL
    return Direction.UNSERVED


def payload_direction(target: PayloadTarget, now: datetime) -> Direction:
    """The direction of a payload write with no row change: chunks set to what their row says.

    Which of the chunks it rewrites were served the plan does not say, so a payload that is
    not served from ``now`` on may hide some (orphans quarantined, chunks of a superseded row
    that a re-chunking run set back to ``current``): taken as hiding. One that is served
    serves what the row, the record payloads are derived from, already serves: a relabel."""
    payload = target.payload
    start = payload_instant(payload.get("effective_from"), OPEN_START)
    if target.partial or not payload_served(payload, max(start, now)):
        return Direction.HIDE
    return Direction.RELABEL


@dataclass(frozen=True)
class Effect:
    """One document's writes in a plan: the family it is counted in (the one it is served in
    before the run), the chunks written, and their direction."""

    doc_id: str | None
    family: str
    points: int
    direction: Direction


def effects(plan: Plan, now: datetime) -> tuple[Effect, ...]:
    """Every document ``plan`` writes, once, with its direction (a row change and its payload
    write share the row's direction; a document that moves is counted in the family it
    leaves)."""
    by_doc: dict[str | None, RowUpdate] = {u.doc_id: u for u in plan.row_updates}
    found: list[Effect] = []
    written: set[str] = set()
    direction_of = _directions(plan, now)
    for target in plan.payload_targets:
        update = by_doc.get(target.doc_id) if target.doc_id is not None else None
        if update is not None:
            written.add(update.doc_id)
            direction = direction_of(update)
            found.append(Effect(update.doc_id, update.family, target.points, direction))
        else:
            family = target.family or f"(orphan){target.doc_id}"
            found.append(
                Effect(target.doc_id, family, target.points, payload_direction(target, now))
            )
    for update in plan.row_updates:
        if update.doc_id not in written:
            found.append(Effect(update.doc_id, update.family, 0, direction_of(update)))
    return tuple(found)


def _directions(plan: Plan, now: datetime) -> Callable[[RowUpdate], Direction]:
    """``row_direction`` of an update, but a window that now ends earlier, still ahead, with
    no version taking over at its end (``RowUpdate.handed_over``, nor a row of the plan in its
    family: a successor joining it) is a hide, and a version superseded now that the planner
    found handed over (its successor, of its family before the run, serves now) is a relabel,
    and so is a successor scheduled ahead that the planner found brought forward
    (``RowUpdate.takes_over``: served later before, now alone in the family that served
    another version now), as the same handover dated ahead is (``rules.handover``). The
    plan's rows are
    grouped by family once, when the first such window is met (a plan that closes every
    window of a large corpus looks at each family's rows, not at every row each time)."""
    families: dict[str, list[Document]] = {}

    def direction(update: RowUpdate) -> Direction:
        found = row_direction(update.before, update.after, now)
        after = update.after
        if found is Direction.HIDE:
            # (superseded now by a successor of its family that serves in its place: a
            # handover in force, ``rules.handover.handed_over_now``)
            handed = update.handed_over and after.version_state is VersionState.SUPERSEDED
            return Direction.RELABEL if handed else found
        if found is Direction.REVEAL:
            # (a scheduled successor brought forward: ``rules.handover.brought_forward``)
            return Direction.RELABEL if update.takes_over else found
        if found is not Direction.RELABEL or update.handed_over or after.effective_to <= now:
            return found
        if not ends_earlier(update.before, after):
            return found
        if not families:
            for other in plan.row_updates:
                families.setdefault(other.after.doc_family_id, []).append(other.after)
        return found if taken_over(after, families[after.doc_family_id]) else Direction.HIDE

    return direction
