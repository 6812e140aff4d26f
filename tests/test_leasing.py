"""One runner at a time: the lease row (SQLite) and the advisory lock (PostgreSQL)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

from reconciler.leasing import AdvisoryLease, HeldLease, RowLease, lease_name, make_lease
from reconciler.stores.sql import SqlDocumentTable


def test_row_lease_is_exclusive_until_released_or_expired(table: SqlDocumentTable) -> None:
    # The row lease is portable (ON CONFLICT on both dialects): it runs on each.
    first = RowLease(table.engine, "reconcile:0/1", ttl=timedelta(seconds=1))
    second = RowLease(table.engine, "reconcile:0/1", ttl=timedelta(seconds=1))
    assert first.acquire()
    assert first.acquire()  # re-entrant for its holder
    assert not second.acquire()
    assert first.renew()
    first.release()
    assert second.acquire()
    assert not first.renew()  # lost: someone else holds it
    time.sleep(1.1)  # second stops renewing: its lease expires
    assert first.acquire()
    assert not second.renew()


def test_make_lease_picks_by_dialect(table: SqlDocumentTable) -> None:
    lease = make_lease(table.engine, lease_name("0/1"))
    expected = AdvisoryLease if table.dialect == "postgresql" else RowLease
    assert isinstance(lease, expected)
    with HeldLease(lease, renew_every=0.05) as held:
        assert held.acquired
        other = make_lease(table.engine, lease_name("0/1"))
        assert not other.acquire()
        time.sleep(0.2)  # renewals happen meanwhile
        assert not held.lost
    again = make_lease(table.engine, lease_name("0/1"))
    assert again.acquire()
    again.release()


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
    from reconciler.leasing import HeldLease, lease_name, make_lease
    from reconciler.stores.sql import SqlDocumentTable
    table = SqlDocumentTable.from_url(sys.argv[1])
    with HeldLease(make_lease(table.engine, lease_name("0/1")), renew_every=0.2) as held:
        print("ran" if held.acquired else "skipped", flush=True)
        if held.acquired:
            time.sleep(2.0)
    """
)


def test_two_processes_contend_and_exactly_one_runs(table_url: str, tmp_path: Path) -> None:
    store = SqlDocumentTable.from_url(table_url)
    store.ensure_schema(create=True)
    store.close()
    script = tmp_path / "contender.py"
    script.write_text(CONTENDER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), table_url], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["ran", "skipped"]
