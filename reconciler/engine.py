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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import groupby
from operator import attrgetter
from typing import Any

from reconciler.applying import Applier, ApplyResult
from reconciler.checks import CHECKS, FAMILY_CHECKS, SOURCE_CHECKS
from reconciler.checks.family import UNREADABLE_PROBLEMS, declared_family, unregistered_findings
from reconciler.checks.hash import check_source, unreadable_findings
from reconciler.checks.index import check_index
from reconciler.checks.payload import check_orphans
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import NotFound
from reconciler.families import resolve_families
from reconciler.model import (
    MANAGED_KEYS,
    AuditEntry,
    Document,
    Finding,
    RunMode,
    RunStatus,
    Severity,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    VersionState,
)
from reconciler.payload import payload_values
from reconciler.planning import (
    Plan,
    as_planned,
    changes_a_row,
    outstanding,
    plan_family,
    plan_indexes,
    plan_orphan,
)
from reconciler.ports import ChunkIndex, DocumentTable
from reconciler.ports.source import ConnectorError, SystemOfRecord
from reconciler.runs import error_text
from reconciler.screening import screen
from reconciler.sharding import Shard
from reconciler.tally import ChunkTally, Registered
from reconciler.views import CheckContext, ChunkAggregate, FamilyView, SourceState

log = logging.getLogger(__name__)

_FAMILY_OF = attrgetter("doc_family_id")
#: Modes that apply their plan (under the guard).
WRITING_MODES = frozenset(mode for mode in RunMode if mode.writes)
#: Modes of a reconciliation (the others are ingest, bootstrap and rollback runs).
ENGINE_MODES = frozenset({RunMode.CHECK, RunMode.PLAN, RunMode.APPLY, RunMode.RUN, RunMode.REPAIR})


@dataclass(frozen=True)
class Guard:
    """The blast-radius guard's limits."""

    max_changed_fraction: float = 0.2
    #: Changes at or below this many families / chunks never trip the fraction rule.
    floor: int = 10


@dataclass(frozen=True)
class Options:
    """What a run does and to what."""

    mode: RunMode = RunMode.CHECK
    checks: frozenset[str] = frozenset(CHECKS)
    now: datetime | None = None
    force: bool = False
    actor: str = "cli"
    shard: Shard = field(default_factory=Shard)
    families: frozenset[str] | None = None
    doc_id: str | None = None
    successor_policy: str = "supersede"
    unknown_siblings: str = "supersede"
    missing_grace: timedelta = timedelta(days=7)
    guard: Guard = Guard()
    ttls: Mapping[str, timedelta | None] = field(default_factory=dict)
    table_batch: int = 1000
    scroll_batch: int = 1000
    write_batch: int = 256
    #: Point ids of mismatching chunks the scan keeps for the applier (beyond it, the applier
    #: selects each document's points through the doc_id filter instead).
    keep_ids: int = 100_000
    #: The scheduled job (full, ttl, dates) or command this run belongs to (metrics label).
    job: str | None = None
    #: The run's id (chosen by the caller so it can record a failure the engine did not).
    run_id: str | None = None

    def __post_init__(self) -> None:
        mode = RunMode(self.mode)  # a plain "apply" is accepted; an unknown mode is not
        if mode not in ENGINE_MODES:
            raise ValueError(f"{mode} is not a reconciliation mode")
        object.__setattr__(self, "mode", mode)


# -- what each stage hands to the next (frozen values) ---------------------------------------


@dataclass(frozen=True)
class SourcesRead:
    """Stage 1, the systems of record as this run read them (metadata only)."""

    states: Mapping[str, SourceState]
    by_id: Mapping[str, SourceDocument]
    family_of: Mapping[str, str]
    #: doc_id -> the problems the connector reported about it.
    problems: Mapping[str, tuple[SourceProblem, ...]]
    #: Problems no document identity could be given to.
    loose_problems: tuple[SourceProblem, ...]
    #: "<source>:<key>" -> when the identity map last saw it.
    last_seen: Mapping[str, datetime]
    #: source -> (source key, family, content hash, path) of every parsed document.
    identities: Mapping[str, tuple[tuple[str, str, str | None, str | None], ...]]
    #: source -> keys present in the source but not parsed this run (their identity is kept
    #: as seen, so the grace period of ``missing_in_source`` never starts).
    present: Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Totals:
    """What the guard measures changes against."""

    families: int
    #: source -> rows that source should still hold (not retired).
    rows_by_source: Mapping[str, int]
    chunks: int


@dataclass(frozen=True)
class Scan:
    """Stage 2, the table and the collection, streamed once each and folded per document."""

    #: The families in scope (``None``: every family of the shard).
    scope: frozenset[str] | None
    #: The doc id of every row in scope (membership and size; the ids are not kept).
    expected: Registered
    #: doc_id -> its chunks (``None``: chunks without a doc_id), folded compactly: the
    #: tally also holds the ids of the chunks that differed, for the applier.
    chunks: ChunkTally
    totals: Totals


@dataclass(frozen=True)
class Assessment:
    """Stage 3, what the checks found, family by family, and the plan that repairs it."""

    findings: tuple[Finding, ...]
    plan: Plan
    #: check -> {"checked": n, "findings": n}.
    summary: Mapping[str, Mapping[str, int]]
    #: Seconds spent in each check (summed over families).
    timings: Mapping[str, float]


@dataclass(frozen=True)
class GuardDecision:
    """Stage 4, whether the plan may be written."""

    totals: Totals
    changed_families: int
    changed_chunks: int
    max_changed_fraction: float
    #: Why the guard tripped (``guard`` findings); empty when it did not.
    reasons: tuple[Finding, ...] = ()
    #: A writing run the guard stopped.
    refused: bool = False
    #: A writing run that went past a tripped guard (``--force``).
    forced: bool = False

    def to_json(self) -> dict[str, Any]:
        """The ``guard`` object of the run's JSON."""
        data: dict[str, Any] = {
            "families_total": self.totals.families,
            "rows_by_source": dict(self.totals.rows_by_source),
            "chunks_total": self.totals.chunks,
            "changed_families": self.changed_families,
            "changed_chunks": self.changed_chunks,
            "max_changed_fraction": self.max_changed_fraction,
        }
        if self.reasons:
            data["tripped"] = list(dict.fromkeys(r.kind for r in self.reasons))
        return data


@dataclass(frozen=True)
class FamilyOutcome:
    """One family's findings and the plan that repairs them."""

    findings: tuple[Finding, ...]
    plan: Plan
    #: check -> seconds spent on this family.
    timings: Mapping[str, float]


@dataclass(frozen=True)
class Report:
    """Everything a run found, planned and did (the last stage's value)."""

    run_id: str
    mode: RunMode
    started_at: datetime
    finished_at: datetime | None = None
    findings: list[Finding] = field(default_factory=list)
    plan: Plan = field(default_factory=Plan)
    summary: dict[str, dict[str, int]] = field(default_factory=dict)
    refused: bool = False
    forced: bool = False
    guard: dict[str, Any] = field(default_factory=dict)
    applied: ApplyResult | None = None
    sources: Mapping[str, SourceState] = field(default_factory=dict)
    chunks_scanned: int = 0
    error: str | None = None
    #: Seconds spent in each check (summed over families).
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def drift(self) -> bool:
        """Whether anything was found."""
        return bool(self.findings)

    @property
    def unread_sources(self) -> list[str]:
        """Sources this run tried to read and could not (or only in part)."""
        return sorted(
            name
            for name, state in self.sources.items()
            if state.scanned and not (state.readable and state.complete)
        )

    @property
    def partial(self) -> bool:
        """A writing run that applied its plan while a source could not be read: what that
        source holds was not reconciled (run status ``partial``, exit 4)."""
        return (
            self.mode.writes
            and not self.refused
            and self.error is None
            and bool(self.unread_sources)
        )

    def writes(self) -> dict[str, int]:
        """Writes done (apply) or planned (check/plan); a refused run wrote nothing."""
        if self.refused:
            return dict.fromkeys(("payload", "table", "reingest", "points", "index"), 0)
        if self.applied is not None:
            done = self.applied.counts()
            return {k: int(done[k]) for k in ("payload", "table", "reingest", "points", "index")}
        return self.plan.counts()

    def to_json(self) -> dict[str, Any]:
        """The run's JSON object (docs/contracts.md), without the CLI's ``plan``."""
        return {
            # check and plan are not recorded: no id that rollback or audit could not find
            "run_id": self.run_id if self.mode.writes else None,
            "mode": str(self.mode),
            "started_at": self.started_at.isoformat(),
            "finished_at": (self.finished_at or self.started_at).isoformat(),
            "findings": [f.to_json() for f in self.findings],
            "writes": self.writes(),
            "summary": self.summary,
            "refused": self.refused,
            "forced": self.forced,
            "guard": self.guard,
            "error": self.error,
            "status": self.status(),
            "unread_sources": self.unread_sources,
        }

    def status(self) -> str | None:
        """How the run log records a writing run (``None`` for check and plan, which are
        read-only and not recorded)."""
        if not self.mode.writes:
            return None
        if self.refused:
            return str(RunStatus.REFUSED)
        return str(RunStatus.PARTIAL if self.partial else RunStatus.SUCCEEDED)


class Reconciler:
    """Runs reconciliation over one deployment's stores and sources.

    A run is five stages, each a method that takes the previous stages' frozen values and
    returns its own: ``read_sources`` -> ``SourcesRead``; ``scan`` -> ``Scan`` (table and
    collection); ``assess`` -> ``Assessment`` (checks and plan, family by family);
    ``decide`` -> ``GuardDecision``; ``record`` -> ``ApplyResult`` (writing modes only).
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
        decision = decide(options, scan.totals, plan, sources.states)
        findings = [*assessment.findings, *decision.reasons]
        applied = None
        if options.mode.writes:
            applied = self.record(
                options,
                now,
                sources,
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
            findings=findings,
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

    # -- stage 1: the sources --------------------------------------------------------------

    def read_sources(self, options: Options, now: datetime) -> SourcesRead:
        """Scan every source (when a check needs them) and give each document its family."""
        read = bool(options.checks & SOURCE_CHECKS)
        status = self.table.source_status()
        states: dict[str, SourceState] = {}
        by_id: dict[str, SourceDocument] = {}
        family_of: dict[str, str] = {}
        problems: dict[str, list[SourceProblem]] = defaultdict(list)
        loose_problems: list[SourceProblem] = []
        last_seen: dict[str, datetime] = {}
        identities: dict[str, tuple[tuple[str, str, str | None, str | None], ...]] = {}
        present: dict[str, frozenset[str]] = {}
        for source in self.sources:
            row = status.get(source.name)
            last_success = row.last_success_at if row else None
            ttl = options.ttls.get(source.name)
            if not read:
                states[source.name] = SourceState(
                    source.name,
                    readable=False,
                    scanned=False,
                    ttl=ttl,
                    last_success_at=last_success,
                )
                continue
            try:
                snapshot = screen(source.scan())
            except ConnectorError as exc:
                log.warning("source %s unreadable: %s", source.name, exc)
                states[source.name] = SourceState(
                    source.name,
                    readable=False,
                    scanned=True,
                    error=str(exc),
                    ttl=ttl,
                    last_success_at=last_success,
                )
                continue
            if not snapshot.complete and not snapshot.documents:
                # A partial scan that read nothing is an outage, not an empty source.
                states[source.name] = SourceState(
                    source.name,
                    readable=False,
                    scanned=True,
                    ttl=ttl,
                    error="the scan failed before any document was read",
                    last_success_at=last_success,
                    complete=False,
                )
                continue
            states[source.name] = SourceState(
                source.name,
                readable=True,
                scanned=True,
                documents=len(snapshot.documents),
                ttl=ttl,
                last_success_at=now,
                complete=snapshot.complete,
            )
            by_key, by_hash = self.table.identities(source.name)
            assignment = resolve_families(
                snapshot.documents, known_by_key=by_key, known_by_hash=by_hash
            )
            for doc in snapshot.documents:
                by_id[doc.doc_id] = doc
                family_of[doc.doc_id] = assignment.family_of[doc.doc_id]
            identities[source.name] = tuple(
                (doc.source_key, assignment.family_of[doc.doc_id], doc.content_hash, doc.path)
                for doc in snapshot.documents
            )
            for key, instant in self.table.identity_last_seen(source.name).items():
                last_seen[f"{source.name}:{key}"] = instant
            unparsed: set[str] = set()
            for problem in self._identify(source.name, snapshot):
                if problem.doc_id is None:
                    loose_problems.append(problem)
                    continue
                problems[problem.doc_id].append(problem)
                if problem.doc_id not in by_id and problem.source_key is not None:
                    unparsed.add(problem.source_key)
            present[source.name] = frozenset(unparsed)
        return SourcesRead(
            states=states,
            by_id=by_id,
            family_of=family_of,
            problems={doc_id: tuple(found) for doc_id, found in problems.items()},
            loose_problems=tuple(loose_problems),
            last_seen=last_seen,
            identities=identities,
            present=present,
        )

    def _identify(self, source: str, snapshot: SourceSnapshot) -> list[SourceProblem]:
        """Each problem with the identity of the document it is about, where one is known.

        A file that cannot be parsed has no id of its own: it is the document last seen at
        its path (the identity map), else the connector's default for that path. So a note
        whose identity is its frontmatter ``id`` keeps it when its frontmatter breaks. Not
        taken: an identity a parsed document holds in this scan (the note moved, and a new
        broken file took its old path), or one whose document is retired or has no row (a note
        deleted long ago does not come back through a broken file at its old path).
        """
        unnamed = [p for p in snapshot.problems if p.doc_id is None and p.path is not None]
        known = (
            self.table.identities_at(source, {p.path for p in unnamed if p.path}) if unnamed else {}
        )
        parsed = {doc.source_key for doc in snapshot.documents}
        rows = self.table.get_documents(f"{source}:{key}" for key in known.values())
        live = {
            key
            for key in known.values()
            if key not in parsed
            and (row := rows.get(f"{source}:{key}")) is not None
            and row.version_state is not VersionState.RETIRED
        }
        problems = []
        for problem in snapshot.problems:
            key = problem.source_key
            if problem.doc_id is None and problem.path in known:
                if known[problem.path] in live:
                    key = known[problem.path]
            elif problem.doc_id is not None:
                key = problem.doc_id.removeprefix(f"{source}:")
            problems.append(
                dataclasses.replace(
                    problem,
                    source_key=key,
                    doc_id=problem.doc_id or (f"{source}:{key}" if key is not None else None),
                )
            )
        return problems

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
        if checks is not None:
            checks.first_pass = True
        for family, group in groupby(self._rows(options, scope), key=_FAMILY_OF):
            rows = tuple(group)
            families += 1
            for row in rows:
                batch.append((row.doc_id, *payload_values(row)))
                if row.version_state is not retired:  # what the source should still hold
                    rows_by_source[row.source] += 1
            if scope is not None:
                in_scope += (row.doc_id for row in rows)
            if len(batch) >= 256:
                tally.expect_rows(batch)
                batch = []
            if checks is not None:
                checks.first(family, rows)
        tally.expect_rows(batch)
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
        return Scan(
            scope=scope,
            expected=tally.registered,
            chunks=tally,
            totals=Totals(families=families, rows_by_source=dict(rows_by_source), chunks=scanned),
        )

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
        drifted = scan.chunks.drifted_ids()
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
            # Chunks whose doc_id has no row (the tally keeps them apart: no pass over every
            # document, no aggregate built for each).
            for orphan_id, aggregate in sorted(scan.chunks.orphans(), key=lambda kv: str(kv[0])):
                finding = check_orphans(orphan_id, aggregate)
                if finding is not None and _in_doc_scope(options.doc_id, finding):
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

    # -- stage 5: apply and record -----------------------------------------------------------

    def record(
        self,
        options: Options,
        now: datetime,
        sources: SourcesRead,
        *,
        run_id: str,
        started_at: datetime,
        findings: Sequence[Finding],
        plan: Plan,
        decision: GuardDecision,
        scan: Scan,
        timings: Mapping[str, float],
    ) -> ApplyResult | None:
        """Apply the plan (unless the guard refused it) and record the run, its findings and
        what the sources and identities looked like; ``None`` when refused."""
        table = self.table

        def finish(
            status: RunStatus,
            counts: Mapping[str, Any],
            applied: ApplyResult | None,
            error: str | None = None,
        ) -> None:
            """Record the run's findings (with what is still outstanding) and its end."""
            done = applied.counts() if applied is not None else {}
            table.record_findings(
                run_id,
                findings,
                outstanding=[outstanding(f, applied=status.applied) for f in findings],
            )
            table.finish_run(
                run_id,
                status=status,
                counts={**counts, "check_seconds": dict(timings)},
                error=error,
                duration_seconds=(self.clock.now() - started_at).total_seconds(),
                chunks_scanned=scan.totals.chunks,
                rows_written=int(done.get("table", 0)),
                payload_writes=int(done.get("payload", 0)),
                points_written=int(done.get("points", 0)),
                reingest_requests=int(done.get("reingest", 0)),
            )

        table.start_run(
            mode=options.mode,
            actor=options.actor,
            forced=decision.forced,
            shard=str(options.shard),
            status=RunStatus.REFUSED if decision.refused else RunStatus.RUNNING,
            run_id=run_id,
            job=options.job or options.mode,
            checks=",".join(c for c in CHECKS if c in options.checks),
        )
        if decision.refused:
            finish(RunStatus.REFUSED, plan.counts(), None)
            return None
        progress = self.progress
        applier = Applier(
            table=table,
            index=self.index,
            run_id=run_id,
            actor=options.actor,
            batch_points=options.write_batch,
            scroll_batch=options.scroll_batch,
            progress=(lambda n: progress("applied", n)) if progress is not None else None,
            keep_writing=self.keep_writing,
        )
        try:
            if decision.forced:
                forced = [_forced_entry(run_id, decision, options, now)]
                applier.result.audit_head = table.append_audit(forced)
            applied = applier.apply(plan, now=now, located=scan.chunks)
        except Exception as exc:
            # Recorded with exactly what was written (the audit has it entry by entry); the
            # next run converges. If the table itself is what failed, the caller records it.
            counts = applier.result.counts()
            if applier.pending_intent is not None:
                counts["unconfirmed"] = applier.pending_intent  # for the next runner
            try:
                finish(RunStatus.FAILED, counts, applier.result, error=error_text(exc))
            except Exception as again:  # never let the record hide what went wrong
                log.error("could not record the failure of run %s: %s", run_id, again)
            raise
        for name, state in sources.states.items():
            if state.scanned:
                table.record_source_attempt(
                    name,
                    ok=state.readable,
                    at=now,
                    error=state.error,
                    documents_seen=state.documents if state.readable else None,
                )
        for name, entries in sources.identities.items():
            table.record_identities(name, list(entries))
        for name, keys in sources.present.items():
            table.touch_identities(name, keys)
        unread = any(
            state.scanned and not (state.readable and state.complete)
            for state in sources.states.values()
        )
        finish(RunStatus.PARTIAL if unread else RunStatus.SUCCEEDED, applied.counts(), applied)
        return applied


# -- stages as functions (no store) ----------------------------------------------------------


#: Up to this many families checked again after the scan are read by name; more, by one
#: more stream of the table that skips the others (a long ``IN`` list is slow to plan, and
#: SQLite caps its bound parameters).
REVISIT_BY_NAME = 500
#: Drifted documents whose rows are looked up at once, for their families.
DRIFTED_LOOKUP = 500


def family_view(
    family: str,
    rows: tuple[Document, ...],
    sources: SourcesRead,
    new_docs: Sequence[SourceDocument] = (),
    chunks: Mapping[str, ChunkAggregate] | None = None,
) -> FamilyView:
    """A family as the checks see it: its rows, its documents in the sources (``new_docs``:
    those without a row), their problems, and ``chunks``. Every document the family names as a
    successor is taken as registered (``Reconciler._view`` looks up those outside it)."""
    named = {r.superseded_by for r in rows if r.superseded_by is not None}
    by_id: dict[str, SourceDocument] = {}
    successors: dict[str, SourceDocument] = {}
    members = {r.doc_id for r in rows}
    if sources.by_id:  # (a run without sources, or a family none of them holds: no work)
        members |= {d.doc_id for d in new_docs}
        by_id = {d: sources.by_id[d] for d in members if d in sources.by_id}
        successors = {
            doc.superseded_by: sources.by_id[doc.superseded_by]
            for doc in by_id.values()
            if doc.superseded_by and doc.superseded_by in sources.by_id
        }
        named |= {d.superseded_by for d in by_id.values() if d.superseded_by is not None}
    return FamilyView(
        family=family,
        rows=rows,
        sources=by_id,
        successors=successors,
        problems=(
            {d: sources.problems[d] for d in members if d in sources.problems}
            if sources.problems
            else {}
        ),
        last_seen=(
            {d: sources.last_seen[d] for d in members if d in sources.last_seen}
            if sources.last_seen
            else {}
        ),
        chunks=chunks if chunks is not None else {},
        registered=frozenset(named),
    )


class FamilyChecks:
    """The family checks of one run, and what they found, family by family.

    The first pass over the table checks each family as it streams past, before the scan and
    without chunks (``first``). That is the family's final outcome when it finds nothing: the
    checks read chunks only through their payload variants, which a document has only when one
    of its chunks differs from its row, and the plan reads chunk counts only to repair a
    finding. So a family is checked again after the scan, with its chunks (``take``), only when
    the first pass found something, when it names a successor outside itself (it is not
    checked in the first pass then: whether that one has a row is known once every row is
    registered), when a source holds a document of it that has no row (the document joins its
    view), or when the scan finds a chunk of it that differs from its row. In a corpus with
    nothing to report that is no family, and the table is streamed once; up to
    ``REVISIT_BY_NAME`` families are read again by name, more by one more stream.
    """

    def __init__(self, options: Options, now: datetime, sources: SourcesRead) -> None:
        self.ctx = CheckContext(
            now=now,
            sources=sources.states,
            successor_policy=options.successor_policy,
            unknown_siblings=options.unknown_siblings,
            missing_grace=options.missing_grace,
        )
        self.sources = sources
        self.names = [c for c in CHECKS if c in options.checks and c in FAMILY_CHECKS]
        self.doc_id = options.doc_id
        self.findings: list[Finding] = []
        self.plans: list[Plan] = []
        #: check -> {"checked": n, "findings": n}.
        self.summary = {c: {"checked": 0, "findings": 0} for c in CHECKS if c in options.checks}
        self.timings: dict[str, float] = {}
        #: The doc ids whose source problems a family took.
        self.claimed: set[str] = set()
        #: Whether the scan's first pass went through ``first`` (else every family is left).
        self.first_pass = False
        #: The families ``first`` left for after the scan.
        self.revisit: list[str] = []

    def first(self, family: str, rows: tuple[Document, ...]) -> None:
        """Check a family of the first pass, or leave it for after the scan (``revisit``)."""
        view = family_view(family, rows, self.sources)
        if not view.registered <= {row.doc_id for row in rows}:
            self.revisit.append(family)  # a successor named outside it
            return
        outcome = check_family(view, self.ctx, self.names)
        if outcome.findings or not outcome.plan.empty:
            self.revisit.append(family)
            return
        self._count(view, outcome)

    def take(self, view: FamilyView, *, again: bool = False) -> None:
        """Check a family with everything known after the scan, and keep what it finds
        (``again``: ``first`` checked and counted it already)."""
        outcome = check_family(view, self.ctx, self.names, self.doc_id)
        self.findings.extend(outcome.findings)
        if not outcome.plan.empty:
            self.plans.append(outcome.plan)  # an empty plan a family would make memory grow
        self._count(view, outcome, checked=0 if again else 1)

    def _count(self, view: FamilyView, outcome: FamilyOutcome, checked: int = 1) -> None:
        self.claimed.update(view.problems)
        for name, seconds in outcome.timings.items():
            self.timings[name] = self.timings.get(name, 0.0) + seconds
            self.summary[name]["checked"] += checked


def _in_doc_scope(doc_id: str | None, finding: Finding) -> bool:
    return doc_id is None or finding.doc_id == doc_id


def check_family(
    view: FamilyView, ctx: CheckContext, checks: Sequence[str], doc_id: str | None = None
) -> FamilyOutcome:
    """Run the family checks on one family and plan their repair (``doc_id``: only that
    document's findings and writes)."""
    findings: list[Finding] = []
    timings: dict[str, float] = {}
    consequence_checks = [c for c in ("dates", "siblings") if c in checks]
    # Whether the consequence checks already propose a row change on the family as it is.
    consequences = False
    for name in checks:
        started = time.perf_counter()
        found = FAMILY_CHECKS[name](view, ctx)
        timings[name] = time.perf_counter() - started
        findings += found
        if not consequences and name in consequence_checks:
            consequences = any(changes_a_row(f) for f in found)
    truth = declared_family(view, ctx).rows if "family" in checks else None
    # (no finding, nothing to plan: what ``plan_family`` would return)
    plan = plan_family(view, findings, truth) if findings else Plan()
    # Repairs have consequences: a version set back to current by the source can leave an
    # older one live beside it. Check the family as the plan leaves it, and fold what the
    # time rule still finds into the same plan, so one apply converges.
    # A plan that writes no row and no chunk leaves the family as it is (``as_planned``), and
    # the checks are pure: checking it again would find what the first pass found, so when
    # none of that changes a row there is nothing to fold in (the usual case: no drift).
    rounds = 3 if plan.row_updates or plan.payload_targets or consequences else 0
    for _round in range(rounds):
        after = as_planned(view, plan)
        extra = [
            f
            for name in consequence_checks
            for f in FAMILY_CHECKS[name](after, ctx)
            if changes_a_row(f)
        ]
        if not extra:
            break
        findings += extra
        plan = plan_family(view, findings, truth)
    findings = [f for f in findings if _in_doc_scope(doc_id, f)]
    if doc_id is not None:
        plan = plan_family(view, findings, truth)
    return FamilyOutcome(findings=tuple(findings), plan=plan, timings=timings)


def decide(
    options: Options, totals: Totals, plan: Plan, sources: Mapping[str, SourceState]
) -> GuardDecision:
    """The blast-radius guard: may ``plan`` be written? (A source that had documents and
    returned none, or more than the allowed fraction of families or chunks changing.)"""
    changed_families = len(plan.changed_families())
    changed_chunks = plan.counts()["points"]
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
    limit = options.guard.max_changed_fraction
    scoped = options.families is not None or options.doc_id is not None
    for what, changed, total in (
        ("families", changed_families, families_total),
        ("chunks", changed_chunks, chunks_total),
    ):
        if not scoped and changed > options.guard.floor and changed / total > limit:
            reasons.append(
                Finding(
                    check="guard",
                    kind="blast_radius",
                    severity=Severity.CRITICAL,
                    family=None,
                    doc_id=None,
                    expected={what: f"<= {limit:.0%} of {total}"},
                    actual={what: changed, "fraction": round(changed / total, 4)},
                    action="refuse the run (rerun with --force after review)",
                )
            )
    writing = options.mode.writes and bool(reasons)
    return GuardDecision(
        totals=totals,
        changed_families=changed_families,
        changed_chunks=changed_chunks,
        max_changed_fraction=limit,
        reasons=tuple(reasons),
        refused=writing and not options.force,
        forced=writing and options.force,
    )


def _forced_entry(
    run_id: str, decision: GuardDecision, options: Options, now: datetime
) -> AuditEntry:
    return AuditEntry(
        run_id=run_id,
        at=now,
        actor=options.actor,
        reason="--force past the blast-radius guard",
        target_type="run",
        target=run_id,
        before={"guard": [r.kind for r in decision.reasons]},
        after={"forced": True},
    )
