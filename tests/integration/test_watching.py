"""The watch in one process, its time on a ManualClock: real watchdog events on a real vault,
a real git repository polled, the real scoped run on real stores. A watcher that dies, an
event storm, a run that finds the lease held, a git branch that moves, and the marks."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from acceptance_kit import GIT_NOTE, Deployment, day, git_deployment
from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from prometheus_client import CollectorRegistry
from watch_kit import opened, vault_of
from watchdog.events import EventsLostEvent, FileModifiedEvent
from watchdog.observers.inotify import InotifyEmitter, InotifyObserver
from watchdog.observers.inotify_c import InotifyFD
from watchdog.observers.polling import PollingObserver

from reconciler.app import followers, observers
from reconciler.app.daemon import Runner, job_specs
from reconciler.app.followers import DEBOUNCE, MAX_DELAY, RETRY, GitWatch, VaultWatch, _Events
from reconciler.app.holding import lease_name
from reconciler.app.watching import REPEAT_LOG
from reconciler.metrics import build_registry
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.lease import make_lease
from reconciler.stores.sql.watermarks import SqlWatchMarks


@pytest.fixture
def deployment(tmp_path: Path) -> Deployment:
    dep = Deployment(tmp_path)
    for name in ("runbook", "guide"):
        dep.note(name, id=name, family=name, status="current", effective_from=day(-50))
    dep.init_ingest()
    return dep


def until_seen(watched: VaultWatch | GitWatch, paths: set[str], seconds: float = 10) -> None:
    """Wait (real time) until the watcher has seen events for ``paths``."""
    deadline = time.monotonic() + seconds
    while not paths <= set(watched.batch.paths) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert paths <= set(watched.batch.paths), watched.batch.paths


def runs(registry: CollectorRegistry, outcome: str, source: str = "hb") -> float:
    value = registry.get_sample_value(
        "reconciler_incremental_runs_total", {"source": source, "outcome": outcome}
    )
    return value or 0.0


def test_an_edit_is_debounced_then_reconciled(deployment: Deployment) -> None:
    watch, clock, registry = opened(deployment)
    try:
        watch.tick()  # the start's rescan: nothing changed
        deployment.edit_front("runbook", status="retired")
        until_seen(vault_of(watch), {"runbook.md"})
        watch.tick()
        assert runs(registry, "applied") == 0  # not quiet for DEBOUNCE yet
        clock.advance(DEBOUNCE)
        watch.tick()
        assert runs(registry, "applied") == 1
        assert deployment.served() == {"hb:guide"}
        count = registry.get_sample_value("reconciler_staleness_seconds_count", {"source": "hb"})
        assert count == 1
        mark = SqlWatchMarks(_table(deployment).engine).marks()["hb"]
        assert mark.changed_until is not None
        assert mark.changed_until.timestamp() == pytest.approx(
            (deployment.vault / "runbook.md").stat().st_mtime, abs=1e-3
        )
    finally:
        watch.stop()


def test_a_watcher_that_died_is_started_again_and_rescans(deployment: Deployment) -> None:
    watch, clock, registry = opened(deployment)
    try:
        watch.tick()
        vault = vault_of(watch)
        vault._observer.stop()  # the watcher dies (its thread ends)
        vault._observer.join()
        assert not vault.alive()
        time.sleep(0.02)
        deployment.edit_front("guide", status="retired")  # no watcher sees it
        watch.tick()  # dead: started again, and the vault rescanned
        assert vault.alive()
        assert "guide.md" in vault.batch.paths
        clock.advance(MAX_DELAY)
        watch.tick()
        assert deployment.served() == {"hb:runbook"}
        assert registry.get_sample_value("reconciler_watcher_up", {"source": "hb"}) == 1.0
    finally:
        watch.stop()


def _inotify_instances() -> int:
    """The inotify instances this process holds (128 a user on this machine, by default)."""
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # (one closed while listed)
            held += "inotify" in os.readlink(f"/proc/self/fd/{fd}")
    return held


def test_a_vault_gone_for_many_ticks_leaks_no_watcher(deployment: Deployment) -> None:
    """Regression: each tick that found the vault's folder gone tried a new watcher, and
    watchdog had made its inotify instance and reader thread before it found no folder: one
    leaked a tick, until the user had none left (every watch on the machine failing), and the
    threads kept serve from exiting. Now a watcher that cannot start is stopped whole."""
    watch, _clock, registry = opened(deployment)
    try:
        watch.tick()
        held, threads = _inotify_instances(), threading.active_count()
        moved = deployment.vault.rename(deployment.root / "vault-away")
        for _ in range(20):
            watch.tick()  # dead: started again, and refused (no folder)
        assert registry.get_sample_value("reconciler_watcher_up", {"source": "hb"}) == 0.0
        assert _inotify_instances() <= held
        assert threading.active_count() <= threads
        moved.rename(deployment.vault)
        watch.tick()  # back: watched again
        assert vault_of(watch).alive()
        assert _inotify_instances() == held
    finally:
        watch.stop()


def test_a_vault_gone_is_said_once_a_minute_not_each_tick(
    deployment: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    """Each tick tries the watcher again (ten a second): the log says so at the first failure,
    when the reason changes and once every ``REPEAT_LOG`` seconds, with the starts that failed
    between, and once when the vault is watched again."""
    watch, clock, _registry = opened(deployment)
    try:
        watch.tick()
        moved = deployment.vault.rename(deployment.root / "vault-away")
        caplog.clear()
        for _ in range(30):
            watch.tick()
        lines = [
            r.getMessage() for r in caplog.records if "cannot watch the vault" in r.getMessage()
        ]
        assert len(lines) == 1, lines
        assert "the vault's folder is gone" in lines[0]
        assert sum("the watcher died" in r.getMessage() for r in caplog.records) == 1
        clock.advance(REPEAT_LOG)
        watch.tick()
        lines = [
            r.getMessage() for r in caplog.records if "cannot watch the vault" in r.getMessage()
        ]
        assert len(lines) == 2, lines
        assert "(30 failed start(s) since the last line)" in lines[1]
        moved.rename(deployment.vault)
        watch.tick()
        assert vault_of(watch).alive()
        assert "watching the vault again (rescan); 31 start(s) had failed" in caplog.text
    finally:
        watch.stop()


def _watchdog_threads() -> int:
    """Watchdog's threads alive: observers, emitters, inotify readers and their dispatchers."""
    return sum(
        t.__class__.__module__.startswith("watchdog") or t.name.startswith("Inotify")
        for t in threading.enumerate()
    )


@pytest.fixture
def late_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Watchdog's inotify reader thread not scheduled before its watcher is stopped, as on a
    loaded machine: it then leaves its loop without closing its inotify instance."""
    run = InotifyFD.run

    def late(self: InotifyFD) -> None:
        time.sleep(0.05)
        run(self)

    monkeypatch.setattr(InotifyFD, "run", late)


@pytest.mark.usefixtures("late_reader")
def test_a_watcher_restarted_soon_after_its_start_leaks_no_inotify_instance(
    deployment: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: watchdog's stop gives the inotify instance back only if its reader thread
    has read once; a watcher that dies and is restarted at every tick (on a loaded machine)
    kept one each time, until serve held all 128 of the user's. Now each stopped watcher is
    checked, and what watchdog left open is closed."""
    watch, _clock, _registry = opened(deployment)
    try:
        watch.tick()
        vault = vault_of(watch)
        held, threads = _inotify_instances(), _watchdog_threads()
        for _ in range(20):
            vault._observer.stop()  # the watcher dies, soon after its start
            vault._observer.join()
            watch.tick()  # dead: started again
            assert vault.alive()
        assert _inotify_instances() == held
        assert _watchdog_threads() <= threads
        assert "died (its observer was stopped)" in caplog.text
        assert vault.left_behind == 0
    finally:
        watch.stop()
    assert _inotify_instances() == held - 1  # (serve's own, given back at its stop)


@pytest.mark.usefixtures("late_reader")
def test_a_watcher_that_cannot_start_leaks_no_inotify_instance(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a start that fails once watchdog has made its inotify instance (the root
    cannot be watched: the user's inotify watches all taken) is stopped at once, before the
    reader's first read: the instance stayed open, one a tick."""
    watch, _clock, registry = opened(deployment)
    try:
        watch.tick()
        vault = vault_of(watch)
        held, threads = _inotify_instances(), _watchdog_threads()

        def refused(self: InotifyFD, path: bytes, mask: int) -> None:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

        monkeypatch.setattr(InotifyFD, "_get_or_create_watch", refused)
        vault._observer.stop()
        vault._observer.join()
        for _ in range(20):
            watch.tick()  # dead: started again, and refused
        assert registry.get_sample_value("reconciler_watcher_up", {"source": "hb"}) == 0.0
        assert _inotify_instances() <= held
        assert _watchdog_threads() <= threads
        monkeypatch.undo()
        watch.tick()  # watched again
        assert vault.alive()
        assert _inotify_instances() == held
    finally:
        watch.stop()


def test_a_watcher_whose_stop_hangs_is_left_behind_in_bounded_time(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve's SIGTERM does not wait on a watchdog thread that hangs in its stop: the stop
    gives up after ``STOP_WAIT``, the inotify instance is still given back, and after
    ``MAX_LEFT_BEHIND`` such watchers the vault is polled (no inotify instance)."""
    monkeypatch.setattr(observers, "STOP_WAIT", 0.3)
    hang = threading.Event()
    on_stop = InotifyObserver.on_thread_stop

    def hung(self: InotifyObserver) -> None:
        hang.wait(10)
        on_stop(self)

    watch, _clock, _registry = opened(deployment)
    try:
        watch.tick()
        vault = vault_of(watch)
        held = _inotify_instances()
        monkeypatch.setattr(InotifyObserver, "on_thread_stop", hung)
        started = time.monotonic()
        vault.restart()  # its stop hangs: given up after STOP_WAIT
        assert time.monotonic() - started < 2
        assert vault.left_behind == 1
        assert _inotify_instances() <= held  # (the reader stopped and its instance closed)
        for left in range(2, followers.MAX_LEFT_BEHIND + 1):
            vault.restart()
            assert vault.left_behind == left
            assert _inotify_instances() <= held
        assert isinstance(vault._observer, PollingObserver)
        deployment.edit_front("guide", status="retired")
        until_seen(vault, {"guide.md"})  # (polled: still followed)
        started = time.monotonic()
        watch.stop()
        assert time.monotonic() - started < 2
        assert _inotify_instances() == held - 1
    finally:
        hang.set()
        watch.stop()


def test_a_watcher_whose_stop_raises_is_given_back_and_replaced(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watchdog stop that raises before it reaches the inotify reader (an emitter's stop
    failing) left the reader, its dispatcher and its instance running, and the restart
    undone: the vault not followed. Now the reader is stopped here and a new watcher starts."""
    watch, _clock, _registry = opened(deployment)
    try:
        watch.tick()
        vault = vault_of(watch)
        held, threads = _inotify_instances(), _watchdog_threads()
        on_stop = InotifyEmitter.on_thread_stop

        def failing(self: InotifyEmitter) -> None:
            on_stop(self)
            raise OSError(errno.EBADF, "Bad file descriptor")

        monkeypatch.setattr(InotifyEmitter, "on_thread_stop", failing)
        vault.restart()
        monkeypatch.undo()
        assert vault.alive()
        assert _inotify_instances() == held
        assert _watchdog_threads() <= threads
        deployment.edit_front("guide", status="retired")
        until_seen(vault, {"guide.md"})
    finally:
        watch.stop()


def test_a_lost_event_or_a_failing_handler_asks_for_a_rescan() -> None:
    """An inotify queue overflow (events lost) and an exception in the handler (which would
    end watchdog's observer thread) each ask for a rescan."""
    rescans: list[int] = []

    def seen(raw: str) -> None:
        raise RuntimeError("Symlink loop from " + raw)

    events = _Events(seen, lambda: rescans.append(1))
    events.dispatch(EventsLostEvent("/vault", is_directory=True))
    assert rescans == [1]
    events.dispatch(FileModifiedEvent("/vault/loop.md"))
    assert rescans == [1, 1]


def test_an_event_storm_is_one_run(deployment: Deployment) -> None:
    dep = deployment
    watch, clock, registry = opened(dep)
    try:
        watch.tick()
        for round_ in range(20):
            for n in range(25):
                dep.note(f"storm{n}", id=f"storm{n}", family="storm", status="current",
                         version=str(n), effective_from=day(-10), text=f"round {round_}")  # fmt: skip
            dep.edit_front("runbook", status="retired" if round_ % 2 == 0 else "current")
        dep.edit_front("runbook", status="retired")
        until_seen(vault_of(watch), {"runbook.md", *(f"storm{n}.md" for n in range(25))})
        clock.advance(MAX_DELAY)
        watch.tick()
        assert runs(registry, "applied") == 1  # 500-odd events, one scoped run
        assert "hb:runbook" not in dep.served()
    finally:
        watch.stop()


def test_a_busy_lease_keeps_the_changes_for_later(deployment: Deployment) -> None:
    watch, clock, registry = opened(deployment)
    table = _table(deployment)
    other = make_lease(table.engine, lease_name("0/1"))
    try:
        watch.tick()
        deployment.edit_front("runbook", status="retired")
        until_seen(vault_of(watch), {"runbook.md"})
        assert other.acquire()
        clock.advance(DEBOUNCE)
        watch.tick()
        assert runs(registry, "busy") == 1
        started = SqlWatchMarks(table.engine).marks()["hb"]  # the first watch's mark
        assert started.changed_until == clock.now() - timedelta(seconds=DEBOUNCE)
        # no mark past the change without its apply
        assert SqlWatchMarks(table.engine).marks()["hb"] == started
        other.release()
        clock.advance(DEBOUNCE)
        watch.tick()
        assert runs(registry, "applied") == 0  # waits RETRY first
        clock.advance(RETRY)
        watch.tick()
        assert runs(registry, "applied") == 1
        assert deployment.served() == {"hb:guide"}
    finally:
        watch.stop()
        table.close()


def test_a_git_branch_that_moves_is_reconciled_from_the_changed_paths(tmp_path: Path) -> None:
    repo, dep = git_deployment(tmp_path)
    front = GIT_NOTE
    assert dep.served() == {"gh:alpha", "gh:beta"}
    watch, clock, registry = opened(dep)
    try:
        watched = watch.sources[0]
        assert isinstance(watched, GitWatch)
        watch.tick()  # the first watch starts at the tip
        repo.write("docs/beta.md", front.format("beta", "retired", day(-30)))
        repo.write("README.txt", "not a document")
        commit = repo.commit("retire beta")
        clock.advance(2.5)
        watch.tick()
        assert runs(registry, "applied", "gh") == 1
        assert dep.served() == {"gh:alpha"}
        mark = SqlWatchMarks(_table(dep).engine).marks()["gh"]
        assert mark.mark == commit
    finally:
        watch.stop()
    # a new watch resumes at the mark: a commit made meanwhile is reconciled
    repo.write("docs/alpha.md", front.format("alpha", "retired", day(-30)))
    repo.commit("retire alpha")
    watch, clock, registry = opened(dep)
    try:
        watch.tick()
        assert runs(registry, "applied", "gh") == 1
        assert dep.served() == set()
    finally:
        watch.stop()


def _table(dep: Deployment) -> SqlDocumentTable:
    return SqlDocumentTable.from_url(dep.settings.table.resolved_url())


def test_what_the_full_job_repairs_behind_the_watch_is_its_own_finding(
    deployment: Deployment,
) -> None:
    """A change the watch never saw (its watcher down, and no tick since): the full job
    repairs it, and its run records a ``watch/missed_by_watch`` finding for it."""
    watch, clock, registry = opened(deployment)
    try:
        watch.tick()
        vault = vault_of(watch)
        vault.stop()  # events lost from here on
        deployment.edit_front("guide", status="retired")
        settings = deployment.settings
        table = _table(deployment)
        _registry, live = build_registry(table.metrics_snapshot)
        report = Runner(settings, live=live)(job_specs(settings)[0])
        assert report is not None
        assert report.run_id is not None
        watch.after_job(JobExecutionEvent(EVENT_JOB_EXECUTED, "full", "default", clock.now(),
                                          retval=report))  # fmt: skip
        noted = [f for f in table.findings_of(report.run_id) if f["check"] == "watch"]
        assert [(f["kind"], f["doc_id"]) for f in noted] == [("missed_by_watch", "hb:guide")]
        assert registry.get_sample_value("reconciler_watch_missed_total", {"source": "hb"}) == 1
        table.close()
    finally:
        watch.stop()


def test_stores_kept_open_are_let_go_before_serves_job(deployment: Deployment) -> None:
    """``[watch] keep_open``: the watch's runs reuse the open table and index (local mode locks
    its folder meanwhile); serve's job, in the lane, has the watch let go of them first, and
    runs; the watch opens them again at its next change."""
    from reconciler.app.daemon import Runner, job_specs  # noqa: PLC0415
    from reconciler.metrics import build_registry as registry_of  # noqa: PLC0415

    deployment.config.write_text(deployment.config.read_text() + '[watch]\nkeep_open = "10m"\n')
    watch, clock, registry = opened(deployment)
    table = _table(deployment)
    try:
        watch.tick()
        deployment.edit_front("runbook", status="retired")
        until_seen(vault_of(watch), {"runbook.md"})
        clock.advance(DEBOUNCE)
        watch.tick()
        assert runs(registry, "applied") == 1
        with pytest.raises(Exception, match="open in another process"):
            deployment.served()  # (kept open: local mode's folder is locked)
        _, live = registry_of(table.metrics_snapshot)
        runner = Runner(deployment.settings, live=live)
        runner.before_job = watch.release  # (what start_freshness wires in serve)
        report = runner(job_specs(deployment.settings)[0])
        assert report is not None
        assert report.error is None
        assert deployment.served() == {"hb:guide"}
        deployment.edit_front("guide", status="retired")
        until_seen(vault_of(watch), {"guide.md"})
        clock.advance(DEBOUNCE)
        watch.tick()
        assert runs(registry, "applied") == 2
    finally:
        watch.stop()
        table.close()
    assert deployment.served() == set()
