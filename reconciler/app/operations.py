"""A reconciliation, the library functions behind ``check``, ``plan``, ``apply``, ``run`` and
``repair`` (and what the daemon, the watch, ``declare`` and ``demo`` run): settings mapped to
a run's options once (``engine_options``), the shard's lease held, the engine run, its report
as plain data. (``init``, ``ingest`` and ``status``: ``deployment``; the other commands: a
module of their own.)"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from reconciler.app.holding import HeldLease, lease_name
from reconciler.app.probing import probe_sources
from reconciler.app.stopping import JobControl, stoppable_sources
from reconciler.app.wiring import (
    build_sources,
    index_location,
    leases_of,
    local_folder_missing,
    open_index,
    open_table,
)
from reconciler.checks import CHECKS
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import (
    CollectionMissing,
    ConfigError,
    LeaseBusy,
    LeaseLost,
    NotFound,
    Undeclarable,
)
from reconciler.model import RunMode, RunStatus, jsonable
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import WRITING_MODES, Guard, Options, Report
from reconciler.ports import ChunkIndex, DocumentTable, split_of
from reconciler.rules.sharding import Shard
from reconciler.settings import Settings
from reconciler.writing.recovery import resolve_interrupted
from reconciler.writing.runs import finish_failed, start_reconciliation

if TYPE_CHECKING:
    from reconciler.stores.sql import SqlDocumentTable

log = logging.getLogger(__name__)


def engine_options(
    settings: Settings,
    *,
    mode: str,
    checks: Iterable[str] | None = None,
    now: datetime | None = None,
    force: bool = False,
    actor: str = "cli",
    families: Iterable[str] | None = None,
    doc_id: str | None = None,
    shard: Shard | None = None,
    job: str | None = None,
) -> Options:
    """A run's options from settings and command-line choices (the one mapping; ``Options``
    and the settings' sections both default to ``reconciler.model.defaults``)."""
    chosen = frozenset(checks) if checks else frozenset(CHECKS)
    unknown = sorted(chosen - set(CHECKS))
    if unknown:
        raise ConfigError(
            [("--check", f"unknown check {name!r}; one of {', '.join(CHECKS)}") for name in unknown]
        )
    return Options(
        mode=RunMode(mode),
        checks=chosen,
        now=now,
        force=force,
        actor=actor,
        shard=shard or Shard(),
        families=frozenset(families) if families else None,
        doc_id=doc_id,
        successor_policy=settings.policy.successor_not_ingested,
        unknown_siblings=settings.policy.unknown_siblings,
        missing_grace=settings.policy.missing_in_source_grace,
        status_contradicts_link=settings.policy.status_contradicts_link,
        guard=Guard(
            max_changed_fraction=settings.guard.max_changed_fraction,
            max_restored_fraction=settings.guard.max_restored_fraction,
            floor=settings.guard.floor,
            max_moved_fraction=settings.guard.max_moved_fraction,
            plan_ttl=settings.guard.plan_ttl,
        ),
        ttls={s.name: s.effective_ttl for s in settings.sources},
        table_batch=settings.table.batch_size,
        scroll_batch=settings.index.scroll_batch,
        write_batch=settings.index.write_batch,
        job=job,
        split=split_names(settings),
    )


def split_names(settings: Settings) -> tuple[str, str] | None:
    """The collections of a split store, (main, archive); ``None`` for one collection."""
    archive = settings.index.archive_collection
    return None if archive is None else (settings.index.collection, archive)


def run_reconciliation(
    settings: Settings,
    *,
    mode: str,
    progress: Callable[[str, int], None] | None = None,
    source_deadline: timedelta | None = None,
    **choices: Any,
) -> Report:
    """One reconciliation as a command asks for it (``check``, ``plan``, ``apply``, ``run``,
    ``repair``): its options from the settings and the ``choices`` (those of
    ``engine_options``: an unknown check is a ``ConfigError``), then ``reconcile``.

    A cron ``run`` reads its sources as a job of ``serve`` does: side by side, each within
    ``source_deadline`` (default ``[schedule] source_deadline``, or half of ``job_deadline``);
    a source past it is unreadable this run (its families stay as they are, the run is
    ``partial``) and the others are reconciled."""
    options = engine_options(settings, mode=mode, **choices)
    control = None
    if mode == str(RunMode.RUN):
        within = source_deadline or settings.schedule.read_deadline
        control = JobControl("run", read_within=within.total_seconds())
    return reconcile(settings, options, progress=progress, control=control)


def reconcile(
    settings: Settings,
    options: Options,
    *,
    progress: Callable[[str, int], None] | None = None,
    lease_renew_every: float = 30.0,
    on_lease: Callable[[bool], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    control: JobControl | None = None,
    probe: bool = False,
    kept: tuple[SqlDocumentTable, ChunkIndex] | None = None,
) -> Report:
    """Run one reconciliation (check, plan, apply, run or repair).

    Writing modes hold the shard's single-runner lease for the whole run (taken before the
    chunk index is opened) and raise ``LeaseBusy`` when another runner holds it. Holding it,
    they first resolve runs of the shard whose process died (``recovery``), and check it
    before every payload batch (``LeaseLost`` stops the writing). A writing run that fails is
    recorded as failed (by the engine, or here when it failed before recording itself), so
    metrics count it.

    ``control`` (serve's jobs): stop at the next safe point when asked (``app.stopping``).
    ``probe``: read the sources first and record it, for checks that do not read them.
    ``kept``: the table and chunk index, open, used and left open (``serve``'s watch keeps
    them across its runs); by default each is opened for the run and closed after it.
    """
    sources = stoppable_sources(build_sources(settings), control)
    table = open_table(settings) if kept is None else kept[0]
    kept_index = kept[1] if kept is not None else None
    try:
        if options.mode not in WRITING_MODES:
            return _run_engine(
                settings, table, sources, options, progress, clock=clock, index=kept_index
            )
        lease = leases_of(table)(lease_name(str(options.shard)), clock=clock)
        options = dataclasses.replace(options, run_id=options.run_id or str(uuid.uuid4()))
        with HeldLease(lease, renew_every=lease_renew_every, clock=clock) as held:
            if not held.acquired:
                raise LeaseBusy(
                    f"another runner holds the lease of shard {options.shard} or one it "
                    f"excludes{held.busy}; this run was skipped (nothing was read or written)"
                )
            if on_lease is not None:
                on_lease(True)
            if control is not None:
                control.on_leave(held.surrender)
            try:
                if probe:
                    probe_sources(table, sources, clock=clock)
                return _run_engine(
                    settings,
                    table,
                    sources,
                    options,
                    progress,
                    held=held,
                    clock=clock,
                    control=control,
                    index=kept_index,
                )
            except (NotFound, Undeclarable):
                # a mistyped scope, or decisions a source contradicts: nothing was read from
                # the index or written, and no run is recorded
                raise
            except Exception as exc:
                record_failed(table, options, exc)
                raise
            finally:
                if on_lease is not None:
                    on_lease(False)
                if held.lost:
                    log.error("the lease of shard %s was lost during the run", options.shard)
    finally:
        if kept is None:
            table.close()


def lease_guard(
    held: HeldLease, shard: Shard, control: JobControl | None = None
) -> Callable[[], None]:
    """Before each payload batch: stop if the job was asked to; renew the lease, and stop
    if it was lost."""

    def check() -> None:
        if control is not None:
            control.check()
        if not held.confirm():
            raise LeaseLost(
                f"the lease of shard {shard} was lost during the run (another runner may have "
                "taken it over); writing stopped before the next batch, and what was written "
                "is in the audit log"
            )

    return check


def _run_engine(
    settings: Settings,
    table: DocumentTable,
    sources: list[Any],
    options: Options,
    progress: Callable[[str, int], None] | None,
    *,
    held: HeldLease | None = None,
    clock: Clock = SYSTEM_CLOCK,
    control: JobControl | None = None,
    index: ChunkIndex | None = None,
) -> Report:
    kept = index is not None
    missing = CollectionMissing(
        f"collection {settings.index.collection!r} does not exist at "
        f"{index_location(settings)}; run `reconciler ingest` (or point index.collection "
        "at an existing collection)"
    )
    if index is None and local_folder_missing(settings):
        raise missing  # (opening the client would create the folder)
    index = index if index is not None else open_index(settings)
    if control is not None:
        control.on_leave(index.close)  # (local mode and Edge lock their folder)
    try:
        if not index.exists():
            raise missing
        if options.split is not None and split_of(index) is None:
            options = dataclasses.replace(options, split=None)  # (a foreign archive: main alone)
        if held is not None:
            resolve_interrupted(table=table, index=index, shard=str(options.shard))
        engine = Reconciler(
            table=table,
            index=index,
            sources=sources,
            progress=progress,
            keep_writing=(lease_guard(held, options.shard, control) if held is not None else None),
            clock=clock,
        )
        return engine.run(options)
    finally:
        if not kept:
            index.close()


def record_failed(table: DocumentTable, options: Options, exc: BaseException) -> None:
    """Record the run as failed, unless the engine already did (it knows what was written).
    Never raises (the table may be what failed: then it logs)."""
    try:
        existing = table.get_run(options.run_id) if options.run_id else None
        if existing is not None and existing.status != RunStatus.RUNNING:
            return
        if existing is None:
            start_reconciliation(
                table,
                run_id=options.run_id,
                mode=options.mode,
                actor=options.actor,
                shard=str(options.shard),
                job=options.job or options.mode,
                checks=",".join(c for c in CHECKS if c in options.checks),
            )
        assert options.run_id is not None
        finish_failed(table, options.run_id, exc)
    except Exception as again:  # the table itself may be what failed
        log.error("could not record the failed run: %s", again)


def report_data(report: Report) -> dict[str, Any]:
    """The JSON object of a run, with the plan's exact writes."""
    data = report.to_json()
    plan = report.plan
    data["plan"] = {
        "rows": [
            {
                "doc_id": u.doc_id,
                "family": u.family,
                "fields": {k: [jsonable(b), jsonable(a)] for k, (b, a) in u.fields().items()},
                "reasons": list(u.reasons),
            }
            for u in plan.row_updates
        ],
        "payloads": [
            {
                "doc_id": t.doc_id,
                "family": t.family,
                "points": t.points,
                "payload": jsonable(dict(t.payload)),
                "reasons": list(t.reasons),
            }
            for t in plan.payload_targets
        ],
        "reingest": [
            {"doc_id": r.doc_id, "source": r.source, "reason": r.reason} for r in plan.reingests
        ],
        "indexes": [{"key": k, "schema": s} for k, s in plan.indexes],
    }
    if report.split is not None:
        main, archive = report.split
        data["plan"]["moves"] = [
            {
                "doc_id": m.doc_id,
                "family": m.family,
                "points": m.points,
                "from": main if m.to_archive else archive,
                "to": archive if m.to_archive else main,
                "reasons": list(m.reasons),
            }
            for m in plan.moves
        ]
    return data
