"""The single-runner lease as the commands see it: a port, so that what runs under a lease
never learns where the lease is kept.

The adapters (a row with an expiry, a PostgreSQL advisory lock) live in
``reconciler.stores.sql.lease``, beside the document database they are kept in; the composition
root (``reconciler.app.wiring``) makes a ``LeaseFactory`` for the opened table and hands it to
the library functions of ``reconciler.app`` (``operations``, ``deployment``, ...), which take
leases by name.

Leases exclude by name, and the whole corpus's lease (``WHOLE_CORPUS``: an unsharded run,
``ingest``, ``split``, ``rekey``) also excludes every shard's (``reconcile:i/N``, any N): a run
that writes some families never runs beside one that may write any (``excludes``). How each
adapter keeps that promise is said in ``reconciler.stores.sql.lease`` and docs/engine.md.
"""

from __future__ import annotations

from typing import Protocol

from reconciler.clock import SYSTEM_CLOCK, Clock

__all__ = ["PREFIX", "WHOLE_CORPUS", "Lease", "LeaseFactory", "excludes", "is_run_lease"]

#: Every run's lease is called this, then its shard (``reconciler.app.holding.lease_name``).
PREFIX = "reconcile:"
#: The whole corpus's lease (shard ``0/1``): it excludes every other run's lease.
WHOLE_CORPUS = f"{PREFIX}0/1"


def is_run_lease(name: str) -> bool:
    """Whether ``name`` is a run's lease (the whole corpus's or a shard's), which the whole
    corpus's excludes; another name (a test's) excludes only itself."""
    return name.startswith(PREFIX)


def excludes(name: str, other: str) -> bool:
    """Whether leases ``name`` and ``other`` are never held at once: one name, or the whole
    corpus's and a shard's (of any count). Shards, of one count or of several, do not
    exclude each other (shards of one count share no family)."""
    if name == other:
        return True
    pair = {name, other}
    return WHOLE_CORPUS in pair and all(is_run_lease(n) for n in pair)


class Lease(Protocol):
    """A single-runner lease."""

    name: str
    #: After an ``acquire`` that failed: who holds what in its way, in words ("" when unknown).
    busy: str

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
