"""Issue 24, item 4: a ``serve`` job is bounded in time. Past ``[schedule] job_deadline`` (or
``stop_grace`` after SIGTERM) it stops at its next safe point and is recorded as failed; one
stuck on a silent source is left and recorded, and the lane and the lease go to the next job;
a job stopped between payload batches leaves what the next run finishes. Real ``serve``
subprocesses and a real local HTTP source that trickles bytes (or stalls); real time, a few
seconds each. (Where the job's own deadline is what is tested, ``source_deadline`` is far off:
a source's read deadline, which isolates a slow source, is tested in test_daemon_sources.py.)"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from acceptance_kit import Deployment
from exposition_kit import free_port, scrape_until, start_serve
from raw_server_kit import RawServer, answer

from reconciler.app.daemon import Runner, job_specs
from reconciler.app.operations import engine_options, reconcile
from reconciler.app.stopping import JobControl
from reconciler.errors import JobStopped
from reconciler.metrics import build_registry
from reconciler.stores.sql import SqlDocumentTable

#: A registry listing that never ends in time: 4 KiB, a byte every 50 ms (200 s in all).
LISTING = b'{"documents": []' + b" " * 4096 + b"}"
NOT_SOON = '[schedule]\nfull = "0 2 1 1 *"\nttl = "0 3 1 1 *"\ndates = "0 4 1 1 *"\n'


@pytest.fixture
def trickling() -> Iterator[RawServer]:
    server = RawServer(answer(LISTING), trickle=0.05)
    yield server
    server.close()


def deployment_with(root: Path, server: RawServer, schedule: str) -> tuple[Deployment, int]:
    """An ingested vault, then an HTTP registry at ``server`` beside it (its own HTTP deadline
    far away: only the job's bounds can stop a read of it)."""
    dep = Deployment(root)
    dep.family("expenses", versions=2)
    dep.init_ingest()
    dep.configure(
        source_extra="\n".join(
            [
                "[[sources]]",
                'name = "reg"',
                'type = "http"',
                f'url = "{server.url}"',
                "[sources.options]",
                "retries = 0",
                "read_timeout = 30",
                "deadline = 3600",
            ]
        )
    )
    port = free_port()
    dep.config.write_text(
        dep.config.read_text() + schedule + f'[metrics]\nlisten = "127.0.0.1:{port}"\n'
    )
    return dep, port


def recorded(dep: Deployment) -> list[tuple[str | None, str, str | None]]:
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    try:
        return [(r.job, r.status, r.error) for r in reversed(table.last_runs(50))]
    finally:
        table.close()


def start(dep: Deployment) -> tuple[subprocess.Popen[bytes], Path]:
    log = dep.root / "serve.log"
    return start_serve(dep, log), log


def test_sigterm_stops_serve_while_its_job_reads_a_trickling_source(
    tmp_path: Path, trickling: RawServer
) -> None:
    """The issue's stall: a source that trickles a byte at a time held the full job (and so
    serve, on SIGTERM) for as long as it pleased. Now SIGTERM gives the job ``stop_grace``
    (2 s here), then it stops between two bytes, is recorded failed, and serve exits 0."""
    dep, _ = deployment_with(tmp_path, trickling, NOT_SOON + 'stop_grace = "2s"\n')
    proc, log = start(dep)
    try:
        assert trickling.requested.wait(60), log.read_text()  # the full job reads the source
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert took < 15, f"{took:.1f}s to stop: {log.read_text()}"
    (_job, status, error), *_ = [r for r in recorded(dep) if r[0] == "full"]
    assert status == "failed"
    assert "JobStopped" in (error or "")
    assert "serve is stopping (SIGTERM)" in (error or "")
    assert "left there" not in (error or "")  # it stopped between two bytes, by itself
    assert "stopped" in log.read_text()


def test_a_job_past_its_deadline_is_failed_recorded_counted_and_shown(
    tmp_path: Path, trickling: RawServer
) -> None:
    """Under serve the full job never ended, nothing was recorded and /healthz stayed 200.
    Now, 3 s past its start (``job_deadline``), it stops at its next safe point: a failed
    run in the run log with its reason, ``run_failures_total`` up, /healthz 503 saying why."""
    dep, port = deployment_with(
        tmp_path, trickling, NOT_SOON + 'job_deadline = "3s"\nsource_deadline = "1h"\n'
    )
    proc, log = start(dep)
    try:
        failed = scrape_until(
            port,
            lambda r: r.value("reconciler_run_failures_total", reconciler_job="full") == 1.0,
            proc,
            log,
            seconds=60,
        )
        health = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert failed.value("reconciler_last_run_success", reconciler_job="full") == 0.0
    assert health.status_code == 503
    assert "passed its deadline (3s)" in health.json()["problem"]
    [(_, status, error)] = [r for r in recorded(dep) if r[0] == "full"]
    assert status == "failed"
    assert "passed its deadline (3s)" in (error or "")
    assert "left there" not in (error or "")


def test_a_job_stuck_on_a_silent_source_stops_at_its_deadline_and_the_next_job_runs(
    tmp_path: Path,
) -> None:
    """A source that sends its headers and then nothing (its read timeout far off) cannot be
    stopped between bytes. The job reads it in a thread of its own (issue 36), so at its
    deadline the job stops by itself, having written nothing, and is recorded failed; the
    read is left in its thread, and the next job in the lane takes the lease and the chunk
    index and succeeds."""
    server = RawServer(answer(b'{"documents": []}'), stall=1)  # only the first request stalls
    try:
        dep, _ = deployment_with(
            tmp_path,
            server,
            '[schedule]\njob_deadline = "1s"\nstop_grace = "1s"\nsource_deadline = "1h"\n',
        )
        settings = dep.settings
        table = SqlDocumentTable.from_url(settings.table.resolved_url())
        registry, live = build_registry(table.metrics_snapshot)
        runner = Runner(settings, live=live)
        full, _ttl, dates = job_specs(settings)
        started = time.monotonic()
        assert runner(full) is None
        assert time.monotonic() - started < 10
        [(_, status, error)] = [r for r in recorded(dep) if r[0] == "full"]
        assert status == "failed"
        assert "passed its deadline (1s)" in (error or "")
        assert (
            registry.get_sample_value("reconciler_run_failures_total", {"reconciler_job": "full"})
            == 1.0
        )
        report = runner(dates)  # the lane, the lease and the index are free again
        assert report is not None
        assert not report.refused
        assert [r[:2] for r in recorded(dep) if r[0] == "dates"] == [("dates", "succeeded")]
        before = recorded(dep)
        server.close()  # the left job's read ends now: it finds it was stopped
        time.sleep(1.0)
        assert recorded(dep) == before
        table.close()
    finally:
        server.close()


def test_a_run_stopped_between_payload_batches_is_finished_by_the_next(tmp_path: Path) -> None:
    """Asked to stop while it writes (its apply has written 3 of the 6 documents it rewrites,
    one document a batch), a run stops before its next batch: the batches it wrote are
    confirmed, the run is failed with what it wrote, and the next run writes the rest (then
    nothing is left to do)."""
    dep = Deployment(tmp_path)
    for name in ("a", "b", "c"):
        dep.family(name, versions=2)
    dep.init_ingest()
    for name in ("a", "b", "c"):  # retired in the source: 6 documents' 12 chunks change
        dep.edit_front(f"{name}-v2", status="retired")
    dep.config.write_text(
        dep.config.read_text().replace(
            'collection = "corpus"', 'collection = "corpus"\nwrite_batch = 1\nscroll_batch = 1'
        )
    )
    settings = dep.settings
    control = JobControl("full")
    seen: list[int] = []

    def progress(stage: str, count: int) -> None:
        if stage == "applied":  # each chunk the apply reads (one document at a time here)
            seen.append(count)
            if len(seen) == 7:  # 3 documents written, the 4th one's first chunk read
                control.request_stop("the test asked")

    options = engine_options(settings, mode="run", actor="test", job="full")
    with pytest.raises(JobStopped, match="the test asked"):
        reconcile(settings, options, progress=progress, control=control)
    [(_, status, error)] = [r for r in recorded(dep) if r[0] == "full"]
    assert status == "failed"
    assert "JobStopped" in (error or "")
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    try:
        run = table.last_runs(1)[0]
        assert run.counts
        assert not run.counts.get("unconfirmed")  # nothing left in doubt
        written = int(run.points_written or 0)
        assert written == 6
        assert table.verify_audit().ok
    finally:
        table.close()
    code, second = dep.json("run")
    assert code == 0, second
    assert second["writes"]["points"] == 12 - written  # the rest, and only the rest
    code, third = dep.json("check")
    assert code == 0, json.dumps(third)[:2000]
