"""Scheduler wiring on a ManualClock (no real waiting): cron as cron users read it, coalesced misfires,
no overlapping runs; and the job runner's lease, failure and metrics behaviour."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.executors import base as executor_base
from apscheduler.executors.debug import DebugExecutor
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers import base as scheduler_base
from apscheduler.schedulers.base import BaseScheduler

from reconciler.clock import ManualClock
from reconciler.scheduling import (
    GracefulStop,
    JobSpec,
    add_jobs,
    blocking_scheduler,
    cron_day_of_week,
    cron_trigger,
)


def next_fire_times(expression: str, start: datetime, count: int) -> list[datetime]:
    """The next ``count`` instants a cron expression fires after ``start``."""
    trigger = cron_trigger(expression)
    times: list[datetime] = []
    previous = None
    now = start
    for _ in range(count):
        fire = trigger.get_next_fire_time(previous, now)
        if fire is None:
            break
        times.append(fire)
        previous = fire
        now = fire
    return times


def reading(clock: ManualClock) -> type[datetime]:
    """A ``datetime`` whose ``now`` is ``clock``'s: APScheduler 3 reads the time from its
    modules' ``datetime`` (the scheduler's next wake-up, the executor's misfire check)."""

    class _Datetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return clock.now().astimezone(tz) if tz else clock.now()

    return _Datetime


class ManualScheduler(BaseScheduler):
    """A scheduler with no thread: the test calls ``_process_jobs`` when the clock moves."""

    def wakeup(self) -> None:
        pass

    def shutdown(self, wait: bool = True) -> None:
        super().shutdown(wait)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    manual = ManualClock(datetime(2026, 11, 28, 23, 0, tzinfo=UTC))  # a Saturday
    monkeypatch.setattr(scheduler_base, "datetime", reading(manual))
    monkeypatch.setattr(executor_base, "datetime", reading(manual))
    return manual


SPECS = [
    JobSpec("full", "0 2 * * *", None),
    JobSpec("ttl", "*/15 * * * *", frozenset({"ttl"})),
    JobSpec("weekly", "30 3 * * 0", frozenset({"dates"})),  # Sunday in cron
]


def start(executor: Any, run: Any) -> tuple[ManualScheduler, list[JobEvent]]:
    scheduler = ManualScheduler(timezone=UTC, executors={"default": executor})
    add_jobs(scheduler, SPECS, run)
    events: list[JobEvent] = []
    scheduler.add_listener(events.append, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
    scheduler.start()
    return scheduler, events


@pytest.mark.parametrize(
    ("field", "names"),
    [
        ("0", "sun"),
        ("7", "sun"),
        ("1-5", "mon,tue,wed,thu,fri"),
        ("*/2", "sun,tue,thu,sat"),
        ("5-7", "sun,fri,sat"),
        ("mon-fri", "mon,tue,wed,thu,fri"),
        ("0,3", "sun,wed"),
        ("*", "*"),
    ],
)
def test_cron_day_of_week_reads_as_cron(field: str, names: str) -> None:
    assert cron_day_of_week(field) == names


@pytest.mark.parametrize("bad", ["8", "fri-mon", "funday", "*/0"])
def test_bad_day_of_week_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"day|step"):
        cron_day_of_week(bad)


def test_zero_is_sunday_not_monday() -> None:
    fires = next_fire_times("0 2 * * 0", datetime(2026, 11, 24, tzinfo=UTC), 3)
    assert [f.strftime("%a %H:%M") for f in fires] == ["Sun 02:00"] * 3
    assert fires[0] == datetime(2026, 11, 29, 2, 0, tzinfo=UTC)


def test_jobs_fire_when_the_cron_says(clock: ManualClock) -> None:
    runs: list[tuple[str, datetime]] = []
    scheduler, _events = start(
        DebugExecutor(), lambda spec: runs.append((spec.job_id, clock.now()))
    )
    try:
        jobs = {job.id: job for job in scheduler.get_jobs()}
        assert set(jobs) == {"full", "ttl", "weekly"}
        assert all(job.coalesce and job.max_instances == 1 for job in jobs.values())
        clock.advance_to(datetime(2026, 11, 29, 1, 59, 59, tzinfo=UTC))
        scheduler._process_jobs()
        assert [r for r in runs if r[0] == "full"] == []
        clock.advance_to(datetime(2026, 11, 29, 2, 0, 0, tzinfo=UTC))
        scheduler._process_jobs()
        assert ("full", clock.now()) in runs
        clock.advance_to(datetime(2026, 11, 29, 3, 30, tzinfo=UTC))  # Sunday 03:30
        scheduler._process_jobs()
        assert ("weekly", clock.now()) in runs
        assert sum(1 for job_id, _ in runs if job_id == "full") == 1
    finally:
        scheduler.shutdown()


def test_missed_runs_coalesce_into_one(clock: ManualClock) -> None:
    runs: list[tuple[str, datetime]] = []
    scheduler, events = start(DebugExecutor(), lambda spec: runs.append((spec.job_id, clock.now())))
    try:
        clock.advance_to(datetime(2026, 11, 29, 2, 0, tzinfo=UTC))
        scheduler._process_jobs()
        # The machine sleeps three days; it wakes 3 minutes after the fourth 02:00.
        clock.advance_to(datetime(2026, 12, 2, 2, 3, tzinfo=UTC))
        scheduler._process_jobs()
        full = [at for job_id, at in runs if job_id == "full"]
        assert full == [datetime(2026, 11, 29, 2, 0, tzinfo=UTC), clock.now()]  # once, not three
        # Woken 10 minutes late: past the misfire grace, the run is missed, not run late.
        clock.advance_to(datetime(2026, 12, 3, 2, 10, tzinfo=UTC))
        scheduler._process_jobs()
        assert len([1 for job_id, _ in runs if job_id == "full"]) == 2
        assert any(e.code == EVENT_JOB_MISSED and e.job_id == "full" for e in events)
    finally:
        scheduler.shutdown()


def test_overlapping_runs_are_refused(clock: ManualClock) -> None:
    release = threading.Event()
    started = threading.Event()
    runs: list[str] = []

    def slow(spec: JobSpec) -> None:
        runs.append(spec.job_id)
        if spec.job_id == "ttl":
            started.set()
            release.wait(10)

    scheduler, events = start(ThreadPoolExecutor(4), slow)
    try:
        clock.advance_to(datetime(2026, 11, 29, 0, 0, tzinfo=UTC))
        scheduler._process_jobs()
        assert started.wait(5)
        clock.advance(15 * 60)  # the next ttl run comes while the first still runs
        scheduler._process_jobs()
        assert runs.count("ttl") == 1
        assert any(e.code == EVENT_JOB_MAX_INSTANCES and e.job_id == "ttl" for e in events)
    finally:
        release.set()
        scheduler.shutdown()


class _RacyScheduler:
    """What APScheduler 3 does when a signal stops it while its loop removes a one-off job it
    has just started: ``shutdown`` (on another thread) marks it stopped at once, the loop's
    ``remove_job`` then fails, and the shutdown is still waiting for the job."""

    state = scheduler_base.STATE_RUNNING

    def __init__(self, stop: Callable[[], None] | None) -> None:
        self.stop = stop
        self.done: list[str] = []

    def start(self) -> None:
        if self.stop is not None:
            self.stop()  # the signal arrives while the loop runs
        raise JobLookupError("full-at-start")

    def shutdown(self, wait: bool = True) -> None:
        time.sleep(0.2)  # the running job finishing
        self.done.append(f"shut down (wait={wait})")


def test_a_signal_stop_returns_once_the_running_job_is_done() -> None:
    scheduler = _RacyScheduler(None)
    stop = GracefulStop(scheduler)  # type: ignore[arg-type]
    scheduler.stop = lambda: stop._handle(signal.SIGTERM, None)

    stop.run()  # no JobLookupError out of it: the stop was asked for

    assert scheduler.done == ["shut down (wait=True)"]  # and the job had finished


def test_a_job_lookup_error_without_a_stop_is_not_hidden() -> None:
    stop = GracefulStop(_RacyScheduler(None))  # type: ignore[arg-type]

    with pytest.raises(JobLookupError):
        stop.run()


def test_a_signal_before_the_scheduler_has_started_stops_it_once_started() -> None:
    """SIGTERM while ``serve`` still sets up (handlers installed, scheduler not started): the
    scheduler stops as soon as it has started, instead of running on deaf to later signals."""
    scheduler = blocking_scheduler()
    stop = GracefulStop(scheduler)
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        stop.install()
        stop._handle(signal.SIGTERM, None)  # (as the signal would, before run())
        runner = threading.Thread(target=stop.run, daemon=True)
        runner.start()
        runner.join(timeout=10)
        assert not runner.is_alive()
        assert scheduler.state == scheduler_base.STATE_STOPPED
    finally:
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGINT, handlers[1])
