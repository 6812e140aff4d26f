"""What ``serve`` adds for freshness (``reconciler.app.watching``,
``reconciler.app.boundaries``), started in one call: the dates check planned at the table's
next boundary, and the watch of the sources, whose runs plan the next boundary again and
which reads every full job's report for what it missed."""

from __future__ import annotations

import functools
import threading
from typing import Any

from apscheduler.events import EVENT_JOB_EXECUTED
from apscheduler.schedulers.base import BaseScheduler
from prometheus_client import CollectorRegistry

from reconciler.app.boundaries import Boundaries, table_boundary
from reconciler.app.watching import Watch, start_watch
from reconciler.settings import Settings


def start_freshness(
    settings: Settings,
    scheduler: BaseScheduler,
    runner: Any,
    registry: CollectorRegistry,
    stopping: threading.Event,
    *,
    watch: bool = True,
) -> Watch | None:
    """Plan the boundaries and start the watch (unless ``watch`` is false); the watch, for
    ``stop`` at the end (None when nothing is watched)."""
    boundaries = Boundaries(scheduler, runner, table_boundary(settings), stopping=stopping)
    boundaries.install()
    watcher = start_watch(settings, registry, stopping=stopping) if watch else None
    if watcher is not None:
        watcher.after_run = boundaries.plan
        if hasattr(runner, "before_job"):  # (serve's job opens the stores the watch keeps)
            if settings.index.url is None:  # (a folder the open locks: no watch run beside)
                runner.before_job = functools.partial(watcher.release, hold=True)
                runner.after_job = watcher.unhold
            else:
                runner.before_job = watcher.release
        scheduler.add_listener(watcher.after_job, EVENT_JOB_EXECUTED)
    return watcher
