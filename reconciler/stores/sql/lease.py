"""One runner at a time per shard: a lease in the document database (the adapters of the
``Lease`` port, ``reconciler.ports.lease``; ``Lease`` is importable from here as before).

PostgreSQL: ``pg_try_advisory_lock`` on a dedicated connection outside the pool (the lock lives
as long as that session; if the process dies the server releases it). SQLite: a row in
``leases`` with an expiry, taken with one atomic upsert and renewed by the holder; a holder
that dies stops renewing and the lease expires, and a holder on this machine whose process is
provably gone (its pid no longer exists) is taken over at once.

The whole corpus's lease excludes every shard's (``reconciler.ports.lease.excludes``): on
PostgreSQL each run's lease also takes one more advisory lock, exclusively for the whole
corpus, shared for a shard; a row lease, once committed, reads the rows it excludes and backs
off if one is live. Each class says why that holds.

Time comes from the injected ``clock`` (``reconciler.clock``): the row lease's expiry is
written and compared as this process's clock says (never the database server's), and the
renewals are paced by it. The advisory lock has no expiry: only its renewal pace is timed.
Holding a lease for a run, renewed in the background, is ``reconciler.app.holding``'s.

The loser of a race skips its run and says so; it never waits.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports.lease import PREFIX, WHOLE_CORPUS, Lease, excludes, is_run_lease
from reconciler.stores.sql.schema import LeaseRow

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


def _held_by(name: str, holder: str, expires: Any) -> str:
    """One row's holding, in words."""
    return f"lease {name} by {holder} until {expires:%Y-%m-%d %H:%M:%S} UTC"


class RowLease:
    """A lease row with an expiry (SQLite, or any dialect with ON CONFLICT).

    One name: one atomic upsert takes a row that is absent, expired or this holder's. The whole
    corpus's lease and a shard's: each holder, once its own row is committed, reads the rows of
    the kind it excludes (``excludes``) and, if one is live (unexpired, its holder not provably
    gone), deletes its own row and refuses. Both sides read after their own commit, so of two
    that race at least one sees the other (both may refuse: neither holds). A renewal extends
    only an unexpired row: a lease that expired is over for its holder, even if no one took
    its name, so a reader that found it expired was right to go on.
    """

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
        self.busy = ""

    def acquire(self) -> bool:
        """Take the row (``_take``), then refuse if a lease this one excludes is live."""
        self.busy = ""
        if not self._take():
            return False
        try:
            in_the_way = self._excluding()
        except BaseException:  # not known to be free: leave the row to no one
            self.release()
            raise
        if in_the_way:
            self.release()
            self.busy = in_the_way
            log.debug("lease %s busy: %s", self.name, in_the_way)
            return False
        return True

    def _take(self) -> bool:
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
        mine = LeaseRow.name == self.name
        with Session(self.engine) as session, session.begin():
            session.execute(stmt)
            holder = session.scalar(select(LeaseRow.holder).where(mine))
            if holder is not None and holder != self.holder and holder_is_gone(holder):
                log.warning("lease %s: its holder %s is gone; taking it over", self.name, holder)
                session.execute(
                    update(LeaseRow)
                    .where(mine, LeaseRow.holder == holder)
                    .values(holder=self.holder, acquired_at=now, expires_at=now + self.ttl)
                )
            row = session.execute(select(LeaseRow.holder, LeaseRow.expires_at).where(mine)).one()
        held = bool(row.holder == self.holder)
        if not held:
            self.busy = _held_by(self.name, row.holder, row.expires_at)
        log.debug("lease %s %s (holder %s)", self.name, "taken" if held else "busy", row.holder)
        return held

    def _excluding(self) -> str:
        """The live leases of the other kind that this one excludes, in words ("" if none)."""
        if not is_run_lease(self.name):
            return ""
        with Session(self.engine) as session:
            rows = session.execute(
                select(LeaseRow.name, LeaseRow.holder, LeaseRow.expires_at).where(
                    LeaseRow.name.startswith(PREFIX),
                    LeaseRow.name != self.name,
                    LeaseRow.expires_at >= self.clock.now(),
                )
            ).all()
        return "; ".join(
            _held_by(row.name, row.holder, row.expires_at)
            for row in sorted(rows)
            if excludes(self.name, row.name) and not holder_is_gone(row.holder)
        )

    def renew(self) -> bool:
        """Push the expiry forward while we still hold it, unexpired."""
        now = self.clock.now()
        with Session(self.engine) as session, session.begin():
            result = session.execute(
                update(LeaseRow)
                .where(
                    LeaseRow.name == self.name,
                    LeaseRow.holder == self.holder,
                    LeaseRow.expires_at >= now,
                )
                .values(expires_at=now + self.ttl)
            )
            return bool(getattr(result, "rowcount", 0))

    def is_free(self) -> bool:
        """Whether the row is absent, expired, or held by a holder that is provably gone
        (``holder_is_gone``), read without taking it. Of this name only: a dry run asks
        whether the run recorded under it is dead, not whether another kind is in the way."""
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


#: The advisory lock every run's lease also takes: exclusively for the whole corpus's,
#: shared for a shard's (``pg_try_advisory_lock_shared``).
CORPUS_KEY = advisory_key("corpus")


class AdvisoryLease:
    """``pg_try_advisory_lock`` on a dedicated connection outside the pool.

    The lock of its name, exclusive; a run's lease also takes ``CORPUS_KEY``: the whole
    corpus's exclusively, a shard's shared, so shards share it with each other and never with
    the whole corpus's. Both are tried (never waited for) on the one session, and both go
    with it when the process dies. The session is named (``application_name``) for the
    lease and the process, so a refusal can say who holds what (``pg_locks``).
    """

    def __init__(
        self, engine: Engine, name: str, *, connect_args: dict[str, Any] | None = None
    ) -> None:
        self.engine = engine
        self.name = name
        self.key = advisory_key(name)
        #: The table's bounds (``connect_timeout``, ``statement_timeout``, keepalives).
        self.connect_args = connect_args or {}
        self.busy = ""
        self._conn: Any = None

    def _connect(self) -> Any:
        import psycopg  # noqa: PLC0415 (only needed on PostgreSQL)

        # Its own session, outside the pool: the lock lives exactly as long as it does.
        url = self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        named = f"{APP_PREFIX}{self.name} {socket.gethostname()}:{os.getpid()}"[:63]
        return psycopg.connect(url, autocommit=True, **self.connect_args, application_name=named)

    def acquire(self) -> bool:
        """Open a dedicated session and try the locks once."""
        if self._conn is not None:
            return True
        self.busy = ""
        conn = self._connect()
        try:
            blocked = self._lock(conn)
            if blocked is None:
                self._conn = conn
                return True
            self.busy = _lock_holders(conn, *blocked)
        except BaseException:
            conn.close()
            raise
        conn.close()
        return False

    def _lock(self, conn: Any) -> tuple[int, str] | None:
        """Take this name's lock, then a run's share of ``CORPUS_KEY``; None when both are
        held, else the key in the way and the mode its holders hold it in."""
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
            if not cursor.fetchone()[0]:
                return self.key, "ExclusiveLock"
            if not is_run_lease(self.name):
                return None
            whole = self.name == WHOLE_CORPUS
            try_lock = "pg_try_advisory_lock" if whole else "pg_try_advisory_lock_shared"
            cursor.execute(f"SELECT {try_lock}(%s)", (CORPUS_KEY,))
            if cursor.fetchone()[0]:
                return None
            cursor.execute("SELECT pg_advisory_unlock_all()")
            return CORPUS_KEY, "ShareLock" if whole else "ExclusiveLock"

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
        """This name's lock tried on a session of its own and let go at once (this name
        only, as ``RowLease.is_free``)."""
        conn = self._connect()
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
                return bool(cursor.fetchone()[0])
        finally:
            conn.close()

    def release(self) -> None:
        """Unlock and close the dedicated session."""
        if self._conn is None:
            return
        try:
            with self._conn.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock_all()")
        finally:
            self._conn.close()
            self._conn = None


#: How a lease's session names itself (``application_name``), before the lease's name.
APP_PREFIX = "reconciler lease "


def _lock_holders(conn: Any, key: int, mode: str) -> str:
    """Who holds advisory lock ``key`` in ``mode``, in words: each session's lease and process
    as it named itself, else its backend pid and address."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT l.pid, a.application_name, a.client_addr FROM pg_locks l "
            "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid AND l.mode = %s "
            "AND l.pid <> pg_backend_pid() ORDER BY l.pid",
            (unsigned >> 32, unsigned & 0xFFFFFFFF, mode),
        )
        rows = cursor.fetchall()
    said = []
    for pid, app, addr in rows:
        if app and app.startswith(APP_PREFIX):
            lease, _, process = app.removeprefix(APP_PREFIX).partition(" ")
            said.append(f"lease {lease} by {process} (PostgreSQL backend {pid})")
        else:
            said.append(f"an advisory lock by PostgreSQL backend {pid} ({addr or 'local'})")
    return "; ".join(said)


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


def lease_is_free(engine: Engine, name: str, *, clock: Clock = SYSTEM_CLOCK) -> bool:
    """Whether a runner could take lease ``name`` now, learnt without holding it (a dry run's
    question: is the run recorded as running under it dead?). PostgreSQL: the advisory lock
    tried and let go at once; elsewhere the lease row read: absent, expired, or held by a
    holder that is provably gone (``holder_is_gone``). ``Lease.is_free`` of ``make_lease``."""
    return make_lease(engine, name, clock=clock).is_free()


__all__ = [
    "AdvisoryLease",
    "Lease",
    "RowLease",
    "lease_is_free",
    "make_lease",
]
