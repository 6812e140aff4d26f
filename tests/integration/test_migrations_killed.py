"""A SQLite ``init`` killed mid-migration is never permanent (issue 24, item 6).

A real subprocess upgrades a SQLite document table (from nothing, and from an older
revision) and is SIGKILLed before its k-th SQL statement, for about a dozen k spread over
the upgrade (the first and the last among them); then a
plain ``ensure_schema`` (what ``reconciler init`` and every command run) must bring the
table to the head, with exactly the schema the models describe. PostgreSQL has transactional
DDL; on SQLite each upgrade is one transaction the kill rolls back.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from reconciler.stores.sql.connection import make_engine
from reconciler.stores.sql.migrating import SqlSchema, _alembic_config, plain_head
from reconciler.stores.sql.schema import Base

KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from sqlalchemy import event
    from reconciler.stores.sql.connection import make_engine
    from reconciler.stores.sql.migrating import SqlSchema

    url, kill_at = sys.argv[1], int(sys.argv[2])
    engine = make_engine(url)
    seen = 0

    @event.listens_for(engine, "before_cursor_execute")
    def _statement(conn, cursor, statement, parameters, context, executemany):
        global seen
        seen += 1
        if seen == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    SqlSchema(engine).ensure_schema(create=True)
    print(seen)
    """
)


def _upgrade(url: str, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", KILLER, url, str(kill_at)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _at_revision(path: Path, revision: str | None) -> None:
    if revision is None:
        return
    engine = make_engine(f"sqlite:///{path}")
    config = _alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    engine.dispose()


def _assert_at_head(url: str) -> None:
    engine = make_engine(url)
    try:
        status = SqlSchema(engine).ensure_schema(create=True)
        assert status.up_to_date
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
            versions = conn.execute(text("SELECT version_num FROM alembic_version")).all()
        assert versions == [(plain_head(),)]
    finally:
        engine.dispose()


@pytest.mark.parametrize("start", [None, "0003"])
def test_a_sqlite_upgrade_killed_before_any_statement_is_finished_by_the_next(
    tmp_path: Path, start: str | None
) -> None:
    template = tmp_path / "template.db"
    _at_revision(template, start)
    counted = _upgrade(f"sqlite:///{tmp_path / 'count.db'}", 0) if start is None else None
    if start is not None:
        (tmp_path / "count.db").write_bytes(template.read_bytes())
        counted = _upgrade(f"sqlite:///{tmp_path / 'count.db'}", 0)
    assert counted is not None
    assert counted.returncode == 0, counted.stderr
    statements = int(counted.stdout.strip().splitlines()[-1])
    assert statements > 5
    # every statement when they are few; else 12 points spread over the upgrade, both ends in
    points = sorted({1, statements, *range(1, statements + 1, max(1, statements // 10))})
    for kill_at in points:
        database = tmp_path / f"killed-{kill_at}.db"
        if start is not None:
            database.write_bytes(template.read_bytes())
        url = f"sqlite:///{database}"
        done = _upgrade(url, kill_at)
        assert done.returncode == -signal.SIGKILL, (kill_at, done.stderr[-2000:])
        _assert_at_head(url)
