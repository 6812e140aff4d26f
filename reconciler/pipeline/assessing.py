"""Stage 3 of a run: every family of the scan checked with its chunks, then the checks over
the collection and over the sources, and the plan that repairs what they find
(``Assessment``). The checks and their parts are the registry's (``checks.parts``): this
stage names none of them.

Each family is one value (``FamilyOutcome``), and the families fold into one (``Checked``);
the parts over the collection and the sources are values too (``Wide``); the summary is
counted from those values."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from itertools import groupby
from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler import planning
from reconciler.check_inputs import (
    ChunkAggregate,
    CollectionView,
    FamilyView,
    SourcesView,
    Wide,
)
from reconciler.checks import CHECKS, MOVING_CHECKS, Parts, parts
from reconciler.model import Document, Finding, SourceDocument
from reconciler.pipeline import membership
from reconciler.pipeline.checking import NO_PLAN, check_context, check_family, family_view
from reconciler.pipeline.scanning import FAMILY_OF, table_rows
from reconciler.pipeline.values import Assessment, FamilyOutcome, Options, Scan, SourcesRead
from reconciler.planning import Plan
from reconciler.ports import ChunkReader, DocumentReader

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


@dataclass(frozen=True)
class Checked:
    """What some checks found, folded: their findings and plans in order, how many things
    each checked, the seconds each took, and the doc ids whose source problems a family
    took."""

    findings: tuple[Finding, ...] = ()
    plans: tuple[Plan, ...] = ()
    checked: Mapping[str, int] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)
    claimed: frozenset[str] = frozenset()


def assess(
    table: DocumentReader,
    index: ChunkReader,
    options: Options,
    now: datetime,
    sources: SourcesRead,
    scan: Scan,
) -> Assessment:
    """Check every family of ``scan`` with its chunks, then the collection and the sources;
    plan the repair of what they find."""
    chosen = [parts()[name] for name in CHECKS if name in options.checks]
    names = [part.name for part in chosen]
    ctx = check_context(options, now, sources)
    moving = bool(MOVING_CHECKS & options.checks)
    views = (
        family_views(table, options, sources, scan, moving=moving)
        if scan.unsettled is None
        else unsettled_views(table, options, sources, scan)
    )
    families = fold_families(
        ((view, check_family(view, ctx, names, options.doc_id)) for view in views),
        settled=scan.settled,
        per_family=[p.name for p in chosen if p.family is not None and p.check.per_family],
    )
    supported = bool(getattr(index, "supports_payload_indexes", False))
    collection = CollectionView(
        chunks_scanned=scan.totals.chunks,
        chunks_expected=scan.totals.chunks_expected,
        chunks_found=scan.totals.chunks_found,
        whole=scan.scope is None and options.doc_id is None,
        doc_id=options.doc_id,
        split=options.split,
        orphans=tuple(scan.chunks.orphans()),
        payload_indexes=index.payload_indexes if supported else None,
    )
    over_sources = None
    if scan.scope is None:
        # A problem of a document outside this shard (or not in the source at all, yet
        # registered) is not "unregistered".
        loose = [d for d in set(sources.problems) - families.claimed if d not in sources.by_id]
        unclaimed = set(loose) - _registered(table, loose)
        over_sources = SourcesView(
            now=now,
            states=sources.states,
            documents=tuple(sources.by_id.values()),
            problems=sources.problems,
            loose_problems=sources.loose_problems,
            unclaimed=tuple(p for doc_id in sorted(unclaimed) for p in sources.problems[doc_id]),
            rows_by_source=scan.totals.rows_by_source,
        )
    wide = check_wide(chosen, collection, over_sources)
    findings = (*families.findings, *wide.findings)
    counted = Counter(f.check for f in findings)
    checked = {**families.checked, **wide.checked}
    return Assessment(
        findings=findings,
        plan=Plan.combine((*families.plans, *wide.plans)),
        summary={
            name: {"checked": checked.get(name, 0), "findings": counted[name]} for name in names
        },
        timings=_summed(families.timings, wide.timings),
    )


def fold_families(
    checked: Iterable[tuple[FamilyView, FamilyOutcome]],
    *,
    settled: int = 0,
    per_family: Sequence[str] = (),
) -> Checked:
    """Each family's outcome folded into one value (a family counts once for each check
    that ran on it; an empty plan is not kept: one a family would make memory grow).
    ``settled``: families the scan settled (``pipeline.settling``), counted as checked by each
    of the ``per_family`` checks, with nothing found."""
    findings: list[Finding] = []
    plans: list[Plan] = []
    counts: Counter[str] = Counter(dict.fromkeys(per_family, settled) if settled else {})
    timings: dict[str, float] = defaultdict(
        float, dict.fromkeys(per_family, 0.0) if settled else {}
    )
    claimed: set[str] = set()
    for view, outcome in checked:
        if outcome.findings:
            findings += outcome.findings
        if outcome.plan is not NO_PLAN and not outcome.plan.empty:
            plans.append(outcome.plan)
        if view.problems:
            claimed.update(view.problems)
        for name, seconds in outcome.timings.items():
            timings[name] += seconds
            counts[name] += 1
    return Checked(
        findings=tuple(findings),
        plans=tuple(plans),
        checked=MappingProxyType(dict(counts)),
        timings=MappingProxyType(dict(timings)),
        claimed=frozenset(claimed),
    )


def check_wide(
    chosen: Sequence[Parts], collection: CollectionView, over_sources: SourcesView | None
) -> Checked:
    """The chosen checks' parts over the collection, then those over the sources (a run of
    the whole shard: ``over_sources`` given), each planned by its check's planner. A check's
    seconds are those of its part on the families; one without that part is timed here."""
    findings: list[Finding] = []
    plans: list[Plan] = []
    checked: dict[str, int] = {}
    timings: dict[str, float] = defaultdict(float)
    runs: list[tuple[Parts, Callable[[], Wide]]] = [
        (part, partial(part.collection, collection))
        for part in chosen
        if part.collection is not None
    ]
    if over_sources is not None:
        runs += [
            (part, partial(part.sources, over_sources))
            for part in chosen
            if part.sources is not None
        ]
    for part, run in runs:
        started = time.perf_counter()
        found = run()
        if not part.check.per_family:
            timings[part.name] += time.perf_counter() - started
        findings += found.findings
        if found.checked is not None:
            checked[part.name] = found.checked
        if part.check.plans is not None:
            planner = getattr(planning, part.check.plans)
            plans.append(planner(found.findings, collection))
    return Checked(
        findings=tuple(findings),
        plans=tuple(plans),
        checked=MappingProxyType(checked),
        timings=MappingProxyType(dict(timings)),
    )


def family_views(
    table: DocumentReader,
    options: Options,
    sources: SourcesRead,
    scan: Scan,
    *,
    moving: bool,
) -> Iterator[FamilyView]:
    """Every family of the scan as the checks see it, with its chunks: the table streamed
    once more, family by family. ``moving``: a check places documents in the families the
    sources give them, so the rows that belong to another family now are checked there, and
    both families with them (``pipeline.membership``); documents without a row join the
    family the sources place them in."""
    scope = scan.scope
    expected = scan.expected

    def covered(family: str) -> bool:
        return options.shard.owns(family) and (scope is None or family in scope)

    # (documents registered outside the scan that move into a family it covers join it)
    outside, joining = membership.incoming(
        table, [d for d in sources.by_id if d not in expected], sources, covered, moving
    )
    # Source documents without a row, by family (their families may have no rows at all).
    new_by_family: dict[str, list[SourceDocument]] = defaultdict(list)
    for doc_id, doc in sources.by_id.items():
        if doc_id not in expected and doc_id not in outside:
            family = sources.family_of[doc_id]
            if covered(family):
                new_by_family[family].append(doc)
    moved = _moves(table, options, scope, sources) if moving else {}
    moved.update((row.doc_id, membership.target(row, sources)) for row in joining)
    touched = set(moved.values()) | {row.doc_family_id for row in joining}
    held: list[Document] = list(joining)  # (the rows of the families a move touches)
    for family, group in groupby(table_rows(table, options, scope), key=FAMILY_OF):
        members = tuple(group)
        if moved and (family in touched or any(row.doc_id in moved for row in members)):
            held.extend(members)
        else:
            yield view_after_scan(
                table, family, members, sources, scan, new_by_family.pop(family, [])
            )
    for family, regrouped in sorted(membership.regroup(held, moved, covered).items()):
        yield view_after_scan(
            table, family, regrouped, sources, scan, new_by_family.pop(family, [])
        )
    for family, docs in sorted(new_by_family.items()):
        yield view_after_scan(table, family, (), sources, scan, docs)


def unsettled_views(
    table: DocumentReader, options: Options, sources: SourcesRead, scan: Scan
) -> Iterator[FamilyView]:
    """``family_views`` of the families the scan did not settle (``Scan.unsettled``), read
    ``LOOKUP`` families a statement, in the table's order. Only a run that moves no document
    and reads no source's documents settles families: none join or leave one."""
    unsettled = scan.unsettled or ()
    for start in range(0, len(unsettled), LOOKUP):
        some = unsettled[start : start + LOOKUP]
        for family, group in groupby(table_rows(table, options, some), key=FAMILY_OF):
            yield view_after_scan(table, family, tuple(group), sources, scan, [])


def _summed(*timings: Mapping[str, float]) -> Mapping[str, float]:
    total: dict[str, float] = defaultdict(float)
    for each in timings:
        for name, seconds in each.items():
            total[name] += seconds
    return MappingProxyType(dict(total))


def _moves(
    table: DocumentReader, options: Options, scope: frozenset[str] | None, sources: SourcesRead
) -> dict[str, str]:
    """Each row that belongs to another family now, to that family (one more stream of the
    scope)."""
    if not sources.family_of:
        return {}
    return membership.moves(table_rows(table, options, scope), sources)


def _registered(table: DocumentReader, doc_ids: Sequence[str]) -> set[str]:
    """Those of ``doc_ids`` (documents outside this shard or scope, or not in the scan) that
    have a row: looked up ``LOOKUP`` at a time, never one query a document."""
    found: set[str] = set()
    for start in range(0, len(doc_ids), LOOKUP):
        found.update(table.get_documents(doc_ids[start : start + LOOKUP]))
    return found


def view_after_scan(
    table: DocumentReader,
    family: str,
    rows: tuple[Document, ...],
    sources: SourcesRead,
    scan: Scan,
    new_docs: list[SourceDocument],
) -> FamilyView:
    """A family as the checks see it after the scan: its chunks, and the documents it
    names outside itself looked for in the scan, then the table."""
    chunks: dict[str, ChunkAggregate] = {}
    for row in rows:
        aggregate = scan.chunks.get(row.doc_id)
        if aggregate is None and row.chunk_count and scan.chunks.is_short(row.doc_id):
            aggregate = ChunkAggregate()  # every chunk of it is gone
        elif aggregate is None and row.doc_id not in scan.expected:
            # A row joining from outside the scan (another shard's family): its chunks were
            # not scanned. Taken to match their row, so that a change writes them (the
            # applier reads each point first and writes only those that differ).
            count = row.chunk_count or 1
            aggregate = ChunkAggregate(count=count, matching=count)
        if aggregate is not None:
            chunks[row.doc_id] = aggregate
    view = family_view(family, rows, sources, new_docs, chunks)
    own = {row.doc_id for row in rows}
    outside = {d for d in view.registered if d not in own and d not in scan.expected}
    if not outside:
        return view
    found = table.get_documents(outside)
    return dataclasses.replace(
        view, registered=frozenset(d for d in view.registered if d not in outside or d in found)
    )


#: Documents whose rows are looked up at once (those a family names outside the scan, those
#: with a problem and no document, for whether another shard registered them).
LOOKUP = 500
