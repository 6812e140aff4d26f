"""serve's watch in one process, its time on a ManualClock, for the alert rules: the
``/metrics`` exposition it produces through a fast change, a change held up by a busy
lease, the same change reconciled minutes late, and a vault whose folder vanished."""

from __future__ import annotations

import shutil
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from acceptance_kit import Deployment, body, day
from exposition_kit import Exposition
from prometheus_client import CollectorRegistry, generate_latest
from pytest_httpserver import HTTPServer
from registry_kit import FakeRegistry

from reconciler.app.followers import DEBOUNCE, RETRY, VaultWatch
from reconciler.app.holding import lease_name
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.lease import make_lease

POLLED_TABLE = (
    "CREATE TABLE controlled (doc_no INTEGER PRIMARY KEY, series TEXT, rev INTEGER, "
    "state_code TEXT, valid_from DATE, text_body TEXT, changed INTEGER)"
)


def opened(dep: Deployment) -> tuple[Watch, ManualClock, CollectorRegistry]:
    """A watch of ``dep`` on a manual clock, its marks read and its watchers started (no loop
    thread: a test ticks it)."""
    clock = ManualClock(datetime.now(UTC))
    registry = CollectorRegistry()
    watch = Watch(dep.settings, registry, clock=clock)
    watch.open()
    return watch, clock, registry


def vault_of(watch: Watch) -> VaultWatch:
    """The watch's first source, a vault."""
    watched = watch.sources[0]
    assert isinstance(watched, VaultWatch)
    return watched


def polled_sources(url: str, dms: str, poll: str) -> str:
    """An HTTP registry ``reg`` at ``url`` and a SQL table ``dms`` (``POLLED_TABLE``) at
    ``dms``, each with ``poll`` (a ``poll_interval`` line, or none)."""
    return "\n".join(
        [
            "[[sources]]", 'name = "reg"', 'type = "http"', f'url = "{url}"', poll,
            "[sources.options]", "retries = 0", "backoff_factor = 0",
            "[[sources]]", 'name = "dms"', 'type = "sql"', f'url = "{dms}"', poll,
            "[sources.options]", 'table = "controlled"', 'updated_at = "changed"',
            'status_map = { A = "current", W = "retired" }',
            "[sources.options.columns]", 'id = "doc_no"', 'family = "series"',
            'version = "rev"', 'status = "state_code"', 'effective_from = "valid_from"',
            'body = "text_body"',
        ]
    )  # fmt: skip


def sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)


def polled_deployment(
    root: Path, httpserver: HTTPServer, poll: str, *rows: str, extra: str = "", etags: bool = True
) -> tuple[Deployment, FakeRegistry, Path]:
    """A deployment of ``polled_sources`` (``poll`` their interval) and ``extra`` sources,
    ingested: the registry (with an ``ETag`` unless ``etags`` is false) holds RUN-1 (family run) and OPS-1 (ops), current; the table row 1
    (travel) and ``rows`` (its ``VALUES``)."""
    registry = FakeRegistry(etags=etags)
    registry.add("RUN-1", body("Runbook", "Page the on-call."), status="current", family="run")
    registry.add("OPS-1", body("Ops", "Rotate."), status="current", family="ops")
    db = root / "dms.db"
    sql(db, POLLED_TABLE)
    for row in ("1, 'travel', 1, 'A', '2024-01-01', '# T\n\nX.', 1", *rows):
        sql(db, f"INSERT INTO controlled VALUES ({row})")
    dep = Deployment(root / "dep")
    sources = polled_sources(registry.serve(httpserver), f"sqlite:///{db}", poll)
    dep.configure(source_extra=sources + "\n" + extra)
    dep.init_ingest()
    return dep, registry, db


def _seen(watched: VaultWatch, path: str) -> None:
    deadline = time.monotonic() + 10
    while path not in watched.batch.paths and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path in watched.batch.paths, watched.batch.paths


def watch_story(root: Path) -> dict[str, Exposition]:
    dep = Deployment(root)
    for name in ("runbook", "guide"):
        dep.note(name, id=name, family=name, status="current", effective_from=day(-50))
    dep.init_ingest()
    clock = ManualClock(datetime.now(UTC))
    registry = CollectorRegistry()
    watch = Watch(dep.settings, registry, clock=clock)
    watch.open()
    watched = watch.sources[0]
    assert isinstance(watched, VaultWatch)
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    other = make_lease(table.engine, lease_name("0/1"))

    def reading() -> Exposition:
        return Exposition(generate_latest(registry).decode(), clock.now().timestamp())

    readings: dict[str, Exposition] = {}
    try:
        watch.tick()
        dep.edit_front("runbook", status="retired")
        _seen(watched, "runbook.md")
        clock.advance(DEBOUNCE)
        watch.tick()
        readings["fast"] = reading()
        assert other.acquire()
        dep.edit_front("guide", status="retired")
        _seen(watched, "guide.md")
        clock.advance(300)
        watch.tick()  # the lease is held: the change waits
        readings["lagging"] = reading()
        other.release()
        clock.advance(RETRY)
        watch.tick()
        readings["slow"] = reading()
        watched.stop()  # the watcher dies, and its folder is gone: it cannot start again
        shutil.rmtree(dep.vault)
        watch.tick()
        readings["down"] = reading()
    finally:
        watch.stop()
        table.close()
    return readings
