"""``reconciler serve``: the scheduler daemon with ``/metrics`` and ``/healthz``, and the
metrics export of a one-shot cron ``run``."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from reconciler.app.operations import engine_options, reconcile
from reconciler.app.wiring import open_table
from reconciler.checks import CHECKS
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import LeaseBusy, StoreFault
from reconciler.metrics import LiveMetrics, build_registry, export
from reconciler.pipeline.values import Report
from reconciler.scheduling import (
    GracefulStop,
    JobSpec,
    add_jobs,
    blocking_scheduler,
    cron_trigger,
)
from reconciler.settings import Settings
from reconciler.sharding import Shard
from reconciler.stores.sql import SqlDocumentTable

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]


def job_specs(settings: Settings) -> list[JobSpec]:
    """The scheduled jobs: full reconciliation, TTL and effective dates."""
    return [
        JobSpec("full", settings.schedule.full, None),
        JobSpec("ttl", settings.schedule.ttl, frozenset({"ttl"})),
        JobSpec("dates", settings.schedule.dates, frozenset({"dates"})),
    ]


class Runner:
    """Runs one reconciliation job under the lease and feeds the live metrics."""

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

    def expect_full(self, after: datetime) -> None:
        """The full job is next due at its first time after ``after``, plus the schedule's
        ``full_grace``."""
        fire = self._full.get_next_fire_time(None, after)
        grace = self.settings.schedule.full_grace
        self.live.full_due = fire + grace if fire is not None else None

    def __call__(
        self, spec: JobSpec, *, mode: str = "run", actor: str = "schedule"
    ) -> Report | None:
        """Run ``spec`` once the lane is free; never raises (a failure is logged, recorded and
        shown in /healthz)."""
        with self._lane:
            if self.stopping.is_set():
                log.info("job %s not started: serve is stopping", spec.job_id)
                return None
            return self._run(spec, mode=mode, actor=actor)

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
        gauge = self.live.lease_held.labels(shard=shard)
        try:
            report = reconcile(
                self.settings,
                options,
                lease_renew_every=self.lease_renew_every,
                on_lease=lambda held: gauge.set(1 if held else 0),
                clock=self.clock,
            )
        except LeaseBusy as exc:
            log.info("job %s skipped: %s", spec.job_id, exc)
            self.live.lease_skips.labels(shard=shard).inc()
            return None
        except Exception as exc:
            log.error(
                "job %s failed: %s", spec.job_id, exc, exc_info=log.isEnabledFor(logging.DEBUG)
            )
            self.live.set_health(False, f"job {spec.job_id} failed: {exc}")
            if isinstance(exc, StoreFault):
                self.live.store_fault = str(exc)
            return None
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


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: " + format, *args)


def http_app(
    registry: CollectorRegistry, live: LiveMetrics, *, clock: Clock = SYSTEM_CLOCK
) -> Callable[..., Iterable[bytes]]:
    """``/metrics`` (Prometheus exposition) and ``/healthz`` (200 or 503 with the reason; 503
    too when the full job is overdue)."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            healthy, problem = live.health(clock.now())
            body = json.dumps({"healthy": healthy, "problem": problem}).encode()
            status = "200 OK" if healthy else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json")])
            return [body]
        if path in ("/metrics", "/"):
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics or /healthz\n"]

    return app


def start_http(listen: str, app: Callable[..., Iterable[bytes]]) -> WSGIServer:
    """Serve ``app`` on ``host:port`` in a daemon thread."""
    host, _, port = listen.rpartition(":")
    server = make_server(host or "127.0.0.1", int(port), app, _ThreadingServer, _QuietHandler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    log.info("metrics on http://%s:%d/metrics", *server.server_address[:2])
    return server


def serve(settings: Settings, *, shard: Shard | None = None, run_now: bool = False) -> None:
    """Run the scheduler until SIGTERM/SIGINT; the running job finishes first.

    ``run_now`` also runs the full job once at start (metrics are then current at once).
    """
    table: SqlDocumentTable = open_table(settings)
    registry, live = build_registry(table.metrics_snapshot)
    runner = Runner(settings, live=live, shard=shard)
    runner.expect_full(runner.clock.now())
    server = start_http(settings.metrics.listen, http_app(registry, live))
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
    stop = GracefulStop(scheduler)
    runner.stopping = stop.stopping  # jobs waiting for the lane do not start once stopping
    stop.install()
    for job in scheduler.get_jobs():
        log.info("job %s: %s", job.id, job.trigger)
    try:
        stop.run()  # blocks until a signal, then until the running job is recorded
    finally:
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
