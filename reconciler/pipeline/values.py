"""What the stages of a run hand each other: frozen values, and the run's options.

``Options`` says what a run does; each stage returns one value (``SourcesRead``, ``Scan``,
``Assessment``, ``GuardDecision``) that the next takes, and ``Report`` is the last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from reconciler.check_inputs import SourceState
from reconciler.checks import CHECKS
from reconciler.model import (
    Declaration,
    Finding,
    RunMode,
    RunStatus,
    SourceDocument,
    SourceProblem,
    defaults,
)
from reconciler.planning import (
    Plan,
)
from reconciler.rules.declarations import Conflict
from reconciler.rules.sharding import Shard
from reconciler.writing.applying import ApplyResult

if TYPE_CHECKING:  # (numpy, which the tally holds its arrays in, only once a scan begins)
    from reconciler.pipeline.chunk_tally import ChunkTally, Registered
    from reconciler.pipeline.scope_rows import ScopeRows

#: Modes that apply their plan (under the guard).
WRITING_MODES = frozenset(mode for mode in RunMode if mode.writes)
#: Modes of a reconciliation (the others are ingest, bootstrap and rollback runs).
ENGINE_MODES = frozenset(
    {RunMode.CHECK, RunMode.PLAN, RunMode.APPLY, RunMode.RUN, RunMode.REPAIR, RunMode.DECLARE}
)


@dataclass(frozen=True)
class Guard:
    """The blast-radius guard's limits."""

    #: Of families or chunks whose serving changes in one run: hidden or revealed, once per
    #: family (``pipeline.guarding``; relabels, restores and unserved writes are not counted).
    max_changed_fraction: float = defaults.MAX_CHANGED_FRACTION
    #: Of families or chunks whose quarantine is lifted because its cause is gone (1: never
    #: refused; ``pipeline.guarding``).
    max_restored_fraction: float = defaults.MAX_RESTORED_FRACTION
    #: Changes at or below this many families / chunks never trip the fraction rule.
    floor: int = defaults.GUARD_FLOOR
    #: Of families or chunks moved between the collections of a split store in one run.
    max_moved_fraction: float = defaults.MAX_MOVED_FRACTION
    #: How long a refused run's saved plan may be approved (``apply --plan ID``).
    plan_ttl: timedelta = defaults.PLAN_TTL


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
    successor_policy: str = defaults.SUCCESSOR_NOT_INGESTED
    unknown_siblings: str = defaults.UNKNOWN_SIBLINGS
    missing_grace: timedelta = defaults.MISSING_IN_SOURCE_GRACE
    status_contradicts_link: str = defaults.STATUS_CONTRADICTS_LINK
    guard: Guard = Guard()
    ttls: Mapping[str, timedelta | None] = field(default_factory=dict)
    table_batch: int = defaults.TABLE_BATCH
    scroll_batch: int = defaults.SCROLL_BATCH
    write_batch: int = defaults.WRITE_BATCH
    #: Point ids of mismatching chunks the scan keeps for the applier (beyond it, the applier
    #: selects each document's points through the doc_id filter instead).
    keep_ids: int = 100_000
    #: The scheduled job (full, ttl, dates) or command this run belongs to (metrics label).
    job: str | None = None
    #: The run's id (chosen by the caller so it can record a failure the engine did not).
    run_id: str | None = None
    #: Declarations this run makes (``reconciler declare``): read beside the recorded ones,
    #: and recorded by a ``declare`` run before its plan is written (a ``plan`` run shows
    #: what they would change). One the sources contradict stops the run (``Undeclarable``).
    declarations: tuple[Declaration, ...] = ()
    #: Source name -> the only paths read of it (``serve``'s watch, with ``families``: every
    #: document of those families lies at one of them); a source not named is read whole,
    #: one at no path is not read at all (none of the families' documents is there).
    #: A connector that cannot read by path is read whole (``ports.source.scan_paths``).
    paths: Mapping[str, frozenset[str]] | None = None
    #: A split store's collections, (main, archive) (``[index] archive_collection``); the
    #: runner sets it from its index. ``None``: one collection.
    split: tuple[str, str] | None = None

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
    #: content hash -> the doc ids whose source holds that text (``CheckContext.holders``).
    holders: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Sources no connector reads whose declared documents are judged from their rows and
    #: declarations (``rules.declarations``).
    declared_only: frozenset[str] = frozenset()
    #: doc_id -> why a declaration places it in its family, in words.
    because: Mapping[str, str] = field(default_factory=dict)
    #: Declarations not applied because a source says otherwise (also in ``problems``).
    conflicts: tuple[Conflict, ...] = ()
    #: A scoped run's rows of the families its declarations touch, as ``with_declarations``
    #: read them (``ScopeRows``: one statement): the scope's rows when it is those families.
    touched_rows: ScopeRows | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Totals:
    """What the guard measures changes against."""

    families: int
    #: source -> rows that source should still hold (not retired).
    rows_by_source: Mapping[str, int]
    chunks: int
    #: Chunks the rows say they have (``Document.chunk_count``, where they say), and how many
    #: of those the collection holds: an index that lost points shows as the difference.
    chunks_expected: int = 0
    chunks_found: int = 0
    #: The families with a row served now or later (``default_filter()`` returns it at some
    #: instant from the run's on), and the chunks those rows say they have: what a change of
    #: the served set is weighed against, so an archive of unserved rows beside them does not
    #: dilute it. ``None``: not measured (the whole corpus is the measure).
    served_families: int | None = None
    served_chunks: int | None = None


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
    #: The rows in scope with fewer chunks than they say they have (at most ``SHORT_KEPT``).
    short: tuple[str, ...] = ()
    #: The families the scan settled (``pipeline.settling``: quiet, every chunk as its row
    #: says), which the assess stage counts as checked without reading them again.
    settled: int = 0
    #: The other families, in the table's order, when the scan settled families (``None``:
    #: it did not, and the assess stage checks every family).
    unsettled: tuple[str, ...] | None = None


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
class Weights:
    """What the guard weighs of a plan, by direction (``pipeline.guarding.weigh``): each
    document written counted once, in the family it is served in before the run."""

    #: Families / chunks any write but a restore touches (reported; not a limit).
    changed_families: int = 0
    changed_chunks: int = 0
    #: Hidden: served now or later before the run, and then not.
    hiding_families: int = 0
    hiding_chunks: int = 0
    #: Families / chunks whose quarantine is lifted, its cause gone (``max_restored_fraction``).
    restoring_families: int = 0
    restoring_chunks: int = 0
    #: Families / chunks moved between the collections of a split store
    #: (``max_moved_fraction``).
    moving_families: int = 0
    moving_chunks: int = 0
    #: Revealed: not served before, served after (restores apart).
    revealed_families: int = 0
    revealed_chunks: int = 0
    #: Relabelled: served before and after, something else written (family, metadata...).
    relabelled_families: int = 0
    relabelled_chunks: int = 0
    #: Unserved: served neither before nor after.
    unserved_families: int = 0
    unserved_chunks: int = 0
    #: Hidden or revealed, a family with both once (``max_changed_fraction``).
    weighed_families: int = 0
    weighed_chunks: int = 0


@dataclass(frozen=True)
class GuardDecision:
    """Stage 4, whether the plan may be written."""

    totals: Totals
    changed_families: int
    changed_chunks: int
    max_changed_fraction: float
    weights: Weights = Weights()
    max_restored_fraction: float = 1.0
    #: The directions over their limit: "changed", "restored".
    over: tuple[str, ...] = ()
    #: Why the guard tripped (``guard`` findings); empty when it did not.
    reasons: tuple[Finding, ...] = ()
    #: A writing run the guard stopped.
    refused: bool = False
    #: A writing run that went past a tripped guard (``--force``).
    forced: bool = False
    #: A split store's limit on moves (``None``: one collection, nothing moves).
    max_moved_fraction: float | None = None
    #: What a refused run still writes (``pipeline.guarding.hold_back``); ``None`` unless
    #: refused.
    allowed: Plan | None = None
    #: The documents a refused run holds back (their every write), sorted.
    held: tuple[str, ...] = ()
    #: The documents the plan would hide, sorted.
    hidden: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``guard`` object of the run's JSON."""
        data: dict[str, Any] = {
            "families_total": self.totals.families,
            "rows_by_source": dict(self.totals.rows_by_source),
            "chunks_total": self.totals.chunks,
            "served_families": self.totals.served_families,
            "served_chunks": self.totals.served_chunks,
            "changed_families": self.changed_families,
            "changed_chunks": self.changed_chunks,
            "max_changed_fraction": self.max_changed_fraction,
            "hiding_families": self.weights.hiding_families,
            "hiding_chunks": self.weights.hiding_chunks,
            "restoring_families": self.weights.restoring_families,
            "restoring_chunks": self.weights.restoring_chunks,
            "max_restored_fraction": self.max_restored_fraction,
            "hidden_families": self.weights.hiding_families,
            "hidden_chunks": self.weights.hiding_chunks,
            "revealed_families": self.weights.revealed_families,
            "revealed_chunks": self.weights.revealed_chunks,
            "relabelled_families": self.weights.relabelled_families,
            "relabelled_chunks": self.weights.relabelled_chunks,
            "unserved_families": self.weights.unserved_families,
            "unserved_chunks": self.weights.unserved_chunks,
            "weighed_families": self.weights.weighed_families,
            "weighed_chunks": self.weights.weighed_chunks,
            "hidden_documents": list(self.hidden),
        }
        if self.refused:
            data["held"] = list(self.held)
        if self.max_moved_fraction is not None:
            data["moving_families"] = self.weights.moving_families
            data["moving_chunks"] = self.weights.moving_chunks
            data["max_moved_fraction"] = self.max_moved_fraction
        if self.reasons:
            data["tripped"] = list(dict.fromkeys(r.kind for r in self.reasons))
        if self.over:
            data["over"] = list(self.over)
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
    findings: tuple[Finding, ...] = ()
    plan: Plan = field(default_factory=Plan)
    summary: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    refused: bool = False
    forced: bool = False
    guard: Mapping[str, Any] = field(default_factory=dict)
    applied: ApplyResult | None = None
    sources: Mapping[str, SourceState] = field(default_factory=dict)
    chunks_scanned: int = 0
    error: str | None = None
    #: Seconds spent in each check (summed over families).
    timings: Mapping[str, float] = field(default_factory=dict)
    #: A split store's collections (``Options.split``): ``writes`` then counts ``moves``.
    split: tuple[str, str] | None = None
    #: The id of the plan a refused run saved (what it held back, to approve with
    #: ``reconciler apply --plan ID``), or a forced run's (finished under its authorization).
    saved_plan: str | None = None

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
        """Writes done (apply) or planned (check/plan); a refused run wrote only what the
        guard allowed (``GuardDecision.allowed``; often nothing). A split store's also count
        ``moves``: chunks moved between its collections."""
        kinds = ("payload", "table", "reingest", "points", "index")
        if self.applied is not None:
            counts = self.applied.counts()
            done = {k: int(counts[k]) for k in kinds}
            moved = self.applied.moves
        elif self.refused:
            done = dict.fromkeys(kinds, 0)
            moved = 0
        else:
            done = self.plan.counts()
            moved = self.plan.moved_points()
        return {**done, "moves": moved} if self.split is not None else done

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
            "summary": {check: dict(counts) for check, counts in self.summary.items()},
            "refused": self.refused,
            "forced": self.forced,
            "guard": dict(self.guard),
            "error": self.error,
            "status": self.status(),
            "unread_sources": self.unread_sources,
            # (why each was not read: a partial run's reason)
            "unread_reasons": {
                name: self.sources[name].error or "read in part" for name in self.unread_sources
            },
        }

    def status(self) -> str | None:
        """How the run log records a writing run (``None`` for check and plan, which are
        read-only and not recorded)."""
        if not self.mode.writes:
            return None
        if self.refused:
            return str(RunStatus.REFUSED)
        return str(RunStatus.PARTIAL if self.partial else RunStatus.SUCCEEDED)
