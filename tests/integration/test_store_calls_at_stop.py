"""What ``serve`` waits for once it got SIGTERM: no call to a store that may not answer.
``unless_stopping`` waits for a call until it returns or serve begins to stop; the boundary
planner (a listener in the job's thread, which serve's shutdown waits for) reads the table
only while serve is not stopping. Real threads, no waiting on a clock: the calls block on
events the test sets."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from reconciler.app.boundaries import Boundaries
from reconciler.app.stopping import unless_stopping


def test_a_call_that_returns_is_waited_for() -> None:
    assert unless_stopping(lambda: 42, threading.Event()) == (True, 42)
    assert unless_stopping(lambda: None, threading.Event()) == (True, None)


def test_no_call_is_made_once_serve_is_stopping() -> None:
    made: list[int] = []
    stopping = threading.Event()
    stopping.set()
    assert unless_stopping(lambda: made.append(1), stopping) == (False, None)
    assert not made


def test_a_call_that_raises_raises() -> None:
    def fails() -> None:
        raise ConnectionError("the table does not answer")

    with pytest.raises(ConnectionError, match="does not answer"):
        unless_stopping(fails, threading.Event())


def test_a_call_that_does_not_return_is_left_once_serve_stops() -> None:
    stopping, entered, release = threading.Event(), threading.Event(), threading.Event()

    def hangs() -> str:
        entered.set()
        release.wait()
        return "late"

    outcome: list[tuple[bool, Any]] = []
    waiter = threading.Thread(target=lambda: outcome.append(unless_stopping(hangs, stopping)))
    waiter.start()
    assert entered.wait(30)
    assert not outcome  # (still waited for: serve is not stopping)
    stopping.set()
    waiter.join(30)
    assert outcome == [(False, None)]
    assert not release.is_set()  # (left in its call, which ends by itself)
    release.set()


def test_the_boundary_is_not_read_once_serve_is_stopping() -> None:
    reads: list[datetime] = []

    def boundary(after: datetime) -> datetime | None:
        reads.append(after)
        return None

    stopping = threading.Event()
    scheduler = BackgroundScheduler(timezone=UTC)
    boundaries = Boundaries(scheduler, lambda _spec: None, boundary, stopping=stopping)
    boundaries._ran(None)  # type: ignore[arg-type]  # (a job has run)
    assert len(reads) == 1
    stopping.set()
    boundaries._ran(None)  # type: ignore[arg-type]
    assert boundaries.plan() is None
    assert len(reads) == 1


def test_a_stopped_serve_ends_its_process_with_its_handlers_run_and_output_flushed() -> None:
    """``end_process`` (what ``main`` calls once serve has stopped) skips the interpreter's
    teardown, not ``atexit``'s handlers, the logs or the buffered output; the status is
    kept."""
    script = (
        "import atexit, logging, sys\n"
        "from reconciler.cli.serve import end_process\n"
        "logging.basicConfig(stream=sys.stderr)\n"
        "atexit.register(lambda: print('handler ran'))\n"
        "print('buffered', end='')\n"
        "logging.getLogger('t').warning('logged')\n"
        "end_process(3)\n"
        "print('not reached')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "bufferedhandler ran\n"
    assert "logged" in done.stderr
