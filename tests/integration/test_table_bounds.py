"""Issue 36, item 1: every call to the document table is bounded. A PostgreSQL that accepts
and never answers fails the connect within ``connect_timeout``; one that stops answering in
the middle of a session (a proxy that forwards nothing more) fails the call once it has
outlived the statement bound (the watchdog cuts its socket: the server cannot end a statement
it does not answer, and its kernel still acknowledges every byte); a real server ends a
statement past ``statement_timeout`` and a lock wait past ``lock_timeout`` itself. Real
sockets, real PostgreSQL, a few seconds each."""

from __future__ import annotations

import threading
import time

import pytest
from silent_kit import Proxy, Silent
from sqlalchemy import text
from sqlalchemy.engine import make_url

from reconciler.errors import TableUnavailable
from reconciler.stores.sql import SqlDocumentTable, TableBounds

BOUNDS = TableBounds(connect=2, statement=2, lock=1)


def test_a_server_that_accepts_and_never_answers_fails_the_connect() -> None:
    silent = Silent()
    table = SqlDocumentTable.from_url(
        f"postgresql+psycopg://reconciler@127.0.0.1:{silent.port}/db", bounds=BOUNDS
    )
    try:
        with pytest.raises(TableUnavailable, match="cannot reach the document table"):
            table.schema_status()
        assert silent.accepted.is_set()
    finally:
        table.close()
        silent.close()


def test_a_server_that_stops_answering_mid_session_fails_the_call(pg_url: str) -> None:
    url = make_url(pg_url)
    proxy = Proxy((url.host or "127.0.0.1", url.port or 5432))
    table = SqlDocumentTable.from_url(
        url.set(port=proxy.port).render_as_string(False), bounds=BOUNDS
    )
    try:
        assert table.schema_status().current is None  # answered through the proxy
        proxy.hang()  # the pooled connection now waits for ever, and so would a new one
        failed: list[BaseException] = []

        def call() -> None:
            try:
                table.schema_status()
            except BaseException as exc:
                failed.append(exc)

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        worker.join(60)  # (the bound is 4 s a call plus a 2 s connect: generous for load)
        assert not worker.is_alive(), "the call to a silent server was never ended"
        assert failed, "the call did not fail"
        assert isinstance(failed[0], TableUnavailable), failed
    finally:
        table.close()
        proxy.close()


def test_the_watchdog_s_thread_ends_when_no_call_is_in_flight(pg_url: str) -> None:
    """Serve opens a table per job: its watchdog must not leave a thread behind each one."""
    table = SqlDocumentTable.from_url(pg_url, bounds=TableBounds(connect=2, statement=0.5))
    try:
        for _ in range(3):
            table.schema_status()
    finally:
        table.close()
    deadline = time.monotonic() + 30
    while any(t.name == "sql-watchdog" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the watchdog's thread outlived its calls"
        time.sleep(0.1)


def test_the_server_ends_a_long_statement_and_a_long_lock_wait(pg_url: str) -> None:
    table = SqlDocumentTable.from_url(pg_url, bounds=BOUNDS)
    other = SqlDocumentTable.from_url(pg_url, bounds=BOUNDS)
    try:
        with table.engine.connect() as conn, pytest.raises(Exception, match="statement timeout"):
            conn.execute(text("SELECT pg_sleep(30)"))
        with table.engine.begin() as conn:
            conn.execute(text("CREATE TABLE held (id int)"))
        with other.engine.connect() as holder:
            holder.execute(text("LOCK TABLE held IN ACCESS EXCLUSIVE MODE"))
            with table.engine.connect() as conn, pytest.raises(Exception, match="lock timeout"):
                conn.execute(text("SELECT * FROM held"))
            holder.rollback()
    finally:
        other.close()
        table.close()


def test_sqlite_waits_for_a_lock_no_longer_than_its_bound(tmp_path: object) -> None:
    path = f"sqlite:///{tmp_path}/t.db"
    table = SqlDocumentTable.from_url(path, bounds=TableBounds(lock=0.5))
    try:
        with table.engine.connect() as conn:
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 500
    finally:
        table.close()
