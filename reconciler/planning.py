"""Findings -> a deterministic plan: row updates, payload writes, re-ingest requests, indexes.

Every repair decision is made here: checks propose (a finding's ``changes``, ``quarantine``,
``payload_only``, ``reingest``, ``index``), and only this module reads those proposals to
decide what is written, what a repair leaves outstanding, and how a family looks once planned.

Pure. Findings explain; the plan is derived from the *desired row* of each touched document:
row changes from every finding are merged (family last, so the source wins), quarantines are
merged by reason, and each payload write is ``payload_for(desired row)``. So the payload can
never disagree with the table, and a second plan over the repaired stores is empty.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

from reconciler.check_inputs import (
    ChunkAggregate,
    CollectionView,
    FamilyView,
    expected_variant,
)
from reconciler.checks.common import STATE_FIELDS
from reconciler.model import (
    MANAGED_QUARANTINE_REASONS,
    Document,
    Finding,
    ReingestRequest,
    VersionState,
    replaced,
)
from reconciler.payload import payload_for, same_payload, same_value, same_variant
from reconciler.rules.handover import brought_forward, ends_earlier, handed_over_now, taken_over
from reconciler.rules.time_rule import kept_in_main

#: Order in which row changes are merged; later wins (the source has the last word).
MERGE_ORDER = {"siblings": 0, "dates": 1, "family": 2}
#: Finding kinds whose repair is a payload write even when the row does not change.
PAYLOAD_KINDS = frozenset({"payload_drift", "effective_to_missing", "live_siblings"})
#: Row fields the reconciler manages (and audits).
ROW_FIELDS = (
    "doc_family_id",
    "doc_version",
    "version_state",
    "superseded_by",
    "effective_from",
    "effective_to",
    "doc_class",
    "title",
    "quarantined",
    "quarantine_reason",
)
#: A row's ``ROW_FIELDS``, read at once.
_ROW_VALUES = attrgetter(*ROW_FIELDS)


@dataclass(frozen=True)
class RowUpdate:
    """One document row changing, and why."""

    doc_id: str
    family: str
    before: Document
    after: Document
    reasons: tuple[str, ...]
    #: Where the row's window now ends earlier: another version of its family takes over at
    #: the new end (``rules.handover.taken_over``, over the family as its plan leaves it and
    #: the successors its source declares). The guard weighs an earlier end that nothing
    #: takes over as a hide, however far ahead (``guarding.effects``). Where the row is
    #: superseded now: the successor it names serves now, a version of its family before the
    #: run (``rules.handover.handed_over_now``), so the guard weighs a relabel.
    handed_over: bool = False
    #: Where the row, a successor served later before the run, is brought forward to serve now
    #: alone in its family in place of the version it served (``rules.handover.brought_forward``):
    #: the guard weighs a relabel, not a reveal.
    takes_over: bool = False

    def fields(self) -> dict[str, tuple[Any, Any]]:
        """Changed fields: name -> (before, after) (worked out once: the planner, the applier
        and the report each ask; read, never changed)."""
        return self._changed

    @functools.cached_property
    def _changed(self) -> dict[str, tuple[Any, Any]]:
        if self.before is self.after:
            return {}
        pairs = zip(ROW_FIELDS, _ROW_VALUES(self.before), _ROW_VALUES(self.after), strict=True)
        return {f: (b, a) for f, b, a in pairs if b != a}


@dataclass(frozen=True)
class PayloadTarget:
    """Set ``payload`` (logical keys) on every chunk of ``doc_id`` that does not carry it.

    ``points`` is the number the scan saw needing it; the applier re-reads each point and
    writes only those that differ, selecting them by id.
    """

    doc_id: str | None
    family: str | None
    payload: Mapping[str, Any]
    points: int
    reasons: tuple[str, ...]
    #: True for a partial write (orphans: only the quarantine keys).
    partial: bool = False


@dataclass(frozen=True)
class MoveTarget:
    """Move a document's chunks of a split store into the collection its (desired) row's
    state puts them in: ``to_archive``, or back to the main collection. ``points`` is the
    number the scan saw in the other one; the mover selects them through the doc_id filter
    and copies each whole (vectors as they are)."""

    doc_id: str
    family: str
    to_archive: bool
    points: int
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """Everything a run would write (a value: combine plans with ``Plan.combine``)."""

    row_updates: tuple[RowUpdate, ...] = ()
    payload_targets: tuple[PayloadTarget, ...] = ()
    reingests: tuple[ReingestRequest, ...] = ()
    indexes: tuple[tuple[str, str], ...] = ()
    #: A split store's moves (``[index] archive_collection``; none otherwise).
    moves: tuple[MoveTarget, ...] = ()

    def counts(self) -> dict[str, int]:
        """Writes by kind, as the ``writes`` object of the run's JSON (docs/contracts.md)."""
        return {
            "payload": len(self.payload_targets),
            "table": len(self.row_updates),
            "reingest": len(self.reingests),
            "points": sum(t.points for t in self.payload_targets),
            "index": len(self.indexes),
        }

    def moved_points(self) -> int:
        """Chunks the moves take from one collection of a split store to the other."""
        return sum(move.points for move in self.moves)

    def changed_families(self) -> set[str]:
        """Families any write touches."""
        return {u.family for u in self.row_updates} | {
            t.family or f"(orphan){t.doc_id}" for t in self.payload_targets
        }

    @property
    def empty(self) -> bool:
        """True when nothing would be written."""
        return not (
            self.row_updates or self.payload_targets or self.reingests or self.indexes or self.moves
        )

    @classmethod
    def combine(cls, plans: Iterable[Plan]) -> Plan:
        """One plan with every write of ``plans``, in order (plans are built family by
        family)."""
        row_updates: list[RowUpdate] = []
        payload_targets: list[PayloadTarget] = []
        reingests: list[ReingestRequest] = []
        indexes: list[tuple[str, str]] = []
        moves: list[MoveTarget] = []
        for plan in plans:
            row_updates += plan.row_updates
            payload_targets += plan.payload_targets
            reingests += plan.reingests
            indexes += plan.indexes
            moves += plan.moves
        return cls(
            tuple(row_updates),
            tuple(payload_targets),
            tuple(reingests),
            tuple(indexes),
            tuple(moves),
        )

    def without_reingests(self, doc_ids: Collection[str]) -> Plan:
        """This plan, minus the re-ingest requests of ``doc_ids`` (already queued)."""
        return dataclasses.replace(
            self, reingests=tuple(r for r in self.reingests if r.doc_id not in doc_ids)
        )


def _merge_quarantine(row: Document, decisions: Mapping[str, bool]) -> tuple[bool, str | None]:
    if row.quarantined and row.quarantine_reason not in MANAGED_QUARANTINE_REASONS:
        # Someone quarantined it by hand ("manual", ...): only a person lifts or replaces that.
        return row.quarantined, row.quarantine_reason
    active = [reason for reason in MANAGED_QUARANTINE_REASONS if decisions.get(reason) is True]
    if active:
        return True, active[0]
    reason = row.quarantine_reason
    if row.quarantined and reason in MANAGED_QUARANTINE_REASONS and decisions.get(reason) is False:
        return False, None
    return row.quarantined, row.quarantine_reason


def desired_row(
    row: Document, findings: Iterable[Finding], truth: Document | None = None
) -> tuple[Document, tuple[str, ...]]:
    """The row after every finding's repair, and the finding kinds that changed it.

    ``truth`` is what the source declares for this row (when it was read): its state fields
    win over anything the dates and siblings checks would set.
    """
    ordered = sorted(findings, key=lambda f: MERGE_ORDER.get(f.check, -1))
    changes: dict[str, Any] = {}
    decisions: dict[str, bool] = {}
    reasons: list[str] = []
    for finding in ordered:
        if finding.changes:
            changes.update(finding.changes)
            reasons.append(f"{finding.check}/{finding.kind}")
        if finding.quarantine is not None:
            reason, active = finding.quarantine
            decisions[reason] = active
            reasons.append(f"{finding.check}/{finding.kind}")
    if truth is not None:
        changes.update({f: getattr(truth, f) for f in STATE_FIELDS})
    after = replaced(row, **changes) if changes else row
    quarantined, why = _merge_quarantine(row, decisions)
    if (quarantined, why) != (row.quarantined, row.quarantine_reason):
        after = replaced(after, quarantined=quarantined, quarantine_reason=why)
    return after, tuple(dict.fromkeys(reasons))


def _points_to_write(after: Document, aggregate: ChunkAggregate | None, before: Document) -> int:
    if aggregate is None:
        return 0
    target = expected_variant(after)
    if same_variant(target, expected_variant(before)):
        return aggregate.drifted
    # Every chunk that matched the old row now differs, plus drifted ones that differ too.
    return aggregate.matching + sum(
        n for v, n in aggregate.variants.items() if not same_variant(v, target)
    )


def plan_family(
    view: FamilyView,
    findings: Iterable[Finding],
    truth: Mapping[str, Document] | None = None,
    *,
    split: bool = False,
    now: datetime | None = None,
) -> Plan:
    """The writes that repair one family's findings (``truth``: the source's declared rows;
    ``split``: a split store's, whose chunks follow their desired row's state; ``now``: the
    run's instant, which decides whether a version superseded now is handed over)."""
    row_updates: list[RowUpdate] = []
    payload_targets: list[PayloadTarget] = []
    reingests: list[ReingestRequest] = []
    moves: list[MoveTarget] = []
    by_doc: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.reingest is not None and finding.reingest not in reingests:
            reingests.append(finding.reingest)
        if finding.doc_id is not None:
            by_doc[finding.doc_id].append(finding)
    for row in view.rows:
        doc_findings = by_doc.get(row.doc_id, [])
        if not doc_findings:
            continue
        after, reasons = desired_row(row, doc_findings, (truth or {}).get(row.doc_id))
        update = RowUpdate(row.doc_id, row.doc_family_id, row, after, reasons)
        if update.fields():
            row_updates.append(update)
        payload_reasons = tuple(
            f"{f.check}/{f.kind}" for f in doc_findings if f.kind in PAYLOAD_KINDS
        )
        if update.fields() or payload_reasons:
            points = _points_to_write(after, view.chunks.get(row.doc_id), row)
            if points:
                payload_targets.append(
                    PayloadTarget(
                        doc_id=row.doc_id,
                        family=after.doc_family_id,
                        payload=payload_for(after),
                        points=points,
                        reasons=tuple(dict.fromkeys(reasons + payload_reasons)),
                    )
                )
        move = _move(after, view.chunks.get(row.doc_id), doc_findings) if split else None
        if move is not None:
            moves.append(move)
    return Plan(
        row_updates=_handovers(view, row_updates, now),
        payload_targets=tuple(payload_targets),
        reingests=tuple(reingests),
        moves=tuple(moves),
    )


def _handovers(
    view: FamilyView, updates: list[RowUpdate], now: datetime | None = None
) -> tuple[RowUpdate, ...]:
    """``updates``, each whose window now ends earlier marked ``handed_over`` where another
    version takes over at its new end: a row of the family as these updates leave it, or a
    successor its source declares. One superseded by the run (given ``now``, the run's
    instant) is marked where the successor it names serves at ``now`` and was in its family
    before the run (``rules.handover.handed_over_now``): a handover in force, not a merge. One
    scheduled ahead and brought forward to serve now alone in its family is marked
    ``takes_over`` (``rules.handover.brought_forward``): the same handover, made earlier."""
    superseded = VersionState.SUPERSEDED
    early = [
        n
        for n, u in enumerate(updates)
        if ends_earlier(u.before, u.after) or u.after.version_state is superseded
    ]
    if not early and now is None:
        return tuple(updates)
    afters = {u.doc_id: u.after for u in updates}
    rows = [afters.get(row.doc_id, row) for row in view.rows]
    for n, update in enumerate(updates):
        pairs = zip(view.rows, rows, strict=True)
        if now is not None and brought_forward(
            update.before, update.after, update.family, pairs, now
        ):
            updates[n] = dataclasses.replace(update, takes_over=True)
    for n in early:
        update = updates[n]
        if update.after.version_state is superseded:
            if now is not None and handed_over_now(
                update.after, update.family, zip(view.rows, rows, strict=True), now
            ):
                updates[n] = dataclasses.replace(update, handed_over=True)
            continue
        source = view.sources.get(update.doc_id)
        named = {*(source.declared_successors if source else ()), update.after.superseded_by}
        successors = [view.successors[s] for s in named if s is not None and s in view.successors]
        if taken_over(update.after, rows, successors):
            updates[n] = dataclasses.replace(update, handed_over=True)
    return tuple(updates)


def _move(
    after: Document, aggregate: ChunkAggregate | None, findings: Iterable[Finding]
) -> MoveTarget | None:
    """The move of a document's chunks that are in the other collection than its desired
    row's state puts them in (``kept_in_main``), if any are."""
    if aggregate is None:
        return None
    kept = kept_in_main(payload_for(after)["version_state"])
    points = aggregate.archived if kept else aggregate.count - aggregate.archived
    if not points:
        return None
    reasons = tuple(dict.fromkeys(f"{f.check}/{f.kind}" for f in findings))
    return MoveTarget(after.doc_id, after.doc_family_id, not kept, points, reasons)


def plan_orphan(finding: Finding, aggregate: ChunkAggregate) -> Plan:
    """Quarantine the chunks of a document that has no row (payload keys only)."""
    assert finding.payload_only is not None
    target = dict(finding.payload_only)
    points = sum(
        n
        for variant, n in aggregate.variants.items()
        if any(dict(variant).get(k) != v for k, v in target.items())
    )
    return Plan(
        payload_targets=(
            PayloadTarget(
                doc_id=finding.doc_id,
                family=finding.family,
                payload=target,
                points=points,
                reasons=(f"{finding.check}/{finding.kind}",),
                partial=True,
            ),
        )
    )


def plan_orphans(findings: Iterable[Finding], view: CollectionView) -> Plan:
    """The repair of what the payload check found over the collection: the chunks of documents
    without a row quarantined and, in a split store, moved out of the main collection (the
    points the rows lack are re-ingested, not written)."""
    orphans = dict(view.orphans)
    plans: list[Plan] = []
    for finding in findings:
        aggregate = orphans.get(finding.doc_id)
        if aggregate is None or finding.kind not in ("orphan_chunks", "misplaced"):
            continue
        if finding.kind == "orphan_chunks":
            plans.append(plan_orphan(finding, aggregate))
        else:
            plans.append(plan_orphan_move(finding, aggregate.count - aggregate.archived))
    return Plan.combine(plans)


def plan_orphan_move(finding: Finding, points: int) -> Plan:
    """Move the chunks of a document without a row out of a split store's main collection."""
    assert finding.doc_id is not None
    family = finding.family or f"(orphan){finding.doc_id}"
    reason = f"{finding.check}/{finding.kind}"
    return Plan(moves=(MoveTarget(finding.doc_id, family, True, points, (reason,)),))


#: Conditions a write cannot clear: they stay outstanding after a successful apply (the chunks
#: may be quarantined, but the source is still down, the edit still not re-ingested...).
PERSISTENT_KINDS = frozenset(
    {
        "in_place_edit",
        "ttl_expired",
        "successor_not_ingested",
        "not_ingested",
        "source_unreadable",
        "missing_in_source",
        "invalid_supersession",
        "invalid_source_document",
        "effective_window_invalid",
        "source_empty",
        "blast_radius",
    }
)


def repairs(finding: Finding) -> bool:
    """Whether the finding carries any write."""
    return bool(
        finding.changes
        or finding.quarantine is not None
        or finding.payload_only
        or finding.reingest is not None
        or finding.index is not None
    )


def outstanding(finding: Finding, *, applied: bool) -> bool:
    """Whether a finding still holds after the run (metrics and alerts read this)."""
    return not applied or finding.kind in PERSISTENT_KINDS or not repairs(finding)


def needs_write(current: Mapping[str, Any], target: PayloadTarget) -> bool:
    """Whether a point's logical payload differs from what the target sets."""
    if target.partial:
        return not all(same_value(current.get(k), v) for k, v in target.payload.items())
    return not same_payload(current, target.payload)


def plan_indexes(findings: Iterable[Finding], view: CollectionView | None = None) -> Plan:
    """Create the payload indexes the index check found missing (``view``: unused, a
    registered check's planner is given the collection it checked)."""
    return Plan(indexes=tuple(f.index for f in findings if f.index is not None))


def changes_a_row(finding: Finding) -> bool:
    """Whether the finding's repair sets fields of a document row."""
    return bool(finding.changes) and finding.doc_id is not None


def as_planned(view: FamilyView, plan: Plan) -> FamilyView:
    """The family as it will be once ``plan`` is applied (rows updated, chunks rewritten)."""
    updates = {u.doc_id: u.after for u in plan.row_updates}
    rewritten = {t.doc_id for t in plan.payload_targets if not t.partial}
    moved = {m.doc_id: m.to_archive for m in plan.moves}
    rows = tuple(updates.get(row.doc_id, row) for row in view.rows)
    chunks = {
        doc_id: (
            ChunkAggregate(
                count=aggregate.count,
                matching=aggregate.count,
                stale=aggregate.stale,
                archived=aggregate.archived,
            )
            if doc_id in rewritten or doc_id in updates
            else aggregate
        )
        for doc_id, aggregate in view.chunks.items()
    }
    for doc_id, to_archive in moved.items():
        if doc_id in chunks:
            count = chunks[doc_id].count
            chunks[doc_id] = dataclasses.replace(
                chunks[doc_id], archived=count if to_archive else 0
            )
    return dataclasses.replace(view, rows=rows, chunks=chunks)
