"""Holding a lease for a run: renewing it in the background while the run goes on, and the
lease each shard takes (``lease_name``). The lease itself, a row or PostgreSQL's advisory
lock, is the SQL adapter's (``reconciler/stores/sql/lease.py``), handed out by ``wiring``."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports.lease import PREFIX, Lease

log = logging.getLogger(__name__)


class HeldLease:
    """Hold a lease for the duration of a ``with`` block, renewing it in the background.

    ``acquired`` tells whether the block may run; ``lost`` turns True when the lease is lost.
    Renewals come every ``renew_every`` seconds of ``clock``. A renewal that fails (SQLite's
    ``database is locked`` while a long write of this run holds the file, a dropped
    connection) is logged in one line and tried again every ``RETRY_EVERY`` seconds: the lease
    is still ours until ``grace`` seconds after the last renewal that went through (the row
    lease's ``ttl``; else four renewals), and only then is it lost (one line, never a
    traceback). A renewal that finds another holder loses it at once.
    """

    #: Seconds between two tries of a renewal that failed (at most ``renew_every``).
    RETRY_EVERY = 1.0

    def __init__(
        self,
        lease: Lease,
        *,
        renew_every: float = 30.0,
        clock: Clock = SYSTEM_CLOCK,
        grace: float | None = None,
    ) -> None:
        self.lease = lease
        self.renew_every = renew_every
        self.clock = clock
        ttl = getattr(lease, "ttl", None)
        if grace is None:
            grace = ttl.total_seconds() if isinstance(ttl, timedelta) else 4 * renew_every
        self.grace = grace
        self.acquired = False
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._confirming = threading.Lock()
        #: ``clock.monotonic()`` when the last renewal that went through began.
        self._confirmed = 0.0
        #: Why the renewals fail since the last one that went through (None: they do not).
        self._failing: str | None = None

    def __enter__(self) -> HeldLease:
        started = self.clock.monotonic()
        self.acquired = self.lease.acquire()
        if self.acquired:
            self._confirmed = started
            self._thread = threading.Thread(
                target=self._renew, name=f"lease-{self.lease.name}", daemon=True
            )
            self._thread.start()
        return self

    @property
    def busy(self) -> str:
        """When the lease was not acquired: who holds what in its way, as one clause to add
        to the refusal (" (held: ...)"), or "" when the lease does not say."""
        said = getattr(self.lease, "busy", "")
        return f" (held: {said})" if said else ""

    def _renew(self) -> None:
        pause = self.renew_every
        while not self.clock.wait(self._stop, pause):
            if not self.confirm():
                return
            pause = self.renew_every if self._failing is None else self._retry_every

    @property
    def _retry_every(self) -> float:
        return min(self.renew_every, self.RETRY_EVERY)

    def confirm(self) -> bool:
        """Renew the lease now; whether it is still ours: renewed, or its renewal failed
        within its grace (tried again later). False once it is lost (``lost``)."""
        with self._confirming:
            if self.lost:
                return False
            started = self.clock.monotonic()
            try:
                held = self.lease.renew()
            except Exception as error:  # a renewal that failed is not a lease lost (yet)
                return self._failed(error, started)
            if not held:
                self._lose(
                    f"lease {self.lease.name} is no longer ours (it expired, or another runner "
                    "took it)"
                )
                return False
            if self._failing is not None:
                log.info("lease %s renewed again", self.lease.name)
            self._confirmed, self._failing = started, None
            return True

    def _failed(self, error: Exception, at: float) -> bool:
        reason = _one_line(error)
        late = at - self._confirmed
        if late >= self.grace:
            self._lose(
                f"lease {self.lease.name} lost: not renewed for {late:.0f} s, past its grace of "
                f"{self.grace:.0f} s (last error: {reason})"
            )
            return False
        if self._failing is None:
            log.warning(
                "lease %s: a renewal failed (%s); tried again every %.0f s within its grace "
                "of %.0f s",
                self.lease.name,
                reason,
                self._retry_every,
                self.grace - late,
            )
        self._failing = reason
        return True

    def _lose(self, why: str) -> None:
        self.lost = True
        log.error("%s; the run stops before its next write", why)

    def surrender(self) -> None:
        """Stop renewing and give the lease up now, for the next runner: the block's thread
        was left (``serve``, past its deadline, while it waited on a source); it finds the
        lease lost before it could write."""
        self.lost = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.acquired:
            self.acquired = False
            try:
                self.lease.release()
            except Exception as error:
                log.error("lease %s could not be given up (it expires): %s", self.lease.name, error)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.acquired:
            try:
                self.lease.release()
            except Exception as error:  # never hide why the run ended; the lease expires
                log.error(
                    "lease %s could not be released (it expires by itself): %s",
                    self.lease.name,
                    error,
                )


def _one_line(error: Exception) -> str:
    """The driver's own message of ``error`` (SQLAlchemy's adds the statement and its
    parameters), on one line."""
    text = str(getattr(error, "orig", None) or error) or type(error).__name__
    return " ".join(text.split())


def lease_name(shard: str) -> str:
    """The lease of one shard (``0/1``: the whole corpus's, which excludes every shard's)."""
    return f"{PREFIX}{shard}"


__all__ = ["HeldLease", "lease_name"]
