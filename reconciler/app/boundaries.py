"""Boundaries on the instant: ``serve`` runs the dates check at the next ``effective_from`` or
``effective_to`` the document table holds, so payload states flip within seconds of a
handover instead of at the next ``dates`` job.

One one-shot job, ``boundary``, is planned at the earliest boundary after now, and planned
again after every job that ran (a run, the watch's or a scheduled one, may have changed the
dates): a run of the dates check at that instant flips what starts or ends then.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.date import DateTrigger

from reconciler.app.stopping import unless_stopping
from reconciler.app.wiring import open_table
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.scheduling import JobSpec
from reconciler.settings import Settings
from reconciler.stores.sql.watermarks import next_boundary

log = logging.getLogger(__name__)

#: The one-shot job's id, and its spec: the dates check.
BOUNDARY = JobSpec("boundary", "", frozenset({"dates"}))


def table_boundary(settings: Settings) -> Callable[[datetime], datetime | None]:
    """The next boundary after an instant, read from the deployment's document table."""

    def read(after: datetime) -> datetime | None:
        table = open_table(settings)
        try:
            return next_boundary(table, after)
        finally:
            table.close()

    return read


class Boundaries:
    """Keeps the ``boundary`` job at the table's next boundary."""

    def __init__(
        self,
        scheduler: BaseScheduler,
        run: Callable[[JobSpec], Any],
        boundary: Callable[[datetime], datetime | None],
        *,
        clock: Clock = SYSTEM_CLOCK,
        stopping: threading.Event | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.run = run
        self.boundary = boundary
        self.clock = clock
        self.planned: datetime | None = None
        self._lock = threading.Lock()
        #: Set when serve is stopping: nothing more is planned (no table read holds it).
        self.stopping = stopping or threading.Event()

    def install(self) -> None:
        """Plan the first boundary, and plan again after every job."""
        self.scheduler.add_listener(self._ran, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
        self.plan()

    def _ran(self, _event: JobExecutionEvent) -> None:
        if not self.stopping.is_set():  # (the listener runs in the job's thread: SIGTERM
            self.plan()  # waits for it)

    def plan(self) -> datetime | None:
        """Put the ``boundary`` job at the next boundary after now (or remove it: none).
        Once serve is stopping, the table's read is not waited for (nothing is planned)."""
        with self._lock:
            try:
                read, at = unless_stopping(lambda: self.boundary(self.clock.now()), self.stopping)
            except Exception as exc:  # the table is unreachable: the dates job still runs
                log.warning("boundary: cannot read the next boundary: %s", exc)
                return self.planned
            if not read:
                return self.planned
            if at == self.planned:
                return at
            now = self.clock.now()
            if self.planned is not None and self.planned > now:
                # (one whose instant has passed is APScheduler's to remove: it has run)
                with contextlib.suppress(JobLookupError):
                    self.scheduler.remove_job(_job_id(self.planned))
            self.planned = at
            if at is None:
                log.info("boundary: no effective_from/effective_to ahead")
                return None
            self.scheduler.add_job(
                self.run,
                trigger=DateTrigger(run_date=at),
                args=[BOUNDARY],
                id=_job_id(at),
                name="reconcile:boundary",
                replace_existing=True,
                max_instances=1,
                misfire_grace_time=None,
                coalesce=True,
            )
            log.info("boundary: the dates check runs at %s (the next boundary)", at.isoformat())
            return at


def _job_id(at: datetime) -> str:
    """One job id per boundary (the one that has run is removed by APScheduler itself)."""
    return f"{BOUNDARY.job_id}@{at.isoformat()}"
