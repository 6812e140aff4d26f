"""A real ``reconciler serve`` stopped, its polled sources changed while it is down (an HTTP
registry with an ``ETag``, a SQL table with an ``updated_at`` watermark, a git repository),
started again: the watch compares each source's probe with the mark it persisted (the git
source: its branch tip with the last reconciled commit), finds the changed documents by their
rows (the git source: by the paths changed since), and reconciles them at once, not at the
next full job (a year away here, and the polls an hour apart: only the comparison at start
can do it). A change is dated as its source dates it (the row's ``updated_at``, the commit's
time), so ``reconciler_staleness_seconds`` counts the time serve was down."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from acceptance_kit import Deployment, day
from exposition_kit import Exposition, free_port, metrics_config, scrape_until
from git_kit import Repo
from pytest_httpserver import HTTPServer
from test_watch import FAR, served, serving
from watch_kit import polled_deployment, sql


def test_what_polled_sources_changed_while_serve_was_down_is_reconciled_at_start(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    repo = Repo(tmp_path / "repo")
    for name in ("alpha", "beta"):
        repo.write(f"{name}.md", FRONT.format(name, "current", day(-30)))
    repo.commit("start")
    git = f'[[sources]]\nname = "gh"\ntype = "git"\npath = "{repo.root}"\npoll_interval = "1h"\n'
    leave = "2, 'leave', 1, 'A', '2024-01-01', '# L\n\nY.', 1"
    dep, registry, db = polled_deployment(
        tmp_path, httpserver, 'poll_interval = "1h"', leave, extra=git
    )
    port = free_port()
    metrics_config(dep, f'[metrics]\nlisten = "127.0.0.1:{port}"\n{FAR}')
    assert {"reg:RUN-1", "reg:OPS-1", "dms:1", "dms:2", "gh:beta"} <= served(dep)
    with serving(dep) as wait_log:
        wait_log("watch: following")
        _until_marked(dep, {"reg", "dms", "gh"})  # (the first watch: where each source stands)
    # serve is down: the registry retires RUN-1, the table retires row 1 (its updated_at a
    # date now) and drops row 2, a commit retires beta; serve starts DOWN seconds later
    registry.update("RUN-1", status="retired")
    edited = datetime.now(UTC).isoformat()
    sql(db, f"UPDATE controlled SET state_code = 'W', changed = '{edited}' WHERE doc_no = 1")
    sql(db, "DELETE FROM controlled WHERE doc_no = 2")
    repo.write("beta.md", FRONT.format("beta", "retired", day(-30)))
    repo.commit("retire beta")
    time.sleep(DOWN)
    started = time.monotonic()
    with serving(dep) as wait_log:
        wait_log("watch: following")
        for _ in range(3):
            wait_log("reconciled family")
        now = served(dep)
        took = time.monotonic() - started
        proc = wait_log.proc  # type: ignore[attr-defined]
        reading = scrape_until(port, _staleness("dms", "gh"), proc, dep.root / "serve.log")
    # dated as their sources date them (the row's updated_at, the commit's time), the changes
    # count the time serve was down
    assert _sum(reading, "dms") >= DOWN, reading.samples
    assert _sum(reading, "gh") >= DOWN, reading.samples
    assert {"reg:RUN-1", "dms:1", "gh:beta"}.isdisjoint(now), now
    assert {"reg:OPS-1", "gh:alpha"} <= now  # (dms:2, gone, is retired past the grace period)
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


#: Seconds between the changes and serve's start (the time it was down, after them).
DOWN = 2.0


def _staleness(*sources: str) -> Callable[[Exposition], bool]:
    def observed(reading: Exposition) -> bool:
        return all(
            (reading.value("reconciler_staleness_seconds_count", source=source) or 0) > 0
            for source in sources
        )

    return observed


def _sum(reading: Exposition, source: str) -> float:
    return reading.value("reconciler_staleness_seconds_sum", source=source) or 0.0


FRONT = "---\nid: {0}\nfamily: {0}\nstatus: {1}\neffective_from: {2}\n---\n# {0}\n\nBody.\n"


def _until_marked(dep: Deployment, sources: set[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        code, status = dep.json("status")
        if code == 0 and {w["source"] for w in status["watch"] if w["mark"]} >= sources:
            return
        time.sleep(0.2)
    raise AssertionError(dep.json("status"))
