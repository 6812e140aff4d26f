"""The single-runner lease as the commands see it: a port, so that what runs under a lease
never learns where the lease is kept.

The adapters (a row with an expiry, a PostgreSQL advisory lock) live in
``reconciler.stores.sql.lease``, beside the document database they are kept in; the composition
root (``reconciler.app.wiring``) makes a ``LeaseFactory`` for the opened table and hands it to
the library functions of ``reconciler.app`` (``operations``, ``deployment``, ...), which take
leases by name.
"""

from __future__ import annotations

from typing import Protocol

from reconciler.clock import SYSTEM_CLOCK, Clock

__all__ = ["Lease", "LeaseFactory"]


class Lease(Protocol):
    """A single-runner lease."""

    name: str

    def acquire(self) -> bool:
        """Take the lease if free; True when this process holds it."""
        ...

    def renew(self) -> bool:
        """Extend a held lease; False when it was lost."""
        ...

    def release(self) -> None:
        """Give the lease up (idempotent)."""
        ...

    def is_free(self) -> bool:
        """Whether a runner could take the lease now, learnt without holding it (a dry run
        asks whether a run recorded as running under it is dead)."""
        ...


class LeaseFactory(Protocol):
    """The lease called ``name`` (``reconciler.app.holding.lease_name``) of one deployment;
    ``clock`` times an expiring lease."""

    def __call__(self, name: str, *, clock: Clock = SYSTEM_CLOCK) -> Lease:
        """A new, not yet acquired lease."""
        ...
