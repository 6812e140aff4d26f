"""Issue 36, item 2: one slow source cannot stop the others. A serve job reads its sources side
by side, each within ``[schedule] source_deadline`` (half of ``job_deadline`` by default): an
HTTP registry that trickles its answer a byte at a time is unreadable this run, its families
stay as they are, and the vault beside it is reconciled in the same job, which is ``partial``
with the reason. Real sockets (``RawServer``, ``pytest_httpserver``), the real runner of
``serve``, real time (a few seconds)."""

from __future__ import annotations

import time
from pathlib import Path

from acceptance_kit import Deployment, day
from pytest_httpserver import HTTPServer
from raw_server_kit import RawServer, answer, http_source
from registry_kit import FakeRegistry

from reconciler.app.daemon import Runner, job_specs
from reconciler.metrics import build_registry
from reconciler.pipeline.values import Report
from reconciler.stores.sql import SqlDocumentTable

#: The registry's listing, a byte every 50 ms: 4 KiB take 200 s, far past any deadline here.
TRICKLED = b'{"documents": []' + b" " * 4096 + b"}"


def full_job(dep: Deployment) -> Report | None:
    """serve's full job, run once by serve's runner."""
    settings = dep.settings
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    try:
        _registry, live = build_registry(table.metrics_snapshot)
        return Runner(settings, live=live)(job_specs(settings)[0])
    finally:
        table.close()


def test_a_trickling_registry_leaves_the_vault_s_retirement_applied_in_the_same_job(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    """The issue's second finding: a registry sending a byte every few seconds made every
    full job hit its deadline and fail as a whole, so a healthy vault's retirement stayed
    served. Here the registry trickles (its read is cut at the read deadline: half of the
    job's 6 s, ``source_deadline`` unset), and the vault's retirement is applied in that same
    job; the registry's own document keeps its state; the run is ``partial``, recorded with
    the reason."""
    registry = FakeRegistry()
    registry.add("SEC-1", family="security", version=1, status="current", effective_from=day(-9))
    dep = Deployment(tmp_path)
    dep.family("expenses", versions=2)
    dep.configure(source_extra=http_source(registry.serve(httpserver)))
    dep.init_ingest()  # the vault and the registry, both answering
    trickling = RawServer(answer(TRICKLED), trickle=0.05)
    try:
        dep.configure(source_extra=http_source(trickling.url))
        dep.config.write_text(
            dep.config.read_text()
            + '[schedule]\njob_deadline = "6s"\nstop_grace = "5s"\n'  # (reads: 3 s)
        )
        dep.edit_front("expenses-v2", status="retired")  # the vault retires its current one
        started = time.monotonic()
        report = full_job(dep)
        took = time.monotonic() - started
        assert trickling.requested.is_set()  # the registry was being read
    finally:
        trickling.close()
    assert report is not None
    assert report.error is None
    assert report.partial
    assert report.unread_sources == ["reg"]
    assert "did not finish its scan within 3s" in (report.sources["reg"].error or "")
    rows = dep.rows()
    assert rows["hb:expenses-v2"]["version_state"] == "retired"  # applied in the same job
    assert rows["reg:SEC-1"]["version_state"] == "current"  # the unread source's, as it was
    points = dep.points()
    assert {p["version_state"] for p in points.of("hb:expenses-v2").values()} == {"retired"}
    assert {p["version_state"] for p in points.of("reg:SEC-1").values()} == {"current"}
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    try:
        [run] = [r for r in table.last_runs(10) if r.job == "full"]
    finally:
        table.close()
    assert run.status == "partial"
    assert "source 'reg'" in (run.error or "")
    assert "did not finish its scan within 3s" in (run.error or "")
    print(f"the job took {took:.1f}s with a source deadline of 3s")


def test_a_failing_source_leaves_the_others_reconciled(tmp_path: Path) -> None:
    """A registry that is down (nothing listens) is as isolated: the vault's retirement is
    applied and the run is partial, its reason the connector's error (as before: a guard)."""
    dep = Deployment(tmp_path)
    dep.family("expenses", versions=2)
    dep.init_ingest()
    down = RawServer(answer(b"{}"))
    url = down.url
    down.close()  # (its port now refuses connections)
    dep.configure(source_extra=http_source(url))
    dep.config.write_text(dep.config.read_text() + '[schedule]\njob_deadline = "60s"\n')
    dep.edit_front("expenses-v2", status="retired")
    report = full_job(dep)
    assert report is not None
    assert report.partial
    assert report.unread_sources == ["reg"]
    assert dep.rows()["hb:expenses-v2"]["version_state"] == "retired"


def test_a_cron_run_leaves_a_trickling_registry_unread_past_its_source_deadline(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    """``reconciler run`` (cron) reads its sources as a serve job does: the trickling registry
    is cut at ``--source-deadline``, the vault's retirement is applied in that run, the
    registry's document keeps its state, and the run is ``partial`` (exit 4) with the reason."""
    registry = FakeRegistry()
    registry.add("SEC-1", family="security", version=1, status="current", effective_from=day(-9))
    dep = Deployment(tmp_path)
    dep.family("expenses", versions=2)
    dep.configure(source_extra=http_source(registry.serve(httpserver)))
    dep.init_ingest()
    trickling = RawServer(answer(TRICKLED), trickle=0.05)
    try:
        dep.configure(source_extra=http_source(trickling.url))
        dep.edit_front("expenses-v2", status="retired")
        code, out = dep.json("run", "--source-deadline", "2s")
        assert trickling.requested.is_set()
    finally:
        trickling.close()
    assert code == 4, out
    assert out["status"] == "partial"
    assert out["unread_sources"] == ["reg"]
    assert "did not finish its scan within 2s" in out["unread_reasons"]["reg"]
    rows = dep.rows()
    assert rows["hb:expenses-v2"]["version_state"] == "retired"
    assert rows["reg:SEC-1"]["version_state"] == "current"
    refused = dep.cli("run", "--source-deadline", "0s")
    assert refused.exit_code == 64  # (a usage error)
    assert "a deadline is longer than 0s" in refused.output
