"""One runner at a time: the lease row (SQLite) and the advisory lock (PostgreSQL).

Expiry and renewal run on a ``ManualClock``: no test here waits for a lease to expire. Only
the two-process contention keeps real time (two interpreters racing for one lease).
"""

from __future__ import annotations

import logging
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from reconciler.app.holding import HeldLease, lease_name
from reconciler.clock import ManualClock
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.connection import TableBounds
from reconciler.stores.sql.lease import AdvisoryLease, Lease, RowLease, lease_is_free, make_lease
from reconciler.stores.sql.schema import LeaseRow


def test_row_lease_is_exclusive_until_released_or_expired(table: SqlDocumentTable) -> None:
    # The row lease is portable (ON CONFLICT on both dialects): it runs on each.
    clock = ManualClock()
    first = RowLease(table.engine, "reconcile:0/1", ttl=timedelta(seconds=1), clock=clock)
    second = RowLease(table.engine, "reconcile:0/1", ttl=timedelta(seconds=1), clock=clock)
    assert first.acquire()
    assert first.acquire()  # re-entrant for its holder
    assert not second.acquire()
    assert first.renew()
    first.release()
    assert second.acquire()
    assert not first.renew()  # lost: someone else holds it
    clock.advance(0.9)  # second stops renewing, but its lease has not expired yet
    assert not first.acquire()
    clock.advance(0.2)  # now it has
    assert first.acquire()
    assert not second.renew()


def expiry(table: SqlDocumentTable, name: str) -> object:
    with Session(table.engine) as session:
        return session.scalar(select(LeaseRow.expires_at).where(LeaseRow.name == name))


def test_row_lease_expiry_is_the_clocks_now_plus_the_ttl(table: SqlDocumentTable) -> None:
    clock = ManualClock()
    lease = RowLease(table.engine, "reconcile:0/1", ttl=timedelta(minutes=2), clock=clock)
    assert lease.acquire()
    assert expiry(table, lease.name) == clock.now() + timedelta(minutes=2)
    clock.advance(90)
    assert lease.renew()
    assert expiry(table, lease.name) == clock.now() + timedelta(minutes=2)
    lease.release()


class CountedLease:
    """A lease whose renewals are counted, each one announced on ``renewed``."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.name = lease.name
        self.renewals = 0
        self.renewed = threading.Semaphore(0)

    def acquire(self) -> bool:
        return self.lease.acquire()

    def renew(self) -> bool:
        held = self.lease.renew()
        self.renewals += 1
        self.renewed.release()
        return held

    def release(self) -> None:
        self.lease.release()


def test_make_lease_picks_by_dialect(table: SqlDocumentTable) -> None:
    clock = ManualClock()
    lease = make_lease(table.engine, lease_name("0/1"), clock=clock)
    expected = AdvisoryLease if table.dialect == "postgresql" else RowLease
    assert isinstance(lease, expected)
    counted = CountedLease(lease)
    with HeldLease(counted, renew_every=30, clock=clock) as held:
        assert held.acquired
        other = make_lease(table.engine, lease_name("0/1"), clock=clock)
        assert not other.acquire()
        for renewals in (1, 2, 3):  # renewals happen as the clock passes renew_every
            clock.await_waiters(1)  # the renewal thread waits for its next turn
            clock.advance(29)
            assert counted.renewals == renewals - 1
            clock.advance(1)
            assert counted.renewed.acquire(timeout=10)
            assert counted.renewals == renewals
            assert not other.acquire()
        assert not held.lost
    again = make_lease(table.engine, lease_name("0/1"))
    assert again.acquire()
    again.release()


def test_whether_a_lease_is_free_is_learnt_without_taking_it(table: SqlDocumentTable) -> None:
    """``lease_is_free`` (a dry run's question) is true of a free, an expired or a dead
    holder's lease, false while a live runner holds it, and leaves the lease as it was."""
    clock = ManualClock()
    name = lease_name("0/1")
    assert lease_is_free(table.engine, name, clock=clock)
    holder = make_lease(table.engine, name, clock=clock)
    assert holder.acquire()
    assert not lease_is_free(table.engine, name, clock=clock)
    holder.release()
    assert lease_is_free(table.engine, name, clock=clock)
    runner = make_lease(table.engine, name, clock=clock)
    assert runner.acquire()  # the probe took nothing: the next runner gets it
    runner.release()
    if table.dialect == "postgresql":
        return  # an advisory lock dies with its session: there is no stale row to read
    dead = RowLease(table.engine, name, clock=clock, holder=f"{socket.gethostname()}:1:x:1:y")
    assert dead.acquire()
    assert not lease_is_free(table.engine, name, clock=clock)  # not provably gone: held
    clock.advance(121)
    assert lease_is_free(table.engine, name, clock=clock)  # expired


class TriedLease:
    """A lease whose renewals, those that raise included, are each announced on ``tried``."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.name = lease.name
        self.ttl = timedelta(minutes=2)
        self.tried = threading.Semaphore(0)

    def acquire(self) -> bool:
        return self.lease.acquire()

    def renew(self) -> bool:
        try:
            return self.lease.renew()
        finally:
            self.tried.release()

    def release(self) -> None:
        self.lease.release()


def test_a_renewal_locked_out_by_a_long_write_retries_and_loses_the_lease_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """SQLite: while a long write holds the file, a renewal fails with ``database is
    locked``. It is tried again within the lease's grace (its ttl since the last renewal that
    went through), and the lease is lost only past it: one line each, never a traceback."""
    path = tmp_path / "lease.db"
    table = SqlDocumentTable.from_url(f"sqlite:///{path}", bounds=TableBounds(lock=0.05))
    table.ensure_schema(create=True)
    clock = ManualClock()
    lease = TriedLease(
        RowLease(table.engine, "reconcile:0/1", ttl=timedelta(minutes=2), clock=clock)
    )
    writer = sqlite3.connect(path, isolation_level=None)

    def turn(seconds: float) -> None:  # the renewal thread's next try, after ``seconds``
        clock.await_waiters(1)
        clock.advance(seconds)
        assert lease.tried.acquire(timeout=10)

    try:
        with (
            caplog.at_level(logging.INFO, logger="reconciler.app.holding"),
            HeldLease(lease, renew_every=30, clock=clock) as held,
        ):
            assert held.acquired
            assert held.grace == 120
            writer.execute("BEGIN IMMEDIATE")  # a long write of the run holds the file
            turn(30)
            turn(1)  # tried again a second later, failing again: said once
            assert not held.lost
            writer.execute("COMMIT")
            turn(1)  # the write is over: renewed
            assert not held.lost
            assert expiry(table, lease.name) == clock.now() + lease.ttl
            writer.execute("BEGIN IMMEDIATE")
            turn(30)
            assert not held.lost
            turn(91)  # 121 s since the last renewal that went through
            assert held._thread is not None
            held._thread.join(timeout=10)
            assert held.lost
            assert not held.confirm()
            writer.execute("COMMIT")
    finally:
        writer.close()
        table.close()
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert not [r for r in caplog.records if r.exc_info], said
    assert [level for level, _ in said] == ["WARNING", "INFO", "WARNING", "ERROR"], said
    assert "database is locked" in said[0][1]
    assert "UPDATE" not in said[0][1]
    assert said[-1][1].startswith("lease reconcile:0/1 lost: not renewed for 121 s"), said
    assert "Traceback" not in capfd.readouterr().err


def test_shards_have_separate_leases(table: SqlDocumentTable) -> None:
    a = make_lease(table.engine, lease_name("0/2"))
    b = make_lease(table.engine, lease_name("1/2"))
    try:
        assert a.acquire()
        assert b.acquire()
    finally:
        a.release()
        b.release()


def test_advisory_lease_dies_with_its_session(pg_url: str) -> None:
    table = SqlDocumentTable.from_url(pg_url)
    try:
        table.ensure_schema(create=True)
        lease = AdvisoryLease(table.engine, "reconcile:0/1")
        assert lease.acquire()
        assert lease.renew()
        lease._conn.close()  # the session is gone (a crash, a network cut)
        assert not lease.renew()
        other = AdvisoryLease(table.engine, "reconcile:0/1")
        assert other.acquire()  # the server released the lock with the session
        other.release()
    finally:
        table.close()


CONTENDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from reconciler.app.holding import HeldLease, lease_name
    from reconciler.stores.sql.lease import make_lease
    from reconciler.stores.sql import SqlDocumentTable
    table = SqlDocumentTable.from_url(sys.argv[1])
    done = Path(sys.argv[2])
    with HeldLease(make_lease(table.engine, lease_name("0/1")), renew_every=0.2) as held:
        print("ran" if held.acquired else "skipped", flush=True)
        # A winner holds the lease until the test has heard from both contenders.
        deadline = time.monotonic() + 60
        while held.acquired and not done.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    """
)


def test_two_processes_contend_and_exactly_one_runs(table_url: str, tmp_path: Path) -> None:
    store = SqlDocumentTable.from_url(table_url)
    store.ensure_schema(create=True)
    store.close()
    script = tmp_path / "contender.py"
    script.write_text(CONTENDER)
    done = tmp_path / "both-tried"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), table_url, str(done)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    firsts = [p.stdout.readline() for p in procs if p.stdout is not None]  # both have tried
    done.touch()
    outputs = sorted(
        (first + p.communicate(timeout=60)[0]).strip()
        for first, p in zip(firsts, procs, strict=True)
    )
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["ran", "skipped"]
