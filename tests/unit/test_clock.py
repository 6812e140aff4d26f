"""The injected clock: the real one by default, and the ManualClock tests use instead."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.clock import SYSTEM_CLOCK, ManualClock


def test_the_system_clock_tells_utc_and_waits_on_the_event() -> None:
    before = datetime.now(UTC)
    assert before <= SYSTEM_CLOCK.now() <= datetime.now(UTC)
    assert SYSTEM_CLOCK.now().tzinfo is not None
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
    event = threading.Event()
    event.set()
    assert SYSTEM_CLOCK.wait(event, 60)  # returns at once: the event is set
    assert not SYSTEM_CLOCK.wait(threading.Event(), 0)


def test_a_manual_clock_moves_only_when_told() -> None:
    start = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    clock = ManualClock(start, monotonic=100.0)
    assert (clock.now(), clock.monotonic()) == (start, 100.0)
    clock.sleep(2.5)  # at once
    assert (clock.now(), clock.monotonic()) == (start + timedelta(seconds=2.5), 102.5)
    assert clock.sleeps == [2.5]
    clock.advance_to(start + timedelta(minutes=1))
    assert clock.monotonic() == 160.0
    assert clock.sleeps == [2.5]  # advancing is not sleeping
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance_to(start)
    with pytest.raises(ValueError, match="non-negative"):
        clock.sleep(-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock(datetime(2026, 1, 1))


def test_a_manual_wait_ends_when_the_clock_passes_its_deadline_or_the_event_is_set() -> None:
    clock = ManualClock()
    stop = threading.Event()
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(clock.wait(stop, 30)))
    waiter.start()
    clock.await_waiters(1)
    clock.advance(29)
    waiter.join(0.05)
    assert waiter.is_alive()  # 29 of its 30 seconds have passed
    clock.advance(1)
    waiter.join(10)
    assert results == [False]
    waiter = threading.Thread(target=lambda: results.append(clock.wait(stop, 30)))
    waiter.start()
    stop.set()
    waiter.join(10)
    assert results == [False, True]
    with pytest.raises(TimeoutError):
        clock.await_waiters(1, timeout=0.01)  # nobody waits now
