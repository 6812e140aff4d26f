"""Holding a lease for a run: renewing it in the background while the run goes on, and the
lease each shard takes (``lease_name``). The lease itself, a row or PostgreSQL's advisory
lock, is the SQL adapter's (``reconciler/stores/sql/lease.py``), handed out by ``wiring``."""

from __future__ import annotations

import logging
import threading

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports.lease import Lease

log = logging.getLogger(__name__)


class HeldLease:
    """Hold a lease for the duration of a ``with`` block, renewing it in the background.

    ``acquired`` tells whether the block may run; ``lost`` turns True when a renewal fails.
    Renewals come every ``renew_every`` seconds of ``clock``.
    """

    def __init__(
        self, lease: Lease, *, renew_every: float = 30.0, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.lease = lease
        self.renew_every = renew_every
        self.clock = clock
        self.acquired = False
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> HeldLease:
        self.acquired = self.lease.acquire()
        if self.acquired:
            self._thread = threading.Thread(
                target=self._renew, name=f"lease-{self.lease.name}", daemon=True
            )
            self._thread.start()
        return self

    def _renew(self) -> None:
        while not self.clock.wait(self._stop, self.renew_every):
            if not self.lease.renew():
                self.lost = True
                log.error("lease %s could not be renewed", self.lease.name)
                return

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


def lease_name(shard: str) -> str:
    """The lease of one shard."""
    return f"reconcile:{shard}"


__all__ = ["HeldLease", "lease_name"]
