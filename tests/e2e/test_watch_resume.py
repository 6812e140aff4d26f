"""A real ``reconciler serve`` stopped, its polled sources changed while it is down (an HTTP
registry with an ``ETag``, a SQL table with an ``updated_at`` watermark), started again: the
watch compares each source's probe with the mark it persisted, finds the changed documents
by their rows, and reconciles them at once, not at the next full job (a year away here, and
the polls an hour apart: only the comparison at start can do it)."""

from __future__ import annotations

import time
from pathlib import Path

from acceptance_kit import Deployment
from exposition_kit import free_port, metrics_config
from pytest_httpserver import HTTPServer
from test_watch import FAR, served, serving
from watch_kit import polled_deployment, sql


def test_what_polled_sources_changed_while_serve_was_down_is_reconciled_at_start(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    leave = "2, 'leave', 1, 'A', '2024-01-01', '# L\n\nY.', 1"
    dep, registry, db = polled_deployment(tmp_path, httpserver, 'poll_interval = "1h"', leave)
    metrics_config(dep, f'[metrics]\nlisten = "127.0.0.1:{free_port()}"\n{FAR}')
    assert {"reg:RUN-1", "reg:OPS-1", "dms:1", "dms:2"} <= served(dep)
    with serving(dep) as wait_log:
        wait_log("watch: following")
        _until_marked(dep, {"reg", "dms"})  # (the first watch: where each source stands)
    # serve is down: the registry retires RUN-1, the table retires row 1 and drops row 2
    registry.update("RUN-1", status="retired")
    sql(db, "UPDATE controlled SET state_code = 'W', changed = 2 WHERE doc_no = 1")
    sql(db, "DELETE FROM controlled WHERE doc_no = 2")
    started = time.monotonic()
    with serving(dep) as wait_log:
        wait_log("watch: following")
        wait_log("reconciled family")
        wait_log("reconciled family")
        now = served(dep)
        took = time.monotonic() - started
    assert {"reg:RUN-1", "dms:1"}.isdisjoint(now), now
    assert "reg:OPS-1" in now  # (and dms:2, gone, is retired past the deletion grace period)
    assert took < 30, took
    log = (dep.root / "serve.log").read_text()
    assert "changed while serve was down: 1 document(s)" in log  # (the registry's)
    assert "changed while serve was down: 2 document(s)" in log  # (the table's: 1 and 2)
    assert "job full run" not in log
    # a third start with nothing changed: the probes match their marks, nothing is read
    hits = len(registry.hits)
    with serving(dep) as wait_log:
        wait_log("watch: following")
        deadline = time.monotonic() + 20
        while "not modified" not in registry.hits[hits:] and time.monotonic() < deadline:
            time.sleep(0.1)
    assert "not modified" in registry.hits[hits:]
    assert (dep.root / "serve.log").read_text().count("changed while serve was down") == 2


def _until_marked(dep: Deployment, sources: set[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        code, status = dep.json("status")
        if code == 0 and {w["source"] for w in status["watch"] if w["mark"]} >= sources:
            return
        time.sleep(0.2)
    raise AssertionError(dep.json("status"))
