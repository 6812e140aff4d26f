"""``reconciler serve``: the scheduler daemon with ``/metrics`` and ``/healthz``, and the
metrics export of a one-shot cron ``run``."""

from __future__ import annotations

import dataclasses
import faulthandler
import logging
import signal
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from reconciler.app.hooks import Hooks
from reconciler.app.http_port import http_app, start_http
from reconciler.app.operations import engine_options, reconcile, record_failed
from reconciler.app.scraping import SCRAPE_READ_LIMIT, BoundedRead
from reconciler.app.stopping import JobControl, unless_stopping
from reconciler.app.wiring import open_table
from reconciler.checks import CHECKS, SOURCE_CHECKS
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import JobStopped, LeaseBusy, StoreFault
from reconciler.metrics import LiveMetrics, build_registry, export
from reconciler.model import RunStatus
from reconciler.pipeline.values import Options, Report
from reconciler.rules.sharding import Shard
from reconciler.scheduling import (
    GracefulStop,
    JobSpec,
    add_jobs,
    blocking_scheduler,
    cron_trigger,
)
from reconciler.settings import Settings
from reconciler.stores.sql import SqlDocumentTable

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
#: Run statuses the run log counts as failures (``run_failures_total``), or will: a run
#: left ``running`` is marked interrupted by the next runner of its shard.
FAILED_STATUSES = frozenset({RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING})


def job_specs(settings: Settings) -> list[JobSpec]:
    """The scheduled jobs: full reconciliation, TTL and effective dates."""
    return [
        JobSpec("full", settings.schedule.full, None),
        JobSpec("ttl", settings.schedule.ttl, frozenset({"ttl"})),
        JobSpec("dates", settings.schedule.dates, frozenset({"dates"})),
    ]


class Runner:
    """Runs one reconciliation job under the lease, within its deadline, and feeds the live
    metrics.

    Each job runs in a thread of its own, watched: past ``[schedule] job_deadline`` it is
    asked to stop at its next safe point (``reconciler.app.stopping``) and /healthz says so;
    one that has not reached it ``stop_grace`` later is left and recorded as failed: if it
    waits on a source, its lease and chunk index are given up for the next job; if it is in a
    store call (bounded by the store's own timeouts, ``Settings.store_bounds``), it keeps its
    lease until that call ends, so no other runner writes beside it, and stops at its next
    safe point. Once serve is told to stop, the job is asked to stop half ``stop_grace``
    later and left at three quarters of it wherever it is, so serve exits within
    ``stop_grace`` whatever a store does (a write in flight has its audited intent, which the
    next run resolves)."""

    def __init__(
        self,
        settings: Settings,
        *,
        live: LiveMetrics,
        shard: Shard | None = None,
        lease_renew_every: float = 30.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.live = live
        self.shard = shard or Shard()
        self.lease_renew_every = lease_renew_every
        self.clock = clock
        self._full = cron_trigger(settings.schedule.full)
        #: One lane: a job that comes due while another runs waits for it, instead of
        #: contending for the lease and being skipped (each job id still runs once at most).
        self._lane = threading.Lock()
        #: Set when serve is stopping: a job still waiting for the lane does not start.
        self.stopping = threading.Event()
        #: The job in the lane, and when (monotonic) serve was told to stop.
        self._current: JobControl | None = None
        self._stop_at: float | None = None
        #: Called in the lane before each job (the watch lets go of the stores it keeps open:
        #: local mode and Edge lock their folder).
        self.before_job: Callable[[], object] | None = None
        #: Called in the lane after each job (the watch's runs may open the stores again).
        self.after_job: Callable[[], object] | None = None

    def expect_full(self, after: datetime) -> None:
        """The full job is next due at its first time after ``after``, plus the schedule's
        ``full_grace``."""
        fire = self._full.get_next_fire_time(None, after)
        grace = self.settings.schedule.full_grace
        self.live.full_due = fire + grace if fire is not None else None

    def stop(self) -> None:
        """Serve is stopping: no waiting job starts, and the running one has ``stop_grace``
        left before it is asked to stop."""
        self.stopping.set()
        self._stop_at = self.clock.monotonic()
        current = self._current
        if current is not None:
            current.wake.set()

    def __call__(
        self, spec: JobSpec, *, mode: str = "run", actor: str = "schedule"
    ) -> Report | None:
        """Run ``spec`` once the lane is free; never raises (a failure is logged, recorded and
        shown in /healthz)."""
        with self._lane:
            if self.stopping.is_set():
                log.info("job %s not started: serve is stopping", spec.job_id)
                return None
            if self.before_job is not None:
                self.before_job()
            try:
                return self._run(spec, mode=mode, actor=actor)
            finally:
                if self.after_job is not None:
                    self.after_job()

    def _run(self, spec: JobSpec, *, mode: str, actor: str) -> Report | None:
        shard = str(self.shard)
        started = self.clock.monotonic()
        options = engine_options(
            self.settings,
            mode=mode,
            checks=spec.checks or CHECKS,
            actor=actor,
            shard=self.shard,
            job=spec.job_id,
        )
        options = dataclasses.replace(options, run_id=str(uuid.uuid4()))
        gauge = self.live.lease_held.labels(shard=shard)
        control = JobControl(
            spec.job_id, read_within=self.settings.schedule.read_deadline.total_seconds()
        )
        outcome: list[Report | BaseException] = []

        def job() -> None:
            try:
                outcome.append(
                    reconcile(
                        self.settings,
                        options,
                        lease_renew_every=self.lease_renew_every,
                        on_lease=lambda held: gauge.set(1 if held else 0),
                        clock=self.clock,
                        control=control,
                        probe=not (options.checks & SOURCE_CHECKS),
                    )
                )
            except BaseException as exc:  # handed to the supervisor below
                outcome.append(exc)
            finally:
                control.end()

        self._current = control
        try:
            threading.Thread(target=job, name=f"job-{spec.job_id}", daemon=True).start()
            left = self._supervise(control, options, started)
        finally:
            self._current = None
        result = left if left is not None else outcome[0]
        if isinstance(result, LeaseBusy):
            log.info("job %s skipped: %s", spec.job_id, result)
            self.live.lease_skips.labels(shard=shard).inc()
            return None
        if isinstance(result, BaseException):
            if left is not None:
                gauge.set(0)
            self._failed(spec.job_id, options, result)
            return None
        report = result
        self.live.store_fault = None
        self.live.observe(timings=report.timings, total=self.clock.monotonic() - started)
        self.live.set_health(report.error is None, report.error)
        if spec.job_id == "full" and not (report.error or report.refused or report.partial):
            self.expect_full(self.clock.now())
        log.info(
            "job %s run %s: %d finding(s), writes %s in %.1fs%s",
            spec.job_id,
            report.run_id,
            len(report.findings),
            report.writes(),
            self.clock.monotonic() - started,
            " (refused by the guard)" if report.refused else "",
        )
        return report

    def _supervise(
        self, control: JobControl, options: Options, started: float
    ) -> JobStopped | None:
        """Wait for the job, asking it to stop past its deadline (or once serve has been
        stopping for half ``stop_grace``), and leaving it when it has not stopped in time;
        ``JobStopped`` when it was left."""
        asked: float | None = None
        why = ""
        while not control.ended.is_set():
            now = self.clock.monotonic()
            if asked is None:
                limit, reason = self._ask_at(started)
                if now >= limit:
                    asked, why = now, reason
                    self._ask(control, why)
                    continue
            else:
                limit = self._leave_at(asked)
                if now >= limit:
                    return self._leave(control, options, why, now - asked)
            self.clock.wait(control.wake, limit - now)
            control.wake.clear()
        return None

    def _ask_at(self, started: float) -> tuple[float, str]:
        """When the job is asked to stop, and why: its deadline, or half ``stop_grace``
        after serve was told to stop."""
        schedule = self.settings.schedule
        limit = started + schedule.job_deadline.total_seconds()
        why = f"it passed its deadline ({_span(schedule.job_deadline)})"
        if self._stop_at is not None:
            stop = self._stop_at + schedule.stop_grace.total_seconds() / 2
            if stop < limit:
                limit, why = stop, "serve is stopping (SIGTERM)"
        return limit, why

    def _leave_at(self, asked: float) -> float:
        """When a job asked to stop at ``asked`` is left: ``stop_grace`` later, or three
        quarters of it after serve was told to stop (the rest bounds recording it)."""
        grace = self.settings.schedule.stop_grace.total_seconds()
        limit = asked + grace
        if self._stop_at is not None:
            limit = min(limit, self._stop_at + grace * 3 / 4)
        return limit

    def _ask(self, control: JobControl, why: str) -> None:
        log.warning("job %s: %s; asking it to stop at its next safe point", control.job_id, why)
        control.request_stop(why)
        if self._stop_at is None:  # (past its deadline: /healthz says so at once)
            self.live.set_health(False, f"job {control.job_id}: {why}; asked to stop")

    def _leave(self, control: JobControl, options: Options, why: str, waited: float) -> JobStopped:
        """Leave the job (asked to stop ``waited`` seconds ago): in a source read, giving up
        its lease and index (it writes nothing more); in a store call, keeping them until
        that call ends (then it stops at its next safe point: nothing is written beside it).
        Recorded as failed either way."""
        grace = f"{waited:.0f}s"
        left: list[JobStopped] = []

        def record(source: str) -> None:
            left.append(
                JobStopped(
                    f"job {control.job_id} stopped: {why}; it was still reading source "
                    f"{source!r} {grace} after it was asked to stop and was left there "
                    "(nothing of the run was written)"
                )
            )
            self._record(options, left[0])

        if control.abandon(record) is None:
            left.append(
                JobStopped(
                    f"job {control.job_id} stopped: {why}; it was still in a call to a store "
                    f"{grace} after it was asked to stop and was left there (it keeps the "
                    "lease until that call ends, then stops before its next write; what it "
                    "wrote is in the audit log, and the next run resolves any write in doubt)"
                )
            )
            self._record(options, left[0])
        log.error("%s", left[0])
        return left[0]

    def _record(self, options: Options, exc: BaseException) -> None:
        """Record a job's failure in the run log (the job could not: it was left); once serve
        is stopping (were it told so while the table was being written), only within four
        fifths of ``stop_grace`` of the signal (else the run stays ``running``, and the next
        runner of the shard marks it interrupted)."""

        def record() -> None:
            try:
                table = open_table(self.settings)
            except Exception as error:
                log.error("could not record the failed run %s: %s", options.run_id, error)
                return
            try:
                record_failed(table, options, exc)
            finally:
                table.close()

        worker = threading.Thread(target=record, name="record-left-job", daemon=True)
        worker.start()
        while self._stop_at is None and worker.is_alive():
            worker.join(0.05)  # (until it is recorded, or serve is told to stop meanwhile)
        if self._stop_at is None:
            return
        left = self._stop_at + self.settings.schedule.stop_grace.total_seconds() * 0.8
        worker.join(max(0.0, left - self.clock.monotonic()))
        if worker.is_alive():
            log.error(
                "could not record the failed run %s before serve stops (the table does not "
                "answer); the next runner of the shard marks it interrupted",
                options.run_id,
            )

    def _failed(self, job_id: str, options: Options, exc: BaseException) -> None:
        """Show a failed job in /healthz and count it (in ``run_failures_total`` even when the
        run log could not record it)."""
        log.error("job %s failed: %s", job_id, exc, exc_info=log.isEnabledFor(logging.DEBUG))
        self.live.set_health(False, f"job {job_id} failed: {exc}")
        if isinstance(exc, StoreFault):
            self.live.store_fault = str(exc)
        if self._stop_at is not None:
            return  # (serve is stopping: no more calls to a store that may not answer)
        # (the table may not answer: SIGTERM meanwhile does not wait for it)
        asked, recorded = unless_stopping(
            lambda: self._failure_recorded(options.run_id), self.stopping
        )
        if asked and not recorded:
            self.live.count_unrecorded_failure(job_id)

    def _failure_recorded(self, run_id: str | None) -> bool:
        """Whether the run log holds this run as failed (or running: the next runner of the
        shard marks it interrupted, which counts as a failure)."""
        try:
            table = open_table(self.settings)
            try:
                run = table.get_run(run_id) if run_id else None
            finally:
                table.close()
        except Exception:  # the table is what failed
            return False
        return run is not None and run.status in FAILED_STATUSES


def _span(value: timedelta) -> str:
    """A duration as the config writes it (``90s``, ``1h``)."""
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def serve(
    settings: Settings, *, shard: Shard | None = None, run_now: bool = False, watch: bool = True
) -> None:
    """Run the scheduler until SIGTERM/SIGINT; the running job finishes first, or stops at
    its next safe point once ``[schedule] stop_grace`` has passed.

    ``run_now`` also runs the full job once at start (metrics are then current at once).
    ``watch``: follow the sources' changes (``reconciler.app.watching``).
    """
    table: SqlDocumentTable = open_table(settings)
    snapshot = BoundedRead(table.metrics_snapshot, limit=SCRAPE_READ_LIMIT)
    registry, live = build_registry(snapshot)
    runner = Runner(settings, live=live, shard=shard)
    runner.expect_full(runner.clock.now())
    hooks = None
    if settings.watch.webhooks and watch:
        from reconciler.app.followers import followed  # noqa: PLC0415

        watched = [config.name for config in settings.sources if followed(config)]
        hooks = Hooks(settings.watch.webhook_secret(), registry=registry, sources=watched)
    app = http_app(registry, live, stalled=snapshot.stalled, hooks=hooks)
    server = start_http(settings.metrics.listen, app)
    scheduler = blocking_scheduler()
    add_jobs(scheduler, job_specs(settings), runner)
    if run_now:
        scheduler.add_job(
            runner,
            args=[job_specs(settings)[0]],
            id="full-at-start",
            name="reconcile:full (at start)",
            max_instances=1,
            misfire_grace_time=None,
        )
    stop = GracefulStop(scheduler, on_stop=runner.stop)
    runner.stopping = stop.stopping  # jobs waiting for the lane do not start once stopping
    stop.install()
    # (``kill -USR1 PID``: every thread's stack to stderr, one stuck in C code included)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # -- issue 39: boundaries on the instant, and the watch (reconciler.app.freshness) ------
    from reconciler.app.freshness import start_freshness  # noqa: PLC0415

    watcher = start_freshness(settings, scheduler, runner, registry, stop.stopping, watch=watch)
    if hooks is not None and watcher is not None:
        hooks.nudge = watcher.nudge
    # -- end of issue 39 -------------------------------------------------------------------
    for job in scheduler.get_jobs():
        log.info("job %s: %s", job.id, job.trigger)
    try:
        stop.run()  # blocks until a signal, then until the running job is recorded
    finally:
        if watcher is not None:  # (the watch, issue 39)
            watcher.stop()
        server.shutdown()
        server.server_close()
        table.close()
        log.info("stopped")


def export_run_metrics(
    settings: Settings, live_setup: Callable[[LiveMetrics], None] | None = None
) -> list[str]:
    """After a cron ``run``: a fresh registry from the run log, to a textfile or Pushgateway."""
    if not (settings.metrics.textfile or settings.metrics.pushgateway):
        return []
    table = open_table(settings)
    try:
        registry, live = build_registry(table.metrics_snapshot)
        if live_setup is not None:
            live_setup(live)
        return export(
            registry,
            textfile=settings.metrics.textfile,
            pushgateway=settings.metrics.pushgateway,
        )
    finally:
        table.close()
