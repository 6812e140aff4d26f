"""Time, injected: what "now" is, how long something took, and waiting.

Code that expires, retries or waits (the lease, the HTTP client's ``Retry-After`` and backoff)
takes a ``clock`` keyword whose default is the real one, ``SYSTEM_CLOCK``. Tests pass a
``ManualClock`` instead: it moves only when told (``advance``) or when something sleeps on it,
at once, so an expiry or a two-second ``Retry-After`` costs no real time.

This module imports nothing of the engine: connectors use it too.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Wall time, elapsed time and waiting, from one source."""

    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or ``seconds`` have passed; True when it was set."""
        ...


class SystemClock:
    """The real clock: ``datetime.now(UTC)``, ``time.monotonic``, ``time.sleep``."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


#: The default of every ``clock`` keyword.
SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """A clock for tests: it stands still until ``advance`` (or a ``sleep`` on it) moves it.

    ``sleep`` returns at once, having moved the clock and recorded the wait in ``sleeps``.
    ``wait`` blocks (really) until the event is set or another thread has advanced the clock
    past its deadline; ``await_waiters`` lets that other thread know the wait has begun.
    Safe to share between threads.
    """

    #: How often, in real seconds, a ``wait`` looks whether its event was set.
    POLL = 0.005

    def __init__(
        self, start: datetime = datetime(2026, 1, 1, tzinfo=UTC), *, monotonic: float = 0.0
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("a ManualClock starts at a timezone-aware instant")
        self._now = start.astimezone(UTC)
        self._monotonic = monotonic
        self._moved = threading.Condition()
        self._waiting = 0
        #: Every ``sleep`` asked of this clock, in seconds, in order.
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        with self._moved:
            return self._now

    def monotonic(self) -> float:
        with self._moved:
            return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move the clock forward (both wall and monotonic time) and wake waiters."""
        if seconds < 0:
            raise ValueError(f"a clock never goes back ({seconds} s)")
        with self._moved:
            self._now += timedelta(seconds=seconds)
            self._monotonic += seconds
            self._moved.notify_all()

    def advance_to(self, instant: datetime) -> None:
        """Move the clock forward to ``instant`` (never back)."""
        self.advance((instant - self.now()).total_seconds())

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        with self._moved:
            self.sleeps.append(seconds)
        self.advance(seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        with self._moved:
            deadline = self._monotonic + seconds
            self._waiting += 1
            self._moved.notify_all()
            try:
                while not event.is_set() and self._monotonic < deadline:
                    self._moved.wait(self.POLL)  # setting the event does not notify: look again
            finally:
                self._waiting -= 1
            return event.is_set()

    def await_waiters(self, count: int = 1, *, timeout: float = 10.0) -> None:
        """Block (in real time, at most ``timeout`` s) until ``count`` threads wait on this
        clock, so that an ``advance`` after it reaches them (a wait that starts after an
        advance counts from the new time)."""
        with self._moved:
            if not self._moved.wait_for(lambda: self._waiting >= count, timeout):
                raise TimeoutError(f"{self._waiting} of {count} waiter(s) after {timeout}s")

    def __repr__(self) -> str:
        return f"ManualClock({self.now().isoformat()})"


__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]
