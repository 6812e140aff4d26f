"""The watch polls an HTTP registry and a SQL table at their ``poll_interval``: a conditional
request (the registry's ``ETag``, answered 304) or the table's ``updated_at`` watermark says
whether anything changed, and only then is the source read and the changed documents
reconciled; a source without ``poll_interval`` is left to the scheduled jobs."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from acceptance_kit import Deployment, body
from prometheus_client import CollectorRegistry
from pytest_httpserver import HTTPServer
from registry_kit import FakeRegistry

from reconciler.app.polling import PolledWatch
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock

TABLE = (
    "CREATE TABLE controlled (doc_no INTEGER PRIMARY KEY, series TEXT, rev INTEGER, "
    "state_code TEXT, valid_from DATE, text_body TEXT, changed INTEGER)"
)


def _sources(url: str, dms: str, poll: str) -> str:
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


def _sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)


def test_polled_sources_are_read_when_their_probe_says_so(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    registry = FakeRegistry(etags=True)
    registry.add("RUN-1", body("Runbook", "Page the on-call."), status="current", family="run")
    registry.add("OPS-1", body("Ops", "Rotate."), status="current", family="ops")
    url = registry.serve(httpserver)
    db = tmp_path / "dms.db"
    _sql(db, TABLE)
    _sql(db, "INSERT INTO controlled VALUES (1, 'travel', 1, 'A', '2024-01-01', '# T\n\nX.', 1)")
    dep = Deployment(tmp_path / "dep")
    dep.configure(source_extra=_sources(url, f"sqlite:///{db}", 'poll_interval = "1m"'))
    dep.init_ingest()
    assert {"reg:RUN-1", "reg:OPS-1", "dms:1"} <= dep.served()
    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    polled = {w.name: w for w in watch.sources if isinstance(w, PolledWatch)}
    assert set(polled) == {"reg", "dms"}
    watch.open()
    try:
        watch.tick()  # the first polls: where each source stands
        bodies = [h for h in registry.hits if h.startswith("body:")]
        clock.advance(60)
        watch.tick()  # nothing changed: the registry answers 304, the watermark holds
        assert registry.hits[-1] == "not modified"
        assert [h for h in registry.hits if h.startswith("body:")] == bodies  # no scan
        registry.update("RUN-1", status="retired")
        _sql(db, "UPDATE controlled SET state_code = 'W', changed = 2 WHERE doc_no = 1")
        clock.advance(30)
        watch.tick()  # (not yet: a minute between polls)
        assert not polled["reg"].batch.paths
        clock.advance(30)
        watch.tick()
        served = dep.served()
        assert "reg:RUN-1" not in served
        assert "dms:1" not in served
        assert "reg:OPS-1" in served
    finally:
        watch.stop()


def test_without_poll_interval_a_polled_source_is_not_followed(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    registry = FakeRegistry(etags=True)
    url = registry.serve(httpserver)
    db = tmp_path / "dms.db"
    _sql(db, TABLE)
    dep = Deployment(tmp_path / "dep")
    dep.configure(source_extra=_sources(url, f"sqlite:///{db}", ""))
    watch = Watch(dep.settings, CollectorRegistry())
    assert [w.name for w in watch.sources] == ["hb"]
