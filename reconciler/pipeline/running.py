"""One reconciliation run: read the three stores, run the checks, plan, guard, apply, record.

Streaming throughout: the table is read once, family by family (expected payload fingerprints,
and the checks of every family that can be judged without its chunks; those with something
to report are read again after the scan, see ``FamilyChecks``), the collection once (the lean ``scan_managed``; apply writes by the point ids that
scan kept, or selects a changed row's points through the doc_id filter), and the sources
once, as metadata. Memory holds compact per-document state, never a whole table or
collection.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from itertools import groupby
from operator import attrgetter
from typing import Any

from reconciler.check_inputs import ChunkAggregate, FamilyView
from reconciler.checks import CHECKS
from reconciler.checks.family import UNREADABLE_PROBLEMS, unregistered_findings
from reconciler.checks.hash import check_source, unreadable_findings
from reconciler.checks.index import check_index
from reconciler.checks.payload import check_orphans, check_points
from reconciler.checks.source_yield import check_source_yield
from reconciler.chunk_tally import ChunkTally
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import NotFound
from reconciler.model import (
    MANAGED_KEYS,
    Document,
    SourceDocument,
    VersionState,
    rfc3339,
)
from reconciler.payload import payload_values
from reconciler.pipeline.checking import FamilyChecks, family_view, in_doc_scope
from reconciler.pipeline.guarding import decide
from reconciler.pipeline.reading import read_sources
from reconciler.pipeline.recording import record
from reconciler.pipeline.values import (
    Assessment,
    Options,
    Report,
    Scan,
    SourcesRead,
    Totals,
)
from reconciler.planning import (
    Plan,
    plan_indexes,
    plan_orphan,
)
from reconciler.ports import ChunkIndex, DocumentTable
from reconciler.ports.source import SystemOfRecord

log = logging.getLogger(__name__)

#: How far ``--now`` may be from the clock before a run says it evaluates elsewhen.
AS_OF_FAR = timedelta(days=1)
_FAMILY_OF = attrgetter("doc_family_id")


class Reconciler:
    """Runs reconciliation over one deployment's stores and sources.

    A run is five stages, each a method or function that takes the previous stages' frozen
    values (``reconciler.pipeline.values``) and returns its own: ``read_sources`` ->
    ``SourcesRead`` (``pipeline.reading``); ``scan`` -> ``Scan`` (table and collection);
    ``assess`` -> ``Assessment`` (checks and plan, family by family, ``pipeline.checking``);
    ``decide`` -> ``GuardDecision`` (``pipeline.guarding``); ``record`` -> ``ApplyResult``
    (writing modes only, ``pipeline.recording``).
    ``run`` chains them into a ``Report``, and hands ``scan`` and ``assess`` one
    ``FamilyChecks``, so that the families the table pass can judge are checked there (without
    it, ``assess`` checks every family after the scan: the same findings).
    """

    def __init__(
        self,
        *,
        table: DocumentTable,
        index: ChunkIndex,
        sources: Sequence[SystemOfRecord],
        progress: Callable[[str, int], None] | None = None,
        keep_writing: Callable[[], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.table = table
        #: What "now" is when ``Options.now`` is not given, and the run's start and end.
        self.clock = clock
        self.index = index
        self.sources = list(sources)
        self.progress = progress
        #: Raises when this runner may no longer write (the lease was lost); checked before
        #: each payload batch.
        self.keep_writing = keep_writing

    # -- the run ---------------------------------------------------------------------------

    def run(self, options: Options) -> Report:
        """Check, plan and (in writing modes) apply under the guard."""
        now = options.now or self.clock.now()
        if options.now is not None and abs(options.now - self.clock.now()) > AS_OF_FAR:
            log.warning(
                "evaluating as of %s, %d day(s) from the clock: the sources read now are "
                "recorded as read now, not then (their TTL keeps the clock's time)",
                rfc3339(options.now),
                abs(options.now - self.clock.now()).days,
            )
        unknown = options.checks - set(CHECKS)
        if unknown:
            raise ValueError(f"unknown check(s): {', '.join(sorted(unknown))}")
        run_id = options.run_id or str(uuid.uuid4())
        started_at = self.clock.now()
        sources = self.read_sources(options, now)
        checks = FamilyChecks(options, now, sources)
        scan = self.scan(options, self.scope(options, sources), checks)
        assessment = self.assess(options, now, sources, scan, checks)
        plan = self.without_queued_reingests(assessment.plan)
        decision = decide(options, scan.totals, plan, sources.states, now)
        findings = [*assessment.findings, *decision.reasons]
        applied = None
        if options.mode.writes:
            applied = record(
                self.table,
                self.index,
                options,
                now,
                sources,
                clock=self.clock,
                progress=self.progress,
                keep_writing=self.keep_writing,
                run_id=run_id,
                started_at=started_at,
                findings=findings,
                plan=plan,
                decision=decision,
                scan=scan,
                timings=assessment.timings,
            )
        report = Report(
            run_id=run_id,
            mode=options.mode,
            started_at=started_at,
            finished_at=self.clock.now(),
            findings=tuple(findings),
            plan=plan,
            summary={check: dict(counts) for check, counts in assessment.summary.items()},
            refused=decision.refused,
            forced=decision.forced,
            guard=decision.to_json(),
            applied=applied,
            sources=sources.states,
            chunks_scanned=scan.totals.chunks,
            timings=dict(assessment.timings),
        )
        log.info(
            "%s %s: %.2fs, %d chunk(s) scanned, %d finding(s), writes %s%s",
            options.mode,
            f"run {report.run_id}" if options.mode.writes else "(read-only, not recorded)",
            (self.clock.now() - report.started_at).total_seconds(),
            report.chunks_scanned,
            len(report.findings),
            report.writes(),
            " REFUSED by the guard" if report.refused else "",
            extra={
                "run_id": report.run_id if options.mode.writes else None,
                "mode": str(options.mode),
                "job": options.job or str(options.mode),
                "findings": len(report.findings),
                "writes": report.writes(),
                "refused": report.refused,
            },
        )
        return report

    # -- stage 1: the sources (``reconciler.pipeline.reading``) ----------------------------

    def read_sources(self, options: Options, now: datetime) -> SourcesRead:
        """Scan every source (when a check needs them) and give each document its family."""
        return read_sources(self.table, self.sources, options, now)

    # -- stage 2: the table and the collection ---------------------------------------------

    def scope(self, options: Options, sources: SourcesRead) -> frozenset[str] | None:
        """The families a scoped run (``--doc``, ``--family``) covers; raise for unknown ids."""
        if options.doc_id is not None:
            found = self.table.get_documents([options.doc_id]).get(options.doc_id)
            family = found.doc_family_id if found else sources.family_of.get(options.doc_id)
            if family is None:
                raise NotFound(
                    f"no such document: {options.doc_id!r} is neither in the document table "
                    "nor in a source that could be read (doc ids are '<source>:<id>'; "
                    "see `reconciler status`)"
                )
            return frozenset({family})
        if options.families is not None:
            in_sources = set(sources.family_of.values())
            named = options.families - in_sources
            unknown = sorted(named - self.table.known_families(named)) if named else []
            if unknown:
                raise NotFound(
                    f"no such family: {', '.join(map(repr, unknown))} is neither in the "
                    "document table nor in a source that could be read (family ids are "
                    "'<source>:<family>')"
                )
        return options.families

    def _rows(self, options: Options, families: Iterable[str] | None = None) -> Iterator[Document]:
        rows = self.table.iter_documents(
            batch_size=options.table_batch,
            families=list(families) if families is not None else None,
        )
        if options.shard.whole:
            return rows
        owns = options.shard.owns
        return (row for row in rows if owns(row.doc_family_id))

    def scan(
        self, options: Options, scope: frozenset[str] | None, checks: FamilyChecks | None = None
    ) -> Scan:
        """Fingerprint every row's expected payload, then fold the collection per document.

        The table is streamed once here, family by family; ``checks`` (when given) checks each
        family as it passes (``FamilyChecks.first``). The collection is streamed once, a page
        at a time. Memory holds 28 bytes a document (``ChunkTally``), plus the doc id and
        payload variants of each document with a differing chunk.
        """
        tally = ChunkTally(keep_ids=options.keep_ids)
        families = 0
        rows_by_source: dict[str, int] = defaultdict(int)
        in_scope: list[str] = []
        owns = options.shard.owns
        retired = VersionState.RETIRED
        batch: list[tuple[Any, ...]] = []
        contents: list[str | None] = []
        counts: list[int] = []
        if checks is not None:
            checks.first_pass = True
        for family, group in groupby(self._rows(options, scope), key=_FAMILY_OF):
            rows = tuple(group)
            families += 1
            for row in rows:
                batch.append((row.doc_id, *payload_values(row)))
                contents.append(row.source_hash)
                counts.append(row.chunk_count)
                if row.version_state is not retired:  # what the source should still hold
                    rows_by_source[row.source] += 1
            if scope is not None:
                in_scope += (row.doc_id for row in rows)
            if len(batch) >= 256:
                tally.expect_rows(batch, contents=contents, counts=counts)
                batch, contents, counts = [], [], []
            if checks is not None:
                checks.first(family, rows)
        tally.expect_rows(batch, contents=contents, counts=counts)
        tally.seal()

        scanned = 0
        if scope is None or in_scope:
            family_at = MANAGED_KEYS.index("doc_family_id")

            def owned(values: tuple[Any, ...]) -> bool:
                family = values[family_at]
                return owns(family if isinstance(family, str) else None)

            progress, every, shown = self.progress, options.scroll_batch, 0
            for page in self.index.scan_managed(
                batch_size=options.scroll_batch, doc_ids=in_scope if scope is not None else None
            ):
                # A chunk written from payload_for carries exactly the row's values, so one
                # hash of the raw tuple settles it, a page at a time; only a mismatch pays for
                # normalising (dates parsed).
                tally.add_page(page, owned)
                scanned += len(page)
                if progress is not None and scanned - shown >= every:
                    progress("scanned", scanned)
                    shown = scanned
        wanted, found = tally.shortfall()
        return Scan(
            scope=scope,
            expected=tally.registered,
            chunks=tally,
            totals=Totals(
                families=families,
                rows_by_source=dict(rows_by_source),
                chunks=scanned,
                chunks_expected=wanted,
                chunks_found=found,
            ),
            short=self._short(options, scope, tally) if found < wanted else (),
        )

    def _short(
        self, options: Options, scope: frozenset[str] | None, tally: ChunkTally
    ) -> tuple[str, ...]:
        """The rows with fewer chunks than they say (one more stream of the table, only when
        some are: the tally does not keep doc ids), the first ``SHORT_KEPT`` of them."""
        short: list[str] = []
        for row in self._rows(options, scope):
            if row.chunk_count and tally.is_short(row.doc_id):
                short.append(row.doc_id)
                if len(short) >= SHORT_KEPT:
                    log.warning(
                        "more than %d documents lack chunks: the first %d are reported, the "
                        "rest after they are re-ingested",
                        SHORT_KEPT,
                        SHORT_KEPT,
                    )
                    break
        return tuple(short)

    # -- stage 3: the checks and the plan --------------------------------------------------

    def assess(
        self,
        options: Options,
        now: datetime,
        sources: SourcesRead,
        scan: Scan,
        checks: FamilyChecks | None = None,
    ) -> Assessment:
        """Check the families ``scan`` did not settle in its first pass (every family, without
        ``checks``), and the collection- and source-wide checks; plan the repair of what they
        find."""
        if checks is None:
            checks = FamilyChecks(options, now, sources)
        scope = scan.scope
        expected = scan.expected
        # Source documents without a row, by family (their families may have no rows at all).
        new_by_family: dict[str, list[SourceDocument]] = defaultdict(list)
        for doc_id, doc in sources.by_id.items():
            if doc_id not in expected and not self._registered(doc_id):
                family = sources.family_of[doc_id]
                if options.shard.owns(family) and (scope is None or family in scope):
                    new_by_family[family].append(doc)
        # The families checked again, with their chunks: those the first pass left, those
        # with a document whose chunks differ from its row, and those with new documents.
        left = set(checks.revisit)
        revisit = left | set(new_by_family)
        # (documents with a stale chunk, and those that lack chunks, are looked at with their
        # chunks too: a first pass without chunks cannot see either)
        drifted = [*scan.chunks.drifted_ids(), *scan.chunks.stale_ids(), *scan.short]
        for start in range(0, len(drifted), DRIFTED_LOOKUP):  # (their families, a batch at a time)
            found = self.table.get_documents(drifted[start : start + DRIFTED_LOOKUP])
            revisit |= {row.doc_family_id for row in found.values()}
        if drifted and scope is not None:  # (a row moved to another family since the first pass)
            revisit &= scope
        # (families the first pass did check are counted once, there)
        counted = revisit - left if checks.first_pass else set()
        if revisit or not checks.first_pass:
            # (a few families by name; many: one more stream of the scope, the others skipped)
            few = checks.first_pass and len(revisit) <= REVISIT_BY_NAME
            rows = self._rows(options, sorted(revisit) if few else scope)
            for family, group in groupby(rows, key=_FAMILY_OF):
                if few or not checks.first_pass or family in revisit:
                    view = self._view(
                        family, tuple(group), sources, scan, new_by_family.pop(family, [])
                    )
                    checks.take(view, again=family in counted)
        for family, docs in sorted(new_by_family.items()):
            checks.take(self._view(family, (), sources, scan, docs))
        # A problem of a document outside this shard (or not in the source at all, yet
        # registered) is not "unregistered".
        unclaimed = {
            d
            for d in set(sources.problems) - checks.claimed
            if d not in sources.by_id and not self._registered(d)
        }

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
            supported = bool(getattr(self.index, "supports_payload_indexes", False))
            index_findings = check_index(
                self.index.payload_indexes() if supported else {}, supported=supported
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

    def without_queued_reingests(self, plan: Plan) -> Plan:
        """A request still pending in the outbox is not written again: the plan says so."""
        if not plan.reingests:
            return plan
        return plan.without_reingests(
            self.table.pending_reingest_for(r.doc_id for r in plan.reingests)
        )

    def _registered(self, doc_id: str) -> bool:
        """Whether a document outside this shard/scope has a row (rare lookups only)."""
        return bool(self.table.get_documents([doc_id]))

    def _view(
        self,
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
            if aggregate is not None:
                chunks[row.doc_id] = aggregate
        view = family_view(family, rows, sources, new_docs, chunks)
        own = {row.doc_id for row in rows}
        outside = {d for d in view.registered if d not in own and d not in scan.expected}
        if not outside:
            return view
        found = self.table.get_documents(outside)
        return dataclasses.replace(
            view, registered=frozenset(d for d in view.registered if d not in outside or d in found)
        )


#: Up to this many families checked again after the scan are read by name; more, by one
#: more stream of the table that skips the others (a long ``IN`` list is slow to plan, and
#: SQLite caps its bound parameters).
REVISIT_BY_NAME = 500
#: Drifted documents whose rows are looked up at once, for their families.
DRIFTED_LOOKUP = 500
#: Documents lacking chunks that one run reports (and asks to re-ingest) at most: an index
#: that lost most of its points is one ``points_missing`` finding, and the guard's.
SHORT_KEPT = 10_000
