"""Issue 36, item 1: every store call of ``serve`` is bounded. A document table (PostgreSQL
behind a loopback proxy that stops forwarding) or a Qdrant server (a loopback listener that
accepts and never answers) that stops answering neither holds a job past its deadline, nor
keeps ``/healthz`` at 200, nor stops ``/metrics`` from answering, nor keeps ``serve`` alive
past ``stop_grace`` after SIGTERM. Real ``serve`` processes, real sockets, real time (the
bounds asserted are the configured ones plus a generous margin for a loaded machine)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from acceptance_kit import Deployment
from exposition_kit import free_port, start_serve
from raw_server_kit import RawServer, answer, http_source
from silent_kit import Proxy, Silent
from sqlalchemy.engine import URL, make_url

from reconciler.stores.sql import SqlDocumentTable

#: Added to every bound asserted: the machine is shared and loaded.
MARGIN = 10.0
#: The job deadline where a job must first succeed (the stores are loaded in it).
DEADLINE = 20
FAR = 'full = "0 2 1 1 *"\nttl = "0 3 1 1 *"\n'


def configure(dep: Deployment, schedule: str) -> int:
    port = free_port()
    dep.config.write_text(
        dep.config.read_text()
        + "[schedule]\n"
        + schedule
        + f'[metrics]\nlisten = "127.0.0.1:{port}"\n'
    )
    return port


def metrics(port: int) -> str:
    """One scrape, which must answer (the issue: it did not within 5 s)."""
    answer = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=8)
    assert answer.status_code == 200
    return answer.text


def last_full(text: str) -> bool | None:
    """Whether the last full job succeeded, as a scrape says (None: none has ended yet)."""
    found = re.search(r'^reconciler_last_run_success\{reconciler_job="full"\} (\S+)$', text, re.M)
    return None if found is None else float(found.group(1)) == 1.0


def health(port: int) -> requests.Response:
    return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=8)


def wait_health(
    port: int, status: int, proc: subprocess.Popen[bytes], log: Path, seconds: float
) -> requests.Response:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            answer = health(port)
        except requests.RequestException:
            answer = None
        if answer is not None and answer.status_code == status:
            return answer
        time.sleep(0.5)
    raise AssertionError(f"/healthz never answered {status} in {seconds:g}s: {log.read_text()}")


def stop(proc: subprocess.Popen[bytes], log: Path, bound: float) -> float:
    """SIGTERM; serve must exit 0 within ``bound`` seconds. How long it took."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(
            f"serve still ran {bound:g}s after SIGTERM: {log.read_text()}"
        ) from None
    assert code == 0, log.read_text()
    return time.monotonic() - sent


@pytest.fixture
def proc_cleanup() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_on_a_postgresql_that_stops_answering(
    tmp_path: Path, pg_url: str, proc_cleanup: list[subprocess.Popen[bytes]]
) -> None:
    """The issue's first finding: a PostgreSQL that accepts connections and never answers
    held a job for minutes past its deadline, /healthz said 200, /metrics did not answer and
    SIGTERM did not stop serve. Here the table is reached through a proxy that, once serve's
    first full job has succeeded, forwards nothing more (on the connections serve holds and on
    new ones): the next job fails within its bounds and /healthz turns 503 naming the table,
    every scrape answers, and SIGTERM ends serve within ``stop_grace``."""
    url = make_url(pg_url)
    proxy = Proxy((url.host or "127.0.0.1", url.port or 5432))
    try:
        dep = Deployment(tmp_path, table_url=url.set(port=proxy.port).render_as_string(False))
        dep.family("expenses", versions=2)
        dep.init_ingest()
        # (a deadline the first full job meets on a loaded machine: it loads the stores)
        port = configure(
            dep, FAR + f'dates = "* * * * *"\njob_deadline = "{DEADLINE}s"\nstop_grace = "4s"\n'
        )
        log = tmp_path / "serve.log"
        proc = start_serve(dep, log)  # (--run-now: the full job runs at once)
        proc_cleanup.append(proc)
        wait_health(port, 200, proc, log, 120)
        deadline = time.monotonic() + 120
        while (ran := last_full(metrics(port))) is None:  # (the full job has ended)
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        assert ran, log.read_text()  # it succeeded: the table answered until now
        proxy.hang()
        # The dates job comes at the next minute; it (and every scrape) meets the silence.
        deadline = time.monotonic() + 60 + DEADLINE + 4 + MARGIN * 3
        unhealthy = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            text = metrics(port)  # answers, every time
            answer = health(port)
            if answer.status_code == 503:
                unhealthy = answer
                if "job dates" in (answer.json()["problem"] or ""):
                    break
            time.sleep(1.0)
        assert unhealthy is not None, log.read_text()
        assert "reconciler_run_log_readable 0.0" in text
        problem = unhealthy.json()["problem"]
        assert "job dates" in problem, problem
        took = stop(proc, log, 4 + MARGIN)
        print(f"serve exited {took:.1f}s after SIGTERM")
    finally:
        proxy.close()
    # (the table answers again: what serve ran before the silence is recorded)
    table = SqlDocumentTable.from_url(pg_url)
    try:
        statuses = {(r.job, r.status) for r in table.last_runs(20)}
    finally:
        table.close()
    assert ("full", "succeeded") in statuses


def silent_index(tmp_path: Path, silent: Silent) -> Deployment:
    """An ingested vault whose chunk index is then a Qdrant server that never answers."""
    dep = Deployment(tmp_path)
    dep.family("expenses", versions=2)
    dep.init_ingest()
    dep.config.write_text(
        dep.config.read_text().replace('path = "qdrant"', f'url = "http://127.0.0.1:{silent.port}"')
    )
    return dep


def runs(dep: Deployment) -> list[tuple[str | None, str, str | None]]:
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    try:
        return [(r.job, r.status, r.error) for r in table.last_runs(20)]
    finally:
        table.close()


def test_a_job_on_a_silent_qdrant_server_fails_within_its_deadline(
    tmp_path: Path, proc_cleanup: list[subprocess.Popen[bytes]]
) -> None:
    """A Qdrant server that accepts and never answers: each request is bounded by half the
    job's deadline (``index.timeout`` at most), so the full job fails, is recorded with the
    reason and shown by /healthz within its deadline and grace, while /metrics answers."""
    silent = Silent()
    try:
        dep = silent_index(tmp_path, silent)
        port = configure(dep, FAR + 'dates = "0 4 1 1 *"\njob_deadline = "4s"\nstop_grace = "4s"\n')
        log = tmp_path / "serve.log"
        proc = start_serve(dep, log)
        proc_cleanup.append(proc)
        assert silent.accepted.wait(120), log.read_text()
        started = time.monotonic()
        answer = wait_health(port, 503, proc, log, 4 + 4 + MARGIN)
        print(f"/healthz 503 {time.monotonic() - started:.1f}s after the first request")
        metrics(port)
        assert "Qdrant" in answer.json()["problem"] or "deadline" in answer.json()["problem"]
        stop(proc, log, 4 + MARGIN)
    finally:
        silent.close()
    [(_job, status, error)] = [r for r in runs(dep) if r[0] == "full"]
    assert status == "failed"
    assert error


def test_sigterm_ends_serve_within_stop_grace_while_a_qdrant_call_hangs(
    tmp_path: Path, proc_cleanup: list[subprocess.Popen[bytes]]
) -> None:
    """The job waits on a Qdrant server that never answers (each request may take 30 s:
    ``index.timeout``, under a deadline of a minute). SIGTERM: the job is asked to stop, then
    left in its store call, recorded, and serve exits 0 within ``stop_grace`` (4 s here)."""
    silent = Silent()
    try:
        dep = silent_index(tmp_path, silent)
        port = configure(
            dep, FAR + 'dates = "0 4 1 1 *"\njob_deadline = "60s"\nstop_grace = "4s"\n'
        )
        log = tmp_path / "serve.log"
        proc = start_serve(dep, log)
        proc_cleanup.append(proc)
        assert silent.accepted.wait(120), log.read_text()
        time.sleep(1.0)
        metrics(port)
        took = stop(proc, log, 4 + MARGIN)
        print(f"serve exited {took:.1f}s after SIGTERM")
    finally:
        silent.close()
    [(_job, status, error)] = [r for r in runs(dep) if r[0] == "full"]
    assert status == "failed"
    assert "serve is stopping (SIGTERM)" in (error or "")
    assert "in a call to a store" in (error or "")
    # The lease went with the process: with the index back, the next run takes it and
    # converges (nothing was lost, the audit chain holds).
    dep.config.write_text(
        dep.config.read_text().replace(f'url = "http://127.0.0.1:{silent.port}"', 'path = "qdrant"')
    )
    code, data = dep.json("run")
    assert code == 0, data
    code, verified = dep.json("audit", "verify")
    assert code == 0, verified


@dataclass
class MidJob:
    """A vault whose current version was retired since ingestion, beside a registry that
    trickles its answer (it holds the job in its read, lease held, until its read deadline),
    the table reached through a proxy the test silences while the job reads."""

    dep: Deployment
    proxy: Proxy
    trickling: RawServer
    url: URL


@pytest.fixture
def mid_job(tmp_path: Path, pg_url: str) -> Iterator[MidJob]:
    url = make_url(pg_url)
    proxy = Proxy((url.host or "127.0.0.1", url.port or 5432))
    trickling = RawServer(answer(b'{"documents": []' + b" " * 4096 + b"}"), trickle=0.05)
    try:
        dep = Deployment(tmp_path, table_url=url.set(port=proxy.port).render_as_string(False))
        dep.family("expenses", versions=2)
        dep.init_ingest()
        dep.configure(source_extra=http_source(trickling.url))
        dep.edit_front("expenses-v2", status="retired")
        yield MidJob(dep, proxy, trickling, url)
    finally:
        trickling.close()
        proxy.close()


def test_sigterm_while_a_job_waits_on_postgresql_mid_session_keeps_the_lease_safe(
    tmp_path: Path, mid_job: MidJob, proc_cleanup: list[subprocess.Popen[bytes]]
) -> None:
    """The hard case: the job holds the lease (PostgreSQL's advisory lock, on a session of
    its own) and its table connections are open when the database stops answering (the
    proxy goes silent while the job reads a trickling registry; past its read deadline the
    job goes on, into a table call that gets no answer). SIGTERM: serve exits 0 within
    ``stop_grace``, leaving the job in its call. Its lease is not lost: while its session
    lives (the proxy holds it) another runner is refused the lease; once the session ends
    the next run takes it and converges."""
    dep, proxy, trickling, url = mid_job.dep, mid_job.proxy, mid_job.trickling, mid_job.url
    direct = tmp_path / "direct.toml"
    try:
        port = configure(
            dep, FAR + 'dates = "0 4 1 1 *"\njob_deadline = "20s"\nstop_grace = "4s"\n'
        )
        direct.write_text(dep.config.read_text().replace(f":{proxy.port}/", f":{url.port}/"))
        log = tmp_path / "serve.log"
        proc = start_serve(dep, log)
        proc_cleanup.append(proc)
        assert trickling.requested.wait(120), log.read_text()  # the job holds the lease
        proxy.hang()
        time.sleep(10 + 2)  # its read deadline (half of 20 s) passes: into the silent table
        metrics(port)
        took = stop(proc, log, 4 + MARGIN)
        print(f"serve exited {took:.1f}s after SIGTERM")
        assert "was left there" in log.read_text()
        other = Deployment(tmp_path, configured=True)
        other.config = direct
        busy = other.cli("apply")
        assert busy.exit_code == 1, busy.output  # the left job's session still holds the lease
        assert "another runner holds the lease" in busy.output
    finally:
        trickling.close()
        proxy.close()  # (the left session ends: PostgreSQL lets its lock go)
    other = Deployment(tmp_path, configured=True)
    other.config = direct
    deadline = time.monotonic() + 30
    while "another runner holds the lease" in (applied := other.cli("apply")).output:
        assert time.monotonic() < deadline, applied.output  # (PostgreSQL ends the session)
        time.sleep(1.0)
    assert applied.exit_code == 4, applied.output  # partial: the registry is gone, unread
    assert other.rows()["hb:expenses-v2"]["version_state"] == "retired"


def test_serve_on_a_table_that_never_answers_says_so_and_exits(tmp_path: Path) -> None:
    """A table URL naming a server that accepts and never answers: serve does not wait for
    ever at start; it exits 1 within its connect bound (2 s here, each attempt), saying it
    cannot reach the document table."""
    silent = Silent()
    try:
        dep = Deployment(tmp_path, table_url=f"postgresql+psycopg://u@127.0.0.1:{silent.port}/db")
        configure(dep, FAR + 'dates = "0 4 1 1 *"\njob_deadline = "6s"\n')
        log = tmp_path / "serve.log"
        proc = start_serve(dep, log)
        try:
            code = proc.wait(timeout=2 * 2 + MARGIN * 2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"serve still waits on the table: {log.read_text()}") from None
        assert silent.accepted.is_set()
    finally:
        silent.close()
    assert code == 1, log.read_text()
    assert "cannot reach the document table" in log.read_text()
    assert "Traceback" not in log.read_text()


def test_a_job_past_its_deadline_in_a_silent_table_call_is_left_keeping_its_lease(
    tmp_path: Path, mid_job: MidJob, proc_cleanup: list[subprocess.Popen[bytes]]
) -> None:
    """Past its deadline, a job waiting on a table call that gets no answer is left
    ``stop_grace`` after it was asked to stop: /healthz says so (503 from the deadline on),
    the lane is free, and the left job keeps its lease, so no other runner writes beside it;
    once its session ends, the next run converges."""
    dep, proxy, trickling, url = mid_job.dep, mid_job.proxy, mid_job.trickling, mid_job.url
    direct = tmp_path / "direct.toml"
    port = configure(
        dep,
        FAR + 'dates = "0 4 1 1 *"\njob_deadline = "12s"\nstop_grace = "2s"\n'
        'source_deadline = "4s"\n',
    )
    direct.write_text(dep.config.read_text().replace(f":{proxy.port}/", f":{url.port}/"))
    log = tmp_path / "serve.log"
    proc = start_serve(dep, log)
    proc_cleanup.append(proc)
    assert trickling.requested.wait(120), log.read_text()  # the job holds the lease
    proxy.hang()  # past its read deadline (4 s) it goes on, into a silent table call
    deadline = time.monotonic() + 12 + 2 + MARGIN * 3
    while "keeps the lease" not in (
        problem := wait_health(port, 503, proc, log, 60).json()["problem"]
    ):
        assert time.monotonic() < deadline, problem
        time.sleep(0.5)
    assert "in a call to a store" in problem
    metrics(port)
    other = Deployment(tmp_path, configured=True)
    other.config = direct
    busy = other.cli("apply")
    assert busy.exit_code == 1, busy.output
    assert "another runner holds the lease" in busy.output  # the left job's, still
    stop(proc, log, 2 + MARGIN)
    trickling.close()
    proxy.close()  # the left job's session ends: PostgreSQL lets its lock go
    deadline = time.monotonic() + 60
    while "another runner holds the lease" in (applied := other.cli("apply")).output:
        assert time.monotonic() < deadline, applied.output
        time.sleep(1.0)
    assert applied.exit_code == 4, applied.output  # partial: the registry is gone
    assert other.rows()["hb:expenses-v2"]["version_state"] == "retired"
