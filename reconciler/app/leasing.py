"""One runner at a time per shard: a lease in the document database (the adapters of the
``Lease`` port, ``reconciler.ports.lease``; ``Lease`` is importable from here as before).

PostgreSQL: ``pg_try_advisory_lock`` on a dedicated connection outside the pool (the lock lives
as long as that session; if the process dies the server releases it). SQLite: a row in
``leases`` with an expiry, taken with one atomic upsert and renewed by the holder; a holder
that dies stops renewing and the lease expires, and a holder on this machine whose process is
provably gone (its pid no longer exists) is taken over at once.

Time comes from the injected ``clock`` (``reconciler.clock``): the row lease's expiry is
written and compared as this process's clock says (never the database server's), and the
renewals are paced by it. The advisory lock has no expiry: only its renewal pace is timed.

The loser of a race skips its run and says so; it never waits.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports.lease import Lease
from reconciler.stores.schema import LeaseRow

log = logging.getLogger(__name__)


def _machine() -> str:
    """This kernel boot and pid namespace, shortly: two containers that share a host name
    (and a SQLite volume) never mistake each other's pids."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return hashlib.sha256(f"{boot}:{namespace}".encode()).hexdigest()[:12]


def _started(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot), or "" when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def holder_id() -> str:
    """Who holds a lease: host, pid, a random suffix (two runners in one pid differ), when the
    process started and which boot and pid namespace it runs in."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}:{_started(pid)}:{_machine()}"


def holder_is_gone(holder: str) -> bool:
    """Whether a holder is provably dead: it ran on this machine (same host name, boot and pid
    namespace), and its pid no longer exists or now belongs to a process started since.

    Anything else (another machine, a holder id without those marks) is presumed alive: the
    lease then expires on its own.
    """
    parts = holder.split(":")
    if len(parts) != 5 or not parts[1].isdigit() or not parts[3] or not parts[4]:
        return False
    host, pid_text, _suffix, started, machine = parts
    if host != socket.gethostname() or machine != _machine():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, not ours to signal: check it is still the same process
        pass
    now_started = _started(pid)
    return bool(now_started) and now_started != started


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for ``pg_try_advisory_lock``."""
    return int.from_bytes(
        hashlib.sha256(f"reconciler:{name}".encode()).digest()[:8], "big", signed=True
    )


class RowLease:
    """A lease row with an expiry (SQLite, or any dialect with ON CONFLICT)."""

    def __init__(
        self,
        engine: Engine,
        name: str,
        *,
        ttl: timedelta = timedelta(minutes=2),
        holder: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.engine = engine
        self.name = name
        self.ttl = ttl
        self.holder = holder or holder_id()
        self.clock = clock

    def acquire(self) -> bool:
        """Insert the lease, or take it over when expired (one atomic statement)."""
        now = self.clock.now()
        insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        stmt = insert(LeaseRow).values(
            name=self.name, holder=self.holder, acquired_at=now, expires_at=now + self.ttl
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["name"],
            set_={
                "holder": stmt.excluded.holder,
                "acquired_at": stmt.excluded.acquired_at,
                "expires_at": stmt.excluded.expires_at,
            },
            where=(LeaseRow.expires_at < now) | (LeaseRow.holder == self.holder),
        )
        with Session(self.engine) as session, session.begin():
            session.execute(stmt)
            holder = session.scalar(select(LeaseRow.holder).where(LeaseRow.name == self.name))
            if holder is not None and holder != self.holder and holder_is_gone(holder):
                log.warning("lease %s: its holder %s is gone; taking it over", self.name, holder)
                session.execute(
                    update(LeaseRow)
                    .where(LeaseRow.name == self.name, LeaseRow.holder == holder)
                    .values(holder=self.holder, acquired_at=now, expires_at=now + self.ttl)
                )
                holder = session.scalar(select(LeaseRow.holder).where(LeaseRow.name == self.name))
        held = holder == self.holder
        log.debug("lease %s %s (holder %s)", self.name, "taken" if held else "busy", holder)
        return held

    def renew(self) -> bool:
        """Push the expiry forward while we still hold it."""
        now = self.clock.now()
        with Session(self.engine) as session, session.begin():
            result = session.execute(
                update(LeaseRow)
                .where(LeaseRow.name == self.name, LeaseRow.holder == self.holder)
                .values(expires_at=now + self.ttl)
            )
            return bool(getattr(result, "rowcount", 0))

    def is_free(self) -> bool:
        """Whether the row is absent, expired, or held by a holder that is provably gone
        (``holder_is_gone``), read without taking it."""
        with Session(self.engine) as session:
            holder = session.scalar(
                select(LeaseRow.holder).where(
                    LeaseRow.name == self.name, LeaseRow.expires_at >= self.clock.now()
                )
            )
        return holder is None or holder_is_gone(holder)

    def release(self) -> None:
        """Delete our lease row."""
        with Session(self.engine) as session, session.begin():
            session.execute(
                delete(LeaseRow).where(LeaseRow.name == self.name, LeaseRow.holder == self.holder)
            )


class AdvisoryLease:
    """``pg_try_advisory_lock`` on a dedicated connection outside the pool."""

    def __init__(
        self, engine: Engine, name: str, *, connect_args: dict[str, Any] | None = None
    ) -> None:
        self.engine = engine
        self.name = name
        self.key = advisory_key(name)
        #: The table's bounds (``connect_timeout``, ``statement_timeout``, keepalives).
        self.connect_args = connect_args or {}
        self._conn: Any = None

    def acquire(self) -> bool:
        """Open a dedicated session and try the lock once."""
        if self._conn is not None:
            return True
        import psycopg  # noqa: PLC0415 (only needed on PostgreSQL)

        # Its own session, outside the pool: the lock lives exactly as long as it does.
        url = self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        conn = psycopg.connect(url, autocommit=True, **self.connect_args)
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
            row = cursor.fetchone()
        if row and row[0]:
            self._conn = conn
            return True
        conn.close()
        return False

    def renew(self) -> bool:
        """The lock lives as long as the session: check the session is alive."""
        if self._conn is None:
            return False
        try:
            with self._conn.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except Exception:  # the connection died: so did the lock
            log.warning("lease %s: its database session was lost", self.name)
            self._conn = None
            return False

    def is_free(self) -> bool:
        """The lock tried on a session of its own and let go at once."""
        probe = AdvisoryLease(self.engine, self.name, connect_args=self.connect_args)
        try:
            return probe.acquire()
        finally:
            probe.release()

    def release(self) -> None:
        """Unlock and close the dedicated session."""
        if self._conn is None:
            return
        try:
            with self._conn.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        finally:
            self._conn.close()
            self._conn = None


def make_lease(
    engine: Engine,
    name: str,
    *,
    ttl: timedelta = timedelta(minutes=2),
    clock: Clock = SYSTEM_CLOCK,
    connect_args: dict[str, Any] | None = None,
) -> Lease:
    """The right lease for the database: advisory lock on PostgreSQL (no expiry: the clock is
    not needed; its own session bounded by ``connect_args``), lease row elsewhere (expiring
    on ``clock``)."""
    if engine.dialect.name == "postgresql":
        return AdvisoryLease(engine, name, connect_args=connect_args)
    return RowLease(engine, name, ttl=ttl, clock=clock)


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
                self._lose(f"lease {self.lease.name} is no longer ours (another runner took it)")
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


def lease_is_free(engine: Engine, name: str, *, clock: Clock = SYSTEM_CLOCK) -> bool:
    """Whether a runner could take lease ``name`` now, learnt without holding it (a dry run's
    question: is the run recorded as running under it dead?). PostgreSQL: the advisory lock
    tried and let go at once; elsewhere the lease row read: absent, expired, or held by a
    holder that is provably gone (``holder_is_gone``). ``Lease.is_free`` of ``make_lease``."""
    return make_lease(engine, name, clock=clock).is_free()


def lease_name(shard: str) -> str:
    """The lease of one shard."""
    return f"reconcile:{shard}"


__all__ = [
    "AdvisoryLease",
    "HeldLease",
    "Lease",
    "RowLease",
    "lease_is_free",
    "lease_name",
    "make_lease",
]
