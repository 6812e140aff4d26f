"""A full disk under the document table: a clear error that says so (never "check that the
store is running"), no traceback, the lease not left behind for the next run, the failed run
accounted for, nothing half-written; once space is freed the next run converges.

The table lives on a real 3 MiB tmpfs filled to the brim. Where the machine does not allow
mounting one (not root), the driver's own "database or disk is full" error is injected at the
SQLite connection instead, on every write.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from acceptance_kit import Deployment, kinds
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from reconciler.errors import StoreFault
from reconciler.model import OPEN_END, Document, VersionState
from reconciler.stores.sql import SqlDocumentTable, make_engine

#: A document whose id quotes PostgreSQL's disk-full code, 53100, and SQLite's words.
DOC = Document(
    doc_id="jira:OPS-53100 database or disk is full",
    source="jira",
    source_key="OPS-53100",
    doc_family_id="f",
    doc_version=1,
    version_state=VersionState.CURRENT,
)


@contextlib.contextmanager
def small_disk(where: Path) -> Iterator[bool]:
    """Mount a 3 MiB tmpfs at ``where``; yield whether it could be mounted."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path) -> Path:
    """Write a file until the disk is full; return it (delete it to free the space)."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as handle:
        for size in (65536, 4096, 512, 1):  # down to the last byte
            with contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * size)
    return filler


def apply_in_a_process(deploy: Deployment) -> subprocess.CompletedProcess[str]:
    code = "from reconciler.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "--config", str(deploy.config), "apply"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RECONCILER_CONFIG": ""},
        check=False,
    )


def drifted(deploy: Deployment) -> None:
    for n in range(6):
        deploy.family(f"f{n}", 2)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    for n in range(6):
        deploy.edit_front(f"f{n}-v2", status="retired")


def test_a_full_disk_is_named_and_nothing_is_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk) as mounted:
        if not mounted:
            injected_full_disk(tmp_path, monkeypatch)
            return
        deploy = Deployment(tmp_path / "deployment", f"sqlite:///{disk / 'reconciler.db'}")
        drifted(deploy)
        rows, points = deploy.rows(), deploy.points()
        filler = fill(disk)

        done = apply_in_a_process(deploy)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "disk full" in done.stderr
        assert "reconciler.db" in done.stderr
        assert "check that the store is running" not in done.stderr
        assert "Traceback" not in done.stderr

        filler.unlink()  # (SQLite cannot even read its WAL on a full disk)
        assert deploy.rows() == rows  # the transaction was rolled back: nothing half-written
        assert deploy.points().payloads == points.payloads
        code, data = deploy.json("apply")  # the lease is free at once (its holder is gone)
        assert code == 0, data
        assert ("family", "retired_in_source", "hb:f0-v2") in kinds(data)
        assert deploy.json("check")[0] == 0
        # No run is left "running": the failed one is recorded as failed or interrupted, or,
        # when not even its start could be written, not at all (the command said why).
        statuses = [r["status"] for r in deploy.dump()["runs"].values() if r["mode"] == "apply"]
        assert statuses.count("succeeded") == 2
        assert "running" not in statuses


def _full_disk_connection(path: str) -> Any:
    """A SQLite connection whose writes fail as on a full disk (the driver's own error)."""

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
            if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
                raise sqlite3.OperationalError("database or disk is full")
            return super().execute(sql, *args)

    class Connection(sqlite3.Connection):
        def cursor(self, factory: Any = Cursor) -> Any:  # type: ignore[override]
            return super().cursor(factory)

    return sqlite3.connect(path, factory=Connection, check_same_thread=False)


def injected_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no tmpfs can be mounted: the same run with the driver's error injected."""
    deploy = Deployment(tmp_path / "deployment")
    drifted(deploy)
    rows, points = deploy.rows(), deploy.points()
    database = str(deploy.root / "reconciler.db")

    def full_disk_engine(url: str, **options: Any) -> Any:
        return sqlalchemy.create_engine(
            url, creator=lambda: _full_disk_connection(database), **options
        )

    monkeypatch.setattr("reconciler.stores.sql.connection.create_engine", full_disk_engine)
    result = deploy.cli("apply")
    assert result.exit_code == 1, result.output
    assert "disk full" in result.output
    assert "check that the store is running" not in result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a traceback
    monkeypatch.undo()
    assert deploy.rows() == rows
    assert deploy.points().payloads == points.payloads


def test_the_driver_error_of_a_full_disk_is_a_store_fault(tmp_path: Path) -> None:
    """The mapping itself, without a mount: the same error raised by the driver on a write."""
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    engine.pool._creator = lambda *_a: _full_disk_connection(str(tmp_path / "x.db"))  # type: ignore[attr-defined]
    with engine.begin() as conn:
        conn.exec_driver_sql("SELECT 1")

    def write() -> None:
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")

    with pytest.raises(StoreFault, match=r"x\.db: disk full"):
        write()
    engine.dispose()


def test_data_that_quotes_a_fault_code_is_not_a_fault(table: SqlDocumentTable) -> None:
    """Codes, not messages: a duplicate key whose value reads like a disk-full code stays
    the integrity error it is."""
    table.upsert_documents([DOC])
    with pytest.raises(IntegrityError), table.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO documents (doc_id, source, source_key, doc_family_id, doc_version, "
                "version_state, effective_to, quarantined, chunk_count, updated_at) VALUES "
                "(:id, 'jira', 'OPS-53100', 'f', 1, 'current', :end, false, 0, :end)"
            ),
            {"id": DOC.doc_id, "end": OPEN_END},
        )
