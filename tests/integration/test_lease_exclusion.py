"""The whole corpus's lease and a shard's exclude each other (``ports.lease.excludes``), on
each lease: the row (SQLite, PostgreSQL) and the advisory locks (PostgreSQL).

A whole-corpus holder refuses every shard and a shard holder the whole corpus, naming who
holds what; shards of one count all run; a holder that died (its process killed, its row
expired) is taken over; threads and processes racing never end with both kinds held; and a
property over random sequences of acquire, renew, release and expiry by several holders keeps
the promise: never the whole corpus's holder beside another, never two holders of one name,
and no refusal without a holder in the way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from sqlalchemy import delete, text
from sqlalchemy.orm import Session

from reconciler.app.holding import lease_name
from reconciler.clock import SYSTEM_CLOCK, Clock, ManualClock
from reconciler.ports.lease import Lease, excludes
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.lease import AdvisoryLease, RowLease
from reconciler.stores.sql.schema import LeaseRow

TTL = timedelta(seconds=120)
WHOLE = lease_name("0/1")


@dataclass
class Leases:
    """One kind of lease over one database: ``make`` a lease by name; ``kill`` one as its
    holder's death would (a row left unrenewed, a session cut)."""

    kind: str
    url: str
    table: SqlDocumentTable
    clock: ManualClock = field(default_factory=ManualClock)

    def make(self, name: str, *, clock: Clock | None = None) -> Lease:
        if self.kind == "advisory":
            return AdvisoryLease(self.table.engine, name)
        return RowLease(self.table.engine, name, ttl=TTL, clock=clock or self.clock)

    def kill(self, lease: Lease) -> None:
        """The holder dies: its session is cut (advisory), or it stops renewing until its
        row expires (row: the clock passes the ttl)."""
        if isinstance(lease, AdvisoryLease):
            self.cut(lease)
        else:
            self.clock.advance(TTL.total_seconds() + 1)

    def cut(self, lease: AdvisoryLease) -> None:
        """Close the lease's session as a crash would, and wait for the server to have ended
        it (it lets the locks go as the backend exits, a moment after the socket closes)."""
        if lease._conn is None:
            return
        pid = lease._conn.info.backend_pid
        lease._conn.close()
        lease._conn = None
        deadline = time.monotonic() + 30
        alive = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p")
        with self.table.engine.connect() as conn:
            while conn.scalar(alive, {"p": pid}):
                conn.rollback()  # (a transaction reads the activity of its first look)
                assert time.monotonic() < deadline
                time.sleep(0.005)

    def reset(self) -> None:
        with Session(self.table.engine) as session, session.begin():
            session.execute(delete(LeaseRow))


@pytest.fixture(params=["sqlite-row", "postgresql-row", "postgresql-advisory"])
def leases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Leases]:
    dialect, kind = request.param.split("-")
    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'leases.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    table = SqlDocumentTable.from_url(url)
    table.ensure_schema(create=True)
    yield Leases(kind, url, table)
    table.close()


def test_a_whole_corpus_holder_refuses_every_shard_and_says_who_holds_it(
    leases: Leases,
) -> None:
    whole = leases.make(WHOLE)
    assert whole.acquire()
    for shard in ("0/2", "1/2", "2/4", "0/7"):
        refused = leases.make(lease_name(shard))
        assert not refused.acquire(), shard
        assert f"lease {WHOLE} by " in refused.busy, refused.busy
        assert f":{os.getpid()}" in refused.busy, refused.busy
    whole.release()
    shard = leases.make(lease_name("2/4"))
    assert shard.acquire()  # the refusals left nothing behind
    shard.release()


def test_a_shard_holder_refuses_the_whole_corpus_and_says_which_shard(leases: Leases) -> None:
    shard = leases.make(lease_name("2/4"))
    assert shard.acquire()
    whole = leases.make(WHOLE)
    assert not whole.acquire()
    assert f"lease {lease_name('2/4')} by " in whole.busy, whole.busy
    other = leases.make(lease_name("3/4"))
    assert other.acquire()  # a refused whole corpus left nothing in the shards' way
    shard.release()
    assert not whole.acquire()
    assert lease_name("3/4") in whole.busy
    assert lease_name("2/4") not in whole.busy
    other.release()
    assert whole.acquire()
    assert whole.renew()
    whole.release()


def test_shards_of_one_count_and_of_several_all_run(leases: Leases) -> None:
    held = [leases.make(lease_name(s)) for s in ("0/4", "1/4", "2/4", "3/4", "1/2")]
    try:
        assert all(lease.acquire() for lease in held)
        assert all(lease.renew() for lease in held)
        twin = leases.make(lease_name("1/4"))
        assert not twin.acquire()  # one name, one holder
        assert f"lease {lease_name('1/4')} by " in twin.busy, twin.busy
    finally:
        for lease in held:
            lease.release()


@pytest.mark.parametrize("first", ["whole", "shard"])
def test_a_holder_that_stopped_renewing_or_lost_its_session_is_taken_over(
    leases: Leases, first: str
) -> None:
    names = {"whole": WHOLE, "shard": lease_name("1/3")}
    dead = leases.make(names[first])
    assert dead.acquire()
    taker = leases.make(names["shard" if first == "whole" else "whole"])
    assert not taker.acquire()
    leases.kill(dead)
    assert taker.acquire()
    assert not dead.renew()  # over for it: it stops before its next write
    taker.release()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from reconciler.stores.sql import SqlDocumentTable
    from reconciler.stores.sql.lease import AdvisoryLease, RowLease
    url, kind, name = sys.argv[1:4]
    table = SqlDocumentTable.from_url(url)
    lease = (AdvisoryLease if kind == "advisory" else RowLease)(table.engine, name)
    print("held" if lease.acquire() else "busy", flush=True)
    time.sleep(120)
    """
)


def start_holder(leases: Leases, name: str, script: Path) -> subprocess.Popen[str]:
    script.write_text(HOLDER)
    return subprocess.Popen(
        [sys.executable, str(script), leases.url, leases.kind, name],
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("first", ["whole", "shard"])
def test_a_killed_holder_of_either_kind_is_taken_over_at_once(
    leases: Leases, first: str, tmp_path: Path
) -> None:
    """A process holding one kind is SIGKILLed: the other kind is taken at once (its pid is
    gone on this machine; PostgreSQL ends its session and the locks with it), no expiry
    waited for (the real clock: a row's ttl is two minutes)."""
    names = {"whole": WHOLE, "shard": lease_name("0/2")}
    proc = start_holder(leases, names[first], tmp_path / "holder.py")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        taker = leases.make(names["shard" if first == "whole" else "whole"], clock=SYSTEM_CLOCK)
        assert not taker.acquire()
        assert f":{proc.pid}" in taker.busy, taker.busy
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    deadline = time.monotonic() + 30  # (the server notices the closed socket)
    while not taker.acquire():
        assert time.monotonic() < deadline, taker.busy
        time.sleep(0.05)
    taker.release()


def test_threads_racing_never_hold_both_kinds(leases: Leases) -> None:
    """Rounds of a whole-corpus holder and three shards' starting at one instant: never both
    kinds held at the end of a round; and some rounds someone ran."""
    names = [WHOLE, lease_name("0/3"), lease_name("1/3"), lease_name("2/3")]
    ran = 0
    for _ in range(15):
        racers = [leases.make(name, clock=SYSTEM_CLOCK) for name in names]
        start = threading.Barrier(len(racers))
        won: dict[str, bool] = {}

        def race(lease: Lease, start: threading.Barrier = start, won: dict = won) -> None:
            start.wait()
            won[lease.name] = lease.acquire()

        threads = [threading.Thread(target=race, args=(lease,)) for lease in racers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        holding = sorted(name for name, held in won.items() if held)
        assert not (WHOLE in holding and len(holding) > 1), holding
        ran += bool(holding)
        for lease in racers:
            lease.release()
    assert ran > 0


CONTENDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from reconciler.app.holding import HeldLease
    from reconciler.stores.sql import SqlDocumentTable
    from reconciler.stores.sql.lease import AdvisoryLease, RowLease
    url, kind, name, go, done = sys.argv[1:6]
    table = SqlDocumentTable.from_url(url)
    lease = (AdvisoryLease if kind == "advisory" else RowLease)(table.engine, name)
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.002)
    with HeldLease(lease, renew_every=0.2) as held:
        print("ran" if held.acquired else "skipped", flush=True)
        deadline = time.monotonic() + 60
        while held.acquired and not Path(done).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    """
)


def test_processes_racing_never_hold_both_kinds(leases: Leases, tmp_path: Path) -> None:
    """A whole-corpus process and two shards' processes, released at one instant, each
    holding what it took until all have tried: never the whole corpus's beside a shard's."""
    script = tmp_path / "contender.py"
    script.write_text(CONTENDER)
    names = [WHOLE, lease_name("0/2"), lease_name("1/2")]
    for round_ in range(2):
        go, done = tmp_path / f"go-{round_}", tmp_path / f"done-{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), leases.url, leases.kind, n, str(go), str(done)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in names
        ]
        assert all(p.stdout is not None and p.stdout.readline() == "ready\n" for p in procs)
        go.touch()
        said = [p.stdout.readline().strip() for p in procs if p.stdout is not None]
        done.touch()
        for p in procs:
            p.communicate(timeout=60)
        assert [p.returncode for p in procs] == [0, 0, 0]
        ran = [name for name, word in zip(names, said, strict=True) if word == "ran"]
        assert not (WHOLE in ran and len(ran) > 1), said


# -- the property --------------------------------------------------------------------------

NAMES = ["0/1", "0/1", "0/2", "1/2", "0/4", "2/4", "3/4", "0/3"]
STEP = st.tuples(
    st.sampled_from(["acquire", "renew", "release", "expire"]),
    st.integers(0, 4),
    st.integers(0, 150),
)


@dataclass
class Model:
    """What each holder may believe: it holds from an acquire or renewal that went through
    until its ttl has passed since (row), or until its session is cut (advisory); never past
    a release or a renewal that failed."""

    leases: Leases
    holders: list[Lease]
    until: dict[int, object] = field(default_factory=dict)

    def holding(self, h: int) -> bool:
        if h not in self.until:
            return False
        if self.leases.kind == "advisory":
            return True
        return self.until[h] >= self.leases.clock.now()  # type: ignore[operator]

    def in_the_way(self, h: int) -> list[int]:
        name = self.holders[h].name
        return [
            g
            for g in range(len(self.holders))
            if g != h and self.holding(g) and excludes(name, self.holders[g].name)
        ]

    def step(self, op: str, h: int, seconds: int) -> None:
        lease, clock = self.holders[h], self.leases.clock
        if op == "acquire":
            blocked = self.in_the_way(h)
            took = lease.acquire()
            assert took == (not blocked), (took, blocked, lease.busy)
            if took:
                self.until[h] = clock.now() + TTL
        elif op == "renew":
            renewed = lease.renew()
            assert renewed == self.holding(h)
            if renewed:
                self.until[h] = clock.now() + TTL
            else:
                self.until.pop(h, None)
        elif op == "release":
            lease.release()
            self.until.pop(h, None)
        elif self.leases.kind == "advisory":  # expire: the holder's session is cut
            if isinstance(lease, AdvisoryLease):
                self.leases.cut(lease)
            self.until.pop(h, None)
        else:  # expire: time passes; those who do not renew in time lose their rows
            clock.advance(seconds)

    def check(self) -> None:
        held = [h for h in range(len(self.holders)) if self.holding(h)]
        for h in held:
            assert not self.in_the_way(h), [self.holders[g].name for g in held]


def run_interleaving(leases: Leases, names: list[str], steps: list[tuple[str, int, int]]) -> None:
    leases.reset()
    holders = [leases.make(lease_name(name)) for name in names]
    model = Model(leases, holders)
    try:
        for op, h, seconds in steps:
            model.step(op, h % len(holders), seconds)
            model.check()
    finally:
        for lease in holders:
            lease.release()


@settings(
    max_examples=examples(40),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    names=st.lists(st.sampled_from(NAMES), min_size=2, max_size=5),
    steps=st.lists(STEP, max_size=25),
)
@example(  # an expired shard's row is renewed after the whole corpus has taken its lease
    names=["2/4", "0/1"],
    steps=[("acquire", 0, 0), ("expire", 0, 121), ("acquire", 1, 0), ("renew", 0, 0)],
)
@example(  # two holders of one name: the second waits for the first's expiry
    names=["1/2", "1/2"],
    steps=[("acquire", 0, 0), ("acquire", 1, 0), ("expire", 0, 120), ("acquire", 1, 0)],
)
def test_no_interleaving_holds_the_whole_corpus_beside_another(
    leases: Leases, names: list[str], steps: list[tuple[str, int, int]]
) -> None:
    run_interleaving(leases, names, steps)


def test_the_property_runs_on_each_lease(leases: Leases) -> None:
    """A sanity check of the model the property relies on: a refused acquire leaves the
    holders as they were."""
    run_interleaving(
        leases,
        ["0/1", "0/2", "1/2"],
        [
            *[("acquire", 1, 0), ("acquire", 0, 0), ("acquire", 2, 0), ("release", 1, 0)],
            *[("release", 2, 0), ("acquire", 0, 0), ("acquire", 1, 0), ("renew", 0, 0)],
        ],
    )
