"""APScheduler wiring for ``reconciler serve``: cron jobs, one runner at a time, clean stops.

Cron expressions in the config are read as cron users expect. APScheduler 3 numbers weekdays
from Monday = 0, whereas cron (and our config) numbers them from Sunday = 0 (7 is Sunday too);
``cron_trigger`` translates the day-of-week field into names, so ``0 2 * * 0`` runs on Sunday.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC
from types import FrameType
from typing import Any

from apscheduler.events import EVENT_SCHEDULER_STARTED, SchedulerEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.base import STATE_STOPPED, BaseScheduler
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger

log = logging.getLogger(__name__)

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: Seconds a job may start late (after a pause or a busy machine) and still run once.
MISFIRE_GRACE = 300


def _day(token: str) -> int:
    token = token.strip().lower()
    if token.isdigit():
        value = int(token)
        if not 0 <= value <= 7:
            raise ValueError(f"day of week {token!r} is not in 0-7")
        return value
    for number, name in enumerate(_DAY_NAMES):
        if token[:3] == name:
            return number
    raise ValueError(f"day of week {token!r} is not a number 0-7 or a day name")


def cron_day_of_week(field: str) -> str:
    """Translate a cron day-of-week field (Sunday = 0 or 7) into APScheduler day names."""
    field = field.strip()
    if field in ("*", "?"):
        return "*"
    days: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"step in {part!r} must be positive")
        if base in ("*", "?"):
            low, high = 0, 6
        elif "-" in base:
            low_text, high_text = base.split("-", 1)
            low, high = _day(low_text), _day(high_text)
            if high < low:
                raise ValueError(f"day range {base!r} runs backwards")
        else:
            low = _day(base)
            high = 6 if step_text else low
        days.update(day % 7 for day in range(low, high + 1, step))
    return ",".join(_DAY_NAMES[day] for day in sorted(days))


def cron_trigger(expression: str) -> CronTrigger:
    """A UTC CronTrigger from a 5-field crontab expression, weekdays read as cron reads them."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"{expression!r} is not a 5-field cron expression")
    minute, hour, day, month, day_of_week = fields
    return CronTrigger(
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=cron_day_of_week(day_of_week),
        timezone=UTC,
    )


@dataclass(frozen=True)
class JobSpec:
    """One scheduled job: a fixed id, its cron expression and the checks it runs."""

    job_id: str
    cron: str
    checks: frozenset[str] | None


def add_jobs(
    scheduler: BaseScheduler,
    specs: Iterable[JobSpec],
    run: Callable[[JobSpec], Any],
) -> None:
    """Add one job per spec: fixed ids, coalesced misfires, never two instances at once."""
    for spec in specs:
        scheduler.add_job(
            run,
            trigger=cron_trigger(spec.cron),
            args=[spec],
            id=spec.job_id,
            name=f"reconcile:{spec.job_id}",
            coalesce=True,
            max_instances=1,
            misfire_grace_time=MISFIRE_GRACE,
            replace_existing=True,
        )


class GracefulStop:
    """SIGTERM/SIGINT stop the scheduler; the running job ends and is recorded (``on_stop``
    tells whoever runs the jobs, so that it bounds how long that takes)."""

    def __init__(
        self, scheduler: BaseScheduler, *, on_stop: Callable[[], None] | None = None
    ) -> None:
        self.scheduler = scheduler
        self.stopping = threading.Event()
        self.on_stop = on_stop
        self._shutdown: threading.Thread | None = None

    def install(self) -> None:
        """Register the handlers (main thread only)."""
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        # A signal before the scheduler has started stops it as soon as it has.
        self.scheduler.add_listener(self._started, EVENT_SCHEDULER_STARTED)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        log.info("%s received: stopping after the running job", signal.Signals(signum).name)
        if self.on_stop is not None:
            self.on_stop()
        if self.scheduler.state != STATE_STOPPED:
            self._stop()
        # (else not started yet: ``_started`` stops it once it has; both run on the main
        # thread, so exactly one of them does)

    def _started(self, _event: SchedulerEvent) -> None:
        if self.stopping.is_set() and self._shutdown is None:
            self._stop()

    def _stop(self) -> None:
        # Not from inside the handler's frame: shutdown(wait=True) joins the job threads.
        self._shutdown = threading.Thread(
            target=self.scheduler.shutdown, kwargs={"wait": True}, name="shutdown"
        )
        self._shutdown.start()

    def run(self) -> None:
        """``scheduler.start()`` (it blocks), and once stopped by a signal, wait for the
        running job to finish and be recorded before returning (the caller closes the stores).

        APScheduler 3's ``shutdown`` marks the scheduler stopped before it takes its locks,
        so its main loop can stop before the running job has finished, or fail to remove a
        one-off job it has just started (``JobLookupError``, seen with ``serve --run-now``
        under load); either way the shutdown thread is still waiting for that job."""
        try:
            self.scheduler.start()
        except JobLookupError:
            if not self.stopping.is_set():
                raise
            log.debug("scheduler stopped while removing a finished one-off job")
        finally:
            if self.stopping.is_set() and self._shutdown is not None:
                self._shutdown.join()


#: Seconds the main thread waits at most before it looks again (``_WakingScheduler``).
WAKE = 1.0


class _WakingScheduler(BlockingScheduler):  # type: ignore[misc]
    """APScheduler's blocking scheduler, its main thread awake at least every ``WAKE``
    seconds. It waits until the next job (days away for a yearly one, or for ever), and
    Python runs a signal's handler on the main thread only: a SIGTERM the kernel gives to
    another thread (serve runs one a watched source, and watchdog's) would wait that long,
    and serve would not stop."""

    def _process_jobs(self) -> float:
        seconds = super()._process_jobs()
        return WAKE if seconds is None else min(seconds, WAKE)


def blocking_scheduler() -> BlockingScheduler:
    """The daemon's scheduler (UTC; one worker per job id is enough: max_instances=1)."""
    return _WakingScheduler(timezone=UTC, job_defaults={"coalesce": True, "max_instances": 1})
