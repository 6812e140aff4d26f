"""Stage 3 of a run: the families the scan's first pass did not settle, checked with their
chunks (``FamilyChecks``, seeded from ``Scan.first``), the collection- and source-wide checks,
and the plan that repairs what they find (``Assessment``)."""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from itertools import groupby

from reconciler.check_inputs import ChunkAggregate, FamilyView
from reconciler.checks.family import UNREADABLE_PROBLEMS, unregistered_findings
from reconciler.checks.hash import check_source, unreadable_findings
from reconciler.checks.index import check_index
from reconciler.checks.payload import check_orphan_placement, check_orphans, check_points
from reconciler.checks.source_yield import check_source_yield
from reconciler.model import Document, SourceDocument
from reconciler.pipeline import membership
from reconciler.pipeline.checking import FamilyChecks, family_view, in_doc_scope
from reconciler.pipeline.scanning import FAMILY_OF, table_rows
from reconciler.pipeline.values import Assessment, Options, Scan, SourcesRead
from reconciler.planning import Plan, plan_indexes, plan_orphan, plan_orphan_move
from reconciler.ports import ChunkReader, DocumentReader


def assess(
    table: DocumentReader,
    index: ChunkReader,
    options: Options,
    now: datetime,
    sources: SourcesRead,
    scan: Scan,
) -> Assessment:
    """Check the families ``scan`` did not settle in its first pass (``scan.first``; every
    family when it ran none), and the collection- and source-wide checks; plan the repair of
    what they find."""
    checks = FamilyChecks(options, now, sources, seed=scan.first)
    scope = scan.scope
    expected = scan.expected
    # Source documents without a row, by family (their families may have no rows at all).
    new_by_family: dict[str, list[SourceDocument]] = defaultdict(list)

    def covered(family: str) -> bool:
        return options.shard.owns(family) and (scope is None or family in scope)

    # (documents registered outside the scan that move into a family it covers join it)
    outside, joining = membership.incoming(
        table, [d for d in sources.by_id if d not in expected], sources, covered, checks.moving
    )
    for doc_id, doc in sources.by_id.items():
        if doc_id not in expected and doc_id not in outside:
            family = sources.family_of[doc_id]
            if covered(family):
                new_by_family[family].append(doc)
    # Rows that belong to another family now: theirs and the families they join are checked
    # as the sources have them (``pipeline.membership``).
    moved = (
        dict(checks.moves)
        if checks.first_pass or not checks.moving
        else _moves(table, options, scope, sources)
    )
    moved.update((row.doc_id, membership.target(row, sources)) for row in joining)
    touched = set(moved.values()) | {row.doc_family_id for row in joining}
    # The families checked again, with their chunks: those the first pass left, those
    # with a document whose chunks differ from its row, and those with new documents.
    left = set(checks.revisit)
    revisit = left | set(new_by_family) | {f for f in touched if covered(f)}
    # (documents with a stale chunk, those that lack chunks and a split store's misplaced
    # ones are looked at with their chunks too: a first pass without chunks sees none)
    drifted = [
        *scan.chunks.drifted_ids(),
        *scan.chunks.stale_ids(),
        *scan.chunks.misplaced_ids(),
        *scan.short,
    ]
    for start in range(0, len(drifted), LOOKUP):  # (their families, a batch at a time)
        found = table.get_documents(drifted[start : start + LOOKUP])
        revisit |= {row.doc_family_id for row in found.values()}
    if drifted and scope is not None:  # (a row moved to another family since the first pass)
        revisit &= scope
    # (families the first pass did check are counted once, there)
    counted = revisit - left if checks.first_pass else set()
    if revisit or not checks.first_pass:
        # (a few families by name; many: one more stream of the scope, the others skipped)
        few = checks.first_pass and len(revisit) <= REVISIT_BY_NAME
        rows = table_rows(table, options, sorted(revisit) if few else scope)
        held: list[Document] = list(joining)  # (the rows of the families a move touches)
        for family, group in groupby(rows, key=FAMILY_OF):
            members = tuple(group)
            if family in touched or any(row.doc_id in moved for row in members):
                held.extend(members)
            elif few or not checks.first_pass or family in revisit:
                view = view_after_scan(
                    table, family, members, sources, scan, new_by_family.pop(family, [])
                )
                checks.take(view, again=family in counted)
        for family, regrouped in sorted(membership.regroup(held, moved, covered).items()):
            view = view_after_scan(
                table, family, regrouped, sources, scan, new_by_family.pop(family, [])
            )
            checks.take(view, again=family in counted)
    for family, docs in sorted(new_by_family.items()):
        checks.take(view_after_scan(table, family, (), sources, scan, docs))
    # A problem of a document outside this shard (or not in the source at all, yet
    # registered) is not "unregistered".
    loose = [d for d in set(sources.problems) - checks.claimed if d not in sources.by_id]
    unclaimed = set(loose) - _registered(table, loose)

    findings = checks.findings
    plans = checks.plans
    summary = checks.summary
    timings = checks.timings
    if "payload" in options.checks:
        summary["payload"]["checked"] = scan.totals.chunks
        if scope is None and options.doc_id is None:
            findings += check_points(scan.totals.chunks_expected, scan.totals.chunks_found)
        # Chunks whose doc_id has no row (the tally keeps them apart: no pass over every
        # document, no aggregate built for each).
        for orphan_id, aggregate in sorted(scan.chunks.orphans(), key=lambda kv: str(kv[0])):
            finding = check_orphans(orphan_id, aggregate)
            if finding is not None and in_doc_scope(options.doc_id, finding):
                findings.append(finding)
                plans.append(plan_orphan(finding, aggregate))
            if options.split is not None and orphan_id is not None:
                placed = check_orphan_placement(orphan_id, aggregate, options.split)
                if placed is not None and in_doc_scope(options.doc_id, placed):
                    findings.append(placed)
                    plans.append(plan_orphan_move(placed, aggregate.count - aggregate.archived))
    if scope is None:
        # Problems no registered document matches (a note that never parsed, an entry
        # without an id): the family check's. Unreadable parts of a source without a
        # document to name are the hash check's, with the source's own state.
        if "family" in options.checks:
            findings += unregistered_findings(
                [p for p in sources.loose_problems if p.kind not in UNREADABLE_PROBLEMS]
                + [p for doc_id in sorted(unclaimed) for p in sources.problems[doc_id]]
            )
            findings += check_source_yield(
                sources.states,
                sources.by_id.values(),
                scan.totals.rows_by_source,
                now,
                sources.problems,
            )
        if "hash" in options.checks:
            findings += unreadable_findings(sources.loose_problems, None)
            for state in sources.states.values():
                findings += check_source(state)
    if "index" in options.checks:
        started = time.perf_counter()
        supported = bool(getattr(index, "supports_payload_indexes", False))
        index_findings = check_index(
            index.payload_indexes() if supported else {}, supported=supported
        )
        summary["index"]["checked"] = 6 if supported else 0
        findings += index_findings
        plans.append(plan_indexes(index_findings))
        timings["index"] = time.perf_counter() - started
    for finding in findings:
        if finding.check in summary:
            summary[finding.check]["findings"] += 1
    return Assessment(
        findings=tuple(findings), plan=Plan.combine(plans), summary=summary, timings=timings
    )


def _moves(
    table: DocumentReader, options: Options, scope: frozenset[str] | None, sources: SourcesRead
) -> dict[str, str]:
    """The moves of a run whose scan checked no family (one more stream of the scope)."""
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


#: Up to this many families checked again after the scan are read by name; more, by one
#: more stream of the table that skips the others (a long ``IN`` list is slow to plan, and
#: SQLite caps its bound parameters).
REVISIT_BY_NAME = 500
#: Documents whose rows are looked up at once (drifted ones for their families, new ones
#: for whether another shard registered them).
LOOKUP = 500
