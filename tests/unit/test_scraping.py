"""``serve``'s scrapes wait a bounded time for the run log (``app.scraping.BoundedRead``): a
read that does not return in time is answered without (and /healthz says why), no second
read piles up behind it, and once it returns the next scrape reads afresh. Real threads, an
event for the store that does not answer."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reconciler.app.scraping import BoundedRead


def test_a_read_that_does_not_return_in_time_is_answered_without() -> None:
    answer = threading.Event()
    started: list[int] = []

    def read() -> dict[str, Any]:
        started.append(1)
        answer.wait()
        return {"jobs": len(started)}

    bounded = BoundedRead(read, limit=0.05)
    with pytest.raises(TimeoutError, match="has not answered a read"):
        bounded()
    assert bounded.stalled() is not None
    assert "has not answered a read of the run log" in (bounded.stalled() or "")
    with pytest.raises(TimeoutError):
        bounded()
    assert len(started) == 1  # the second scrape waited for the same read
    answer.set()
    assert bounded() in ({"jobs": 1}, {"jobs": 2})  # that read's answer, or a fresh one's
    assert bounded() == {"jobs": len(started)}  # a fresh read each scrape from now on
    assert len(started) >= 2
    assert bounded.stalled() is None


def test_a_failed_read_is_said_until_one_succeeds() -> None:
    failing = [True]

    def read() -> dict[str, Any]:
        if failing[0]:
            raise OSError("cannot reach the document table")
        return {}

    bounded = BoundedRead(read, limit=5)
    with pytest.raises(OSError, match="cannot reach"):
        bounded()
    assert "could not be read: cannot reach the document table" in (bounded.stalled() or "")
    failing[0] = False
    assert bounded() == {}
    assert bounded.stalled() is None
