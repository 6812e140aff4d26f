"""``serve``'s watch, in a real process: a vault edit (a supersession, a retirement) reaches
what ``default_filter()`` serves without the full job; the watch's mark survives a restart,
and what changed while serve was down is reconciled at start; ``--no-watch`` and
``watch = false`` leave changes to the scheduled jobs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from acceptance_kit import Deployment, day
from exposition_kit import free_port, metrics_config

from reconciler.stores.sql import SqlDocumentTable

#: The scheduled jobs a year away: only the watch can reconcile in these tests.
FAR = '[schedule]\nfull = "0 2 1 1 *"\nttl = "0 3 1 1 *"\ndates = "0 4 1 1 *"\n'


@pytest.fixture
def deployment(tmp_path: Path) -> Deployment:
    dep = Deployment(tmp_path)
    dep.note(
        "leave-v1", id="leave-v1", family="leave", version="1", status="current",
        effective_from=day(-100),
    )  # fmt: skip
    dep.note(
        "leave-v2", id="leave-v2", family="leave", version="2", status="draft",
        effective_from=day(-1),
    )  # fmt: skip
    dep.note("runbook", id="runbook", family="runbook", status="current", effective_from=day(-50))
    dep.note("guide", id="guide", family="guide", status="current", effective_from=day(-50))
    dep.init_ingest()
    metrics_config(dep, f'[metrics]\nlisten = "127.0.0.1:{free_port()}"\n{FAR}')
    assert dep.served() == {"hb:leave-v1", "hb:runbook", "hb:guide"}
    return dep


_LOGGED = (
    "watch: following",
    "reconciled family",
    "changed path(s)",
    "watch: no source",
    "metrics on http",
)


@contextmanager
def serving(dep: Deployment, *extra: str) -> Iterator[Callable[[str], None]]:
    """A real ``reconciler serve``; yields ``wait_log(text)``, which waits (90 s at most) until
    serve's log holds ``text`` once more than when it was last asked."""
    log_path = dep.root / "serve.log"
    before = log_path.read_text() if log_path.exists() else ""
    seen = {text: before.count(text) for text in _LOGGED}
    command = [sys.executable, "-m", "reconciler.cli", "--config", str(dep.config)]
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            [*command, "--log-level", "info", "serve", *extra], stdout=out, stderr=subprocess.STDOUT
        )

    def wait_log(text: str) -> None:
        want = seen.get(text, 0) + 1
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            if log_path.read_text().count(text) >= want:
                seen[text] = want
                return
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} in serve's log: {log_path.read_text()}")

    wait_log.proc = proc  # type: ignore[attr-defined]  (a test that kills it)
    try:
        yield wait_log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired as late:
            # Never left behind: a stray serve keeps its watchers (inotify instances are 128 a
            # user here: one that leaked them made every later watch fail), and say why: its
            # threads' stacks first (serve's faulthandler, on SIGUSR1), then its log.
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
            proc.kill()
            proc.wait()
            tail = log_path.read_text()[-12000:]
            raise AssertionError(
                f"serve did not stop within 60 s of SIGTERM; its log:\n{tail}"
            ) from late


def served(dep: Deployment) -> set[str]:
    """What ``default_filter()`` serves (the index is locked while a run writes: read again)."""
    for _ in range(100):
        try:
            return dep.served()
        except Exception:
            time.sleep(0.1)
    return dep.served()


def watch_runs(dep: Deployment) -> list[tuple[str | None, str, str]]:
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    try:
        return [(r.job, r.mode, r.status) for r in table.last_runs(50) if r.actor == "watch"]
    finally:
        table.close()


def test_a_vault_edit_reaches_the_served_set_without_the_full_job(deployment: Deployment) -> None:
    dep = deployment
    with serving(dep) as wait_log:
        wait_log("watch: following")
        dep.edit_front("leave-v1", status="superseded", superseded_by="leave-v2")
        dep.edit_front("leave-v2", status="current")
        dep.edit_front("runbook", status="retired")
        wait_log("reconciled family")
        deadline = time.monotonic() + 60
        while served(dep) != {"hb:leave-v2", "hb:guide"} and time.monotonic() < deadline:
            wait_log("reconciled family")
        assert served(dep) == {"hb:leave-v2", "hb:guide"}
    assert watch_runs(dep)
    assert all(job == "watch:hb" and mode == "repair" for job, mode, _ in watch_runs(dep))
    log = (dep.root / "serve.log").read_text()
    assert "job full run" not in log  # the full job never ran: the watch did it
    assert "changed path(s)" in log


def test_a_restart_resumes_from_the_mark(deployment: Deployment) -> None:
    dep = deployment
    with serving(dep) as wait_log:
        wait_log("watch: following")
        dep.edit_front("runbook", status="retired")
        wait_log("reconciled family")
    assert "hb:runbook" not in served(dep)
    code, status = dep.json("status")
    assert code == 0
    (mark,) = status["watch"]
    assert mark["source"] == "hb"
    assert mark["reconciled_at"] is not None
    assert mark["changed_until"] is not None
    assert "watched source" in dep.cli("status").output
    # serve is down: a retirement, then serve again, which rescans from its mark
    time.sleep(0.05)  # (a later mtime than the mark's on coarse filesystems)
    dep.edit_front("guide", status="retired")
    with serving(dep) as wait_log:
        wait_log("watch: following")
        wait_log("reconciled family")
        assert served(dep) == {"hb:leave-v1"}
    log = (dep.root / "serve.log").read_text()
    assert "resuming from its mark" in log


@pytest.mark.parametrize("opt_out", ["--no-watch", "watch = false"])
def test_without_the_watch_a_change_waits_for_the_jobs(
    deployment: Deployment, opt_out: str
) -> None:
    dep = deployment
    extra: tuple[str, ...] = ()
    if opt_out == "--no-watch":
        extra = ("--no-watch",)
    else:
        dep.config.write_text(
            dep.config.read_text().replace('path = "vault"', 'path = "vault"\nwatch = false')
        )
    with serving(dep, *extra) as wait_log:
        wait_log("watch: no source" if not extra else "metrics on http")
        dep.edit_front("runbook", status="retired")
        time.sleep(2)  # (nothing is expected to happen: a few debounce windows)
        assert "hb:runbook" in served(dep)
    assert watch_runs(dep) == []


def test_serve_killed_during_a_watch_run_loses_nothing(deployment: Deployment) -> None:
    """SIGKILL while the watch's run is under way: the mark is not past it, so the next serve
    reconciles the change again (or finds it done); the served set ends right either way."""
    dep = deployment
    with serving(dep) as wait_log:
        wait_log("watch: following")
        dep.edit_front("leave-v1", status="superseded", superseded_by="leave-v2")
        dep.edit_front("leave-v2", status="current")
        wait_log("changed path(s)")  # the run has started
        wait_log.proc.kill()  # type: ignore[attr-defined]
        wait_log.proc.wait(timeout=30)  # type: ignore[attr-defined]
    with serving(dep) as wait_log:
        wait_log("watch: following")
        deadline = time.monotonic() + 60
        while served(dep) != {"hb:leave-v2", "hb:runbook", "hb:guide"}:
            assert time.monotonic() < deadline, (dep.root / "serve.log").read_text()
            time.sleep(0.2)
    assert ("watch:hb", "repair", "succeeded") in watch_runs(dep)
