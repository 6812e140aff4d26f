"""One reconciliation run: read the three stores, run the checks, plan, guard, apply, record.

``Reconciler.run`` chains the stages, each a function from readers (and the earlier stages'
frozen values) to its own value: the table is read once to fingerprint every row and once
more, family by family, to check each family with its chunks (``pipeline.scanning``,
``pipeline.assessing``), the collection once (apply writes by the point ids that scan kept,
or selects a changed row's points through the doc_id filter), and the sources once, as
metadata. Memory holds compact
per-document state, never a whole table or collection.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from reconciler.checks import CHECKS, MOVING_CHECKS
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import NotFound, Undeclarable
from reconciler.model import (
    rfc3339,
)
from reconciler.pipeline import assessing, membership, scanning
from reconciler.pipeline.guarding import decide
from reconciler.pipeline.reading import read_sources
from reconciler.pipeline.recording import record, save_authorized
from reconciler.pipeline.scope_rows import ScopeRows
from reconciler.pipeline.settling import Settling, settling
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
)
from reconciler.ports import ChunkIndex, DocumentReader, DocumentTable, split_of
from reconciler.ports.source import SystemOfRecord
from reconciler.writing.approving import approve_command

log = logging.getLogger(__name__)

#: How far ``--now`` may be from the clock before a run says it evaluates elsewhen.
AS_OF_FAR = timedelta(days=1)


class Reconciler:
    """Runs reconciliation over one deployment's stores and sources.

    A run is five stages, each a function that takes readers and the previous stages' frozen
    values (``reconciler.pipeline.values``) and returns its own: ``read_sources`` ->
    ``SourcesRead`` (``pipeline.reading``); ``scan`` -> ``Scan`` (table and collection:
    ``pipeline.scanning``); ``assess`` -> ``Assessment`` (every family checked with its
    chunks, the collection and the sources, and the plan: ``pipeline.assessing``);
    ``decide`` -> ``GuardDecision`` (``pipeline.guarding``); ``record`` -> ``ApplyResult``
    (writing modes only, ``pipeline.recording``). ``run`` chains them into a ``Report``; no
    stage hands another anything but values.
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

    def options(self, options: Options) -> Options:
        """``options`` with the split of this runner's index (``Options.split``)."""
        split = split_of(self.index)
        if split is None or options.split is not None:
            return options
        return dataclasses.replace(options, split=split.collections)

    def run(self, options: Options) -> Report:
        """Check, plan and (in writing modes) apply under the guard."""
        options = self.options(options)
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
        refuse_undeclarable(options, sources)
        scope, rows = self.scoped(options, sources)
        scan = self.scan(options, scope, rows, settling=settling(options, now, sources, scope))
        assessment = self.assess(options, now, sources, scan, rows)
        plan = self.without_queued_reingests(assessment.plan)
        decision = decide(
            options,
            self.guard_totals(options, scan),
            plan,
            sources.states,
            now,
            corpus=lambda: self.corpus_totals(scan),
            served=lambda asked: scanning.served_totals(
                self.table, options, scope, now, scan.chunks, asked
            ),
            corpus_served=lambda asked: scanning.served_totals(
                self.table, options, None, now, None, asked
            ),
        )
        findings = [*assessment.findings, *decision.reasons]
        applied = saved = None
        if options.mode.writes:
            saved = save_authorized(
                self.table, self.index, options, plan, decision, run_id=run_id, now=now
            )
            applied = record(
                self.table,
                self.index,
                options,
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
                saved_plan=saved,
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
            guard={**decision.to_json(), **_approval(saved, decision.refused)},
            applied=applied,
            sources=sources.states,
            chunks_scanned=scan.totals.chunks,
            timings=dict(assessment.timings),
            split=options.split,
            saved_plan=saved,
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

    def corpus_totals(self, scan: Scan) -> Totals:
        """The whole corpus's families and chunks (the table's counts), beside a scoped scan's
        totals: what a scoped run's unnamed part is weighed against."""
        stats = self.table.stats()
        return dataclasses.replace(
            scan.totals,
            families=max(int(stats.get("families", 0)), scan.totals.families),
            chunks=max(int(stats.get("chunks_registered", 0)), scan.totals.chunks),
            served_families=None,
            served_chunks=None,
        )

    def guard_totals(self, options: Options, scan: Scan) -> Totals:
        """What the guard weighs a plan against: the scan's totals, but the whole corpus's
        families and chunks for a ``declare`` run (scoped to the families it touches, yet
        weighed like a run of the whole corpus: a file of accepted proposals may touch many)."""
        if not options.declarations:
            return scan.totals
        stats = self.table.stats()
        return dataclasses.replace(
            scan.totals,
            families=max(int(stats.get("families", 0)), scan.totals.families),
            chunks=max(int(stats.get("chunks_registered", 0)), scan.totals.chunks),
            served_families=None,  # (the scan measured only the families declared)
            served_chunks=None,
        )

    # -- stage 1: the sources (``reconciler.pipeline.reading``) ----------------------------

    def read_sources(self, options: Options, now: datetime) -> SourcesRead:
        """Scan every source (when a check needs them) and give each document its family."""
        return read_sources(self.table, self.sources, options, now)

    # -- stage 2: the table and the collection ---------------------------------------------

    def scope(self, options: Options, sources: SourcesRead) -> frozenset[str] | None:
        """The families a scoped run (``--doc``, ``--family``) covers, with those its documents
        move to or from (``pipeline.membership.widen``); raise for unknown ids."""
        return self.scoped(options, sources)[0]

    def scoped(
        self, options: Options, sources: SourcesRead
    ) -> tuple[frozenset[str] | None, DocumentReader]:
        """``scope``, and what the run's stages read its rows from: a scoped run's rows read
        once (``ScopeRows``: the scan, the moves and the family views stream the same
        families), the table itself for a run of the whole corpus."""
        if options.doc_id is not None:
            found = self.table.get_documents([options.doc_id]).get(options.doc_id)
            family = found.doc_family_id if found else sources.family_of.get(options.doc_id)
            if family is None:
                raise NotFound(
                    f"no such document: {options.doc_id!r} is neither in the document table "
                    "nor in a source that could be read (doc ids are '<source>:<id>'; "
                    "see `reconciler status`)"
                )
            return self._widened(options, frozenset({family}), sources)
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
        if options.families is None:
            return None, self.table
        return self._widened(options, options.families, sources)

    def _widened(
        self, options: Options, scope: frozenset[str], sources: SourcesRead
    ) -> tuple[frozenset[str], ScopeRows]:
        """``scope`` with the families its documents move to or from, when a check that moves
        documents runs (a move settles both families), and their rows, read once."""
        held = sources.touched_rows  # (the declarations' families, read a moment ago)
        if held is not None and held.scope == scope:
            rows = held
        else:
            rows = ScopeRows.read(self.table, scope, options.table_batch)
        if not MOVING_CHECKS & options.checks:
            return scope, rows
        widened = membership.widen(rows, scope, sources, batch=options.table_batch)
        if widened != scope:
            rows = ScopeRows.read(self.table, widened, options.table_batch)
        return widened, rows

    def scan(
        self,
        options: Options,
        scope: frozenset[str] | None,
        rows: DocumentReader | None = None,
        *,
        settling: Settling | None = None,
    ) -> Scan:
        """Stage 2 (``pipeline.scanning.scan``); ``rows``: where the scope's rows are read
        (``scoped``), else the table; ``settling``: the families it may settle
        (``pipeline.settling``)."""
        table = self.table if rows is None else rows
        return scanning.scan(
            table, self.index, options, scope, progress=self.progress, settling=settling
        )

    # -- stage 3: the checks and the plan --------------------------------------------------

    def assess(
        self,
        options: Options,
        now: datetime,
        sources: SourcesRead,
        scan: Scan,
        rows: DocumentReader | None = None,
    ) -> Assessment:
        """Stage 3 (``pipeline.assessing.assess``); ``rows`` as for ``scan``."""
        table = self.table if rows is None else rows
        return assessing.assess(table, self.index, options, now, sources, scan)

    def without_queued_reingests(self, plan: Plan) -> Plan:
        """A request still pending in the outbox is not written again: the plan says so."""
        if not plan.reingests:
            return plan
        return plan.without_reingests(
            self.table.pending_reingest_for(r.doc_id for r in plan.reingests)
        )


def _approval(saved: str | None, refused: bool) -> dict[str, str]:
    """The ``guard`` keys of a refused run's saved plan: its id and the command approving it;
    a forced run's plan id (``guard.forced_plan``)."""
    if saved is None:
        return {}
    if not refused:
        return {"forced_plan": saved}
    return {"plan_id": saved, "approve": approve_command(saved)}


def refuse_undeclarable(options: Options, sources: SourcesRead) -> None:
    """Stop a run whose own declarations a source (or an earlier declaration) contradicts,
    before anything is scanned or written: a person decides again (``Undeclarable``)."""
    if not options.declarations:
        return
    pending = {d.id for d in options.declarations}
    problems = [
        f"{c.declaration.kind} {c.declaration.doc_id} -> {c.declaration.target}: {c.message}"
        for c in sources.conflicts
        if c.declaration.id in pending
    ]
    if problems:
        raise Undeclarable(problems)
