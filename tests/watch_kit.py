"""serve's watch in one process, its time on a ManualClock, for the alert rules: the
``/metrics`` exposition it produces through a fast change, a change held up by a busy
lease, the same change reconciled minutes late, and a vault whose folder vanished."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

from acceptance_kit import Deployment, day
from exposition_kit import Exposition
from prometheus_client import CollectorRegistry, generate_latest

from reconciler.app.followers import DEBOUNCE, RETRY, VaultWatch
from reconciler.app.holding import lease_name
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.lease import make_lease


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
