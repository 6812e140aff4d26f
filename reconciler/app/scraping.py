"""What ``serve``'s scrapes read of the document table, bounded: a store that does not answer
never keeps ``/metrics`` from answering, and ``/healthz`` says that it does not answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: Seconds a scrape waits for the run log before it answers without it (a Prometheus scrape
#: times out after 10 s by default).
SCRAPE_READ_LIMIT = 4.0


class BoundedRead:
    """A read of the document table (the run log's metrics) that a scrape waits for at most
    ``limit`` seconds: past it the scrape answers without it (``reconciler_run_log_readable``
    0) and /healthz says the table is not answering, while the read goes on in its own
    thread; no second read starts before it has returned."""

    def __init__(self, read: Callable[[], dict[str, Any]], *, limit: float) -> None:
        self._read = read
        self.limit = limit
        self._lock = threading.Lock()
        self._pending: _Pending | None = None
        #: The last read that returned (its error, if it failed).
        self._last: _Pending | None = None

    def _ended(self, read: _Pending) -> None:
        self._last = read

    def __call__(self) -> dict[str, Any]:
        with self._lock:
            pending = self._pending
            if pending is None or pending.done.is_set():
                pending = self._pending = _Pending(self._read, self._ended)
        if not pending.done.wait(self.limit):
            raise TimeoutError(
                f"the document table has not answered a read for {pending.age():.0f}s"
            )
        with self._lock:
            if self._pending is pending:
                self._pending = None
        if pending.error is not None:
            raise pending.error
        assert pending.value is not None
        return pending.value

    def stalled(self) -> str | None:
        """Why /healthz is 503: a read unanswered past the limit, or the last read failed;
        None when the last read succeeded."""
        pending = self._pending
        if pending is not None and not pending.done.is_set() and pending.age() >= self.limit:
            return (
                f"the document table has not answered a read of the run log for "
                f"{pending.age():.0f}s: check the database (its server or the network)"
            )
        return self._failed

    @property
    def _failed(self) -> str | None:
        last = self._last
        if last is None or last.error is None:
            return None
        return f"the document table could not be read: {last.error}"


class _Pending:
    """One read in its own thread."""

    def __init__(
        self, read: Callable[[], dict[str, Any]], ended: Callable[[_Pending], None]
    ) -> None:
        self.started = time.monotonic()
        self.done = threading.Event()
        self.value: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._ended = ended
        threading.Thread(target=self._run, args=[read], name="run-log-read", daemon=True).start()

    def _run(self, read: Callable[[], dict[str, Any]]) -> None:
        try:
            self.value = read()
        except BaseException as exc:  # handed to the scrape that waits for it
            self.error = exc
        finally:
            self._ended(self)
            self.done.set()

    def age(self) -> float:
        return time.monotonic() - self.started
