"""The daemon: jobs under the lease, failures recorded and shown, /metrics and /healthz,
SIGTERM during a run, cron metrics export, and no secret ever in logs or metrics."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from acceptance_kit import Deployment
from exposition_kit import start_serve
from prometheus_client.parser import text_string_to_metric_families

from reconciler.app import daemon as daemon_module
from reconciler.app.daemon import Runner, http_app, job_specs, start_http
from reconciler.app.holding import lease_name
from reconciler.clock import ManualClock
from reconciler.errors import StoreFault
from reconciler.metrics import build_registry
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.lease import make_lease


@pytest.fixture
def deployment(tmp_path: Path) -> Deployment:
    dep = Deployment(tmp_path)
    dep.family("expenses", versions=2)
    dep.note("runbook", id="runbook", status="current", effective_from="2024-01-01")
    dep.init_ingest()
    dep.edit_front("expenses-v1", status="current", superseded_by=None)  # drift in the source
    return dep


def runs(dep: Deployment) -> list[tuple[str | None, str, str]]:
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    try:
        return [(r.job, r.mode, r.status) for r in reversed(table.last_runs(50))]
    finally:
        table.close()


def test_runner_runs_a_job_and_records_it(deployment: Deployment) -> None:
    settings = deployment.settings
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    registry, live = build_registry(table.metrics_snapshot)
    full = job_specs(settings)[0]
    report = Runner(settings, live=live)(full)
    assert report is not None
    assert report.applied is not None
    assert ("full", "run", "succeeded") in runs(deployment)
    assert (
        registry.get_sample_value("reconciler_run_duration_seconds_count", {"check": "total"}) == 1
    )
    assert registry.get_sample_value("reconciler_lease_held", {"shard": "0/1"}) == 0.0
    assert (
        registry.get_sample_value("reconciler_last_run_success", {"reconciler_job": "full"}) == 1.0
    )
    assert live.healthy
    table.close()


def test_runner_skips_when_another_runner_holds_the_lease(deployment: Deployment) -> None:
    settings = deployment.settings
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    registry, live = build_registry(table.metrics_snapshot)
    other = make_lease(table.engine, lease_name("0/1"))
    assert other.acquire()
    before = runs(deployment)
    try:
        assert Runner(settings, live=live)(job_specs(settings)[0]) is None
    finally:
        other.release()
    assert runs(deployment) == before  # nothing read, nothing recorded
    assert registry.get_sample_value("reconciler_lease_skips_total", {"shard": "0/1"}) == 1.0
    assert live.healthy  # losing the race is not a failure
    table.close()


def test_a_failing_job_is_recorded_shown_and_the_schedule_goes_on(deployment: Deployment) -> None:
    deployment.config.write_text(
        deployment.config.read_text().replace('collection = "corpus"', 'collection = "nope"')
    )
    settings = deployment.settings
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    registry, live = build_registry(table.metrics_snapshot)
    runner = Runner(settings, live=live)
    assert runner(job_specs(settings)[0]) is None  # never raises into the scheduler
    assert not live.healthy
    assert "does not exist" in (live.problem or "")
    assert ("full", "run", "failed") in runs(deployment)
    assert (
        registry.get_sample_value("reconciler_run_failures_total", {"reconciler_job": "full"})
        == 1.0
    )
    assert (
        registry.get_sample_value("reconciler_last_run_success", {"reconciler_job": "full"}) == 0.0
    )
    assert runner(job_specs(settings)[2]) is None  # the next job runs (and fails) again
    assert (
        registry.get_sample_value("reconciler_run_failures_total", {"reconciler_job": "dates"})
        == 1.0
    )
    table.close()


def test_metrics_and_healthz_over_http(deployment: Deployment) -> None:
    table = SqlDocumentTable.from_url(deployment.settings.table.resolved_url())
    registry, live = build_registry(table.metrics_snapshot)
    server = start_http("127.0.0.1:0", http_app(registry, live))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
        text = requests.get(f"{base}/metrics", timeout=5).text
        names = {f.name for f in text_string_to_metric_families(text)}
        assert {"reconciler_build_info", "reconciler_live_siblings", "reconciler_findings"} <= names
        live.set_health(False, "job full failed: boom")
        response = requests.get(f"{base}/healthz", timeout=5)
        assert response.status_code == 503
        assert response.json() == {"healthy": False, "problem": "job full failed: boom"}
        assert requests.get(f"{base}/nothing", timeout=5).status_code == 404
    finally:
        server.shutdown()
        server.server_close()
        table.close()


def test_cron_run_writes_the_textfile_and_skips_on_a_held_lease(deployment: Deployment) -> None:
    textfile = deployment.root / "metrics" / "reconciler.prom"
    textfile.parent.mkdir()
    deployment.config.write_text(
        deployment.config.read_text() + f'[metrics]\ntextfile = "{textfile}"\n'
    )
    result = deployment.cli("run")
    assert result.exit_code == 0, result.output
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(textfile.read_text())
        for s in family.samples
    }
    assert samples[("reconciler_last_run_success", (("reconciler_job", "run"),))] == 1.0
    assert samples[("reconciler_run_duration_seconds_count", (("check", "total"),))] == 1.0

    table = SqlDocumentTable.from_url(deployment.settings.table.resolved_url())
    other = make_lease(table.engine, lease_name("0/1"))
    assert other.acquire()
    try:
        before = runs(deployment)
        skipped = deployment.cli("run")
        assert skipped.exit_code == 0
        assert "skipped" in skipped.output
        assert runs(deployment) == before
        refused = deployment.cli("apply")  # a manual apply is told, not silently skipped
        assert refused.exit_code == 1
        assert "another runner holds the lease" in refused.output
    finally:
        other.release()
        table.close()


def test_sigterm_during_serve_finishes_the_run_and_exits_cleanly(deployment: Deployment) -> None:
    deployment.config.write_text(
        deployment.config.read_text() + '[metrics]\nlisten = "127.0.0.1:0"\n'
    )
    log = deployment.root / "serve.log"
    proc = start_serve(deployment, log)
    try:
        deadline = time.monotonic() + 60
        while "Running job" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "Running job" in log.read_text(), log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "SIGTERM received" in text
    assert "stopped" in text
    assert ("full", "run", "succeeded") in runs(deployment)
    assert not any(status == "running" for _job, _mode, status in runs(deployment))


def test_api_key_never_appears_in_logs_output_or_metrics(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-5up3r-s3cr3t-k3y"
    monkeypatch.setenv("QDRANT_TEST_KEY", secret)
    dep = Deployment(tmp_path)
    dep.note("a", id="a", status="current")
    dep.config.write_text(
        dep.config.read_text().replace(
            'path = "qdrant"',
            'url = "http://127.0.0.1:9"\napi_key_env = "QDRANT_TEST_KEY"\ntimeout = 2',
        )
        + f'[metrics]\ntextfile = "{tmp_path / "m.prom"}"\n'
    )
    assert dep.cli("init").exit_code == 1  # no server there: a clear error, not a crash
    caplog.set_level(logging.DEBUG)
    outputs = []
    for args in (
        ["--log-level", "debug", "run"],
        ["--log-level", "debug", "check"],
        ["--log-level", "debug", "status"],
    ):
        result = dep.cli(*args)
        assert result.exit_code == 1
        outputs.append(result.output)
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    registry, _ = build_registry(table.metrics_snapshot)
    from prometheus_client import generate_latest  # noqa: PLC0415

    exposition = generate_latest(registry).decode()
    table.close()
    assert "127.0.0.1:9" in "\n".join(outputs)  # the error says where, never with what key
    for text in (*outputs, caplog.text, exposition, (tmp_path / "m.prom").read_text()):
        assert secret not in text
    assert os.environ["QDRANT_TEST_KEY"] == secret


def test_a_storage_fault_shows_in_healthz_and_run_log_readable(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that meets a full disk: /healthz says why, and the run log is reported
    unreadable until a job succeeds again (even if its reads still work)."""
    settings = deployment.settings
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    registry, live = build_registry(table.metrics_snapshot)
    runner = Runner(settings, live=live)
    assert registry.get_sample_value("reconciler_run_log_readable") == 1.0

    def full(*_args: object, **_kwargs: object) -> None:
        raise StoreFault("document table at x.db: disk full (database or disk is full)")

    monkeypatch.setattr("reconciler.app.daemon.reconcile", full)
    assert runner(job_specs(settings)[0]) is None
    assert not live.healthy
    assert "disk full" in (live.problem or "")
    assert registry.get_sample_value("reconciler_run_log_readable") == 0.0
    monkeypatch.undo()
    assert runner(job_specs(settings)[0]) is not None
    assert live.healthy
    assert registry.get_sample_value("reconciler_run_log_readable") == 1.0
    table.close()


def test_healthz_turns_503_when_the_full_job_is_overdue(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: a stalled full job kept /healthz at 200 for ever. Now the full job is due
    at its next scheduled time (plus ``[schedule] full_grace``, 6h by default) after serve
    started or after it last succeeded; past that, /healthz says so, until it succeeds. A
    run refused by the guard, or partial, is no success."""
    settings = deployment.settings  # full at 02:33 (the default)
    clock = ManualClock(datetime(2026, 12, 1, 10, 0, tzinfo=UTC))
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    registry, live = build_registry(table.metrics_snapshot)
    runner = Runner(settings, live=live, clock=clock)
    runner.expect_full(clock.now())  # as serve does at start
    app = http_app(registry, live, clock=clock)

    def healthz() -> tuple[str, dict[str, object]]:
        answer: list[str] = []
        body = b"".join(app({"PATH_INFO": "/healthz"}, lambda status, _h: answer.append(status)))
        return answer[0], json.loads(body)

    assert healthz()[0] == "200 OK"
    clock.advance_to(datetime(2026, 12, 2, 8, 30, tzinfo=UTC))  # due 02:33 + 6h: still fine
    assert healthz()[0] == "200 OK"
    clock.advance_to(datetime(2026, 12, 2, 8, 34, tzinfo=UTC))  # and now it is overdue
    status, body = healthz()
    assert status.startswith("503")
    assert "the full job has not succeeded since it was due" in str(body["problem"])

    assert runner(job_specs(settings)[1]) is not None  # a ttl job's success is not enough
    assert healthz()[0].startswith("503")
    real = daemon_module.reconcile

    def refused(settings_: object, options: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(real(settings_, options, **kwargs), refused=True)

    monkeypatch.setattr("reconciler.app.daemon.reconcile", refused)
    assert runner(job_specs(settings)[0]) is not None  # the guard refused the full job
    assert healthz()[0].startswith("503")
    monkeypatch.undo()
    assert runner(job_specs(settings)[0]) is not None  # the full job succeeds
    assert healthz()[0] == "200 OK"
    assert live.full_due == datetime(2026, 12, 3, 8, 33, tzinfo=UTC)
    table.close()


def test_jobs_due_together_queue_in_one_lane_and_a_stop_leaves_the_queue(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: jobs that came due in the same minute contended for the lease and all but one
    were skipped ("another runner holds the lease"). In serve they now wait for each other;
    once serve is stopping, a job still waiting does not start."""
    settings = deployment.settings
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    _, live = build_registry(table.metrics_snapshot)
    runner = Runner(settings, live=live)
    running: list[str] = []
    most: list[int] = []
    ran: list[str] = []
    inside = threading.Event()
    go_on = threading.Event()

    def one_at_a_time(_settings: object, options: Any, **_kwargs: object) -> SimpleNamespace:
        running.append(options.job)
        most.append(len(running))  # never two jobs at once (asserted below)
        inside.set()
        go_on.wait(10)
        ran.append(options.job)
        running.remove(options.job)
        return SimpleNamespace(
            timings={},
            error=None,
            refused=False,
            partial=False,
            run_id="r",
            findings=[],
            writes=dict,
        )

    monkeypatch.setattr("reconciler.app.daemon.reconcile", one_at_a_time)
    full, ttl, dates = job_specs(settings)
    first = threading.Thread(target=runner, args=[full])
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=runner, args=[ttl])
    second.start()  # comes due while the full job runs: it waits for the lane
    assert ran == []
    go_on.set()
    first.join(10)
    second.join(10)
    assert ran == ["full", "ttl"]  # not skipped: run after the full job
    assert max(most) == 1

    go_on.clear()
    inside.clear()
    first = threading.Thread(target=runner, args=[full])
    first.start()
    assert inside.wait(10)
    waiting = threading.Thread(target=runner, args=[dates])
    waiting.start()
    runner.stopping.set()  # SIGTERM: the running job finishes, the waiting one never starts
    go_on.set()
    first.join(10)
    waiting.join(10)
    assert ran == ["full", "ttl", "full"]
    assert max(most) == 1
    table.close()


def test_the_ttl_and_dates_jobs_read_the_sources_so_an_outage_shows_at_the_next_job(
    deployment: Deployment,
) -> None:
    """Issue 24: only the full run (daily) read the sources, so a vault gone for 2 minutes
    never showed (``source_up`` stayed 1) and the TTL's last successful read was the full
    run's. Now every job reads them: the TTL job finds the vault gone, the dates job finds it
    back and moves its last successful read to the clock's time."""
    settings = deployment.settings
    clock = ManualClock(datetime(2026, 12, 1, 10, 0, tzinfo=UTC))
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    registry, live = build_registry(table.metrics_snapshot)
    runner = Runner(settings, live=live, clock=clock)
    full, ttl, dates = job_specs(settings)
    assert runner(full) is not None
    assert registry.get_sample_value("reconciler_source_up", {"source": "hb"}) == 1.0
    read_by_full = table.source_status()["hb"].last_success_at

    away = deployment.root / "vault.away"
    deployment.vault.rename(away)
    clock.advance(120)
    assert runner(ttl) is not None
    assert registry.get_sample_value("reconciler_source_up", {"source": "hb"}) == 0.0
    status = table.source_status()["hb"]
    assert status.last_success_at == read_by_full  # a failed read keeps the TTL's clock
    assert status.last_error

    away.rename(deployment.vault)
    clock.advance(180)
    assert runner(dates) is not None
    assert registry.get_sample_value("reconciler_source_up", {"source": "hb"}) == 1.0
    assert table.source_status()["hb"].last_success_at == clock.now()
    table.close()


def test_the_full_job_at_start_beside_the_watch_opens_the_local_index(
    deployment: Deployment,
) -> None:
    """A source changed while ``serve`` was down: at start the watch reconciles the change and
    ``--run-now`` runs the full job, side by side. Local mode locks its folder, and the job
    let go of the watch's stores only for a moment (``before_job``): the watch opened them
    again at once, and the full job failed ("the local Qdrant storage ... is open in another
    process"), a failed job in the run log, ``/healthz`` 503 and a failure counted."""
    deployment.config.write_text(
        deployment.config.read_text() + '[metrics]\nlisten = "127.0.0.1:0"\n'
    )
    log = deployment.root / "serve.log"

    def serve_until_full_job() -> None:
        proc = start_serve(deployment, log)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not any(
                job == "full" and status != "running" for job, _m, status in runs(deployment)
            ):
                time.sleep(0.2)
            time.sleep(3)  # (the watch's first pass)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()

    serve_until_full_job()  # (the watch's marks are written)
    before = len(runs(deployment))
    deployment.edit_front("runbook", doc_class="ops")  # while serve is down
    serve_until_full_job()
    text = log.read_text()
    assert "open in another process" not in text, text
    assert [r for r in runs(deployment)[before:] if r[0] == "full"] == [
        ("full", "run", "succeeded")
    ], (runs(deployment), text)
