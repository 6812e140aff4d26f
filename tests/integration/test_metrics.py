"""Metrics: exposition from the run log, sample by sample, on a fresh registry; cron export."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

import reconciler
from reconciler.metrics import build_registry, export
from reconciler.model import Document, Finding, Severity, VersionState
from reconciler.stores.sql import SqlDocumentTable


def finding(
    check: str,
    kind: str,
    *,
    family: str = "h:f",
    doc_id: str = "h:d",
    severity: Severity = Severity.CRITICAL,
) -> Finding:
    return Finding(
        check=check,
        kind=kind,
        severity=severity,
        family=family,
        doc_id=doc_id,
        expected=None,
        actual=None,
        action="x",
    )


def record(
    table: SqlDocumentTable,
    *,
    job: str,
    status: str,
    checks: str = "family,hash,siblings,ttl,payload,dates,index",
    findings: list[tuple[Finding, bool]] = (),
    **stats: float,
) -> str:  # type: ignore[assignment]
    run_id = table.start_run(mode="run", actor="schedule", job=job, checks=checks)
    table.record_findings(run_id, [f for f, _ in findings], outstanding=[o for _, o in findings])
    table.finish_run(run_id, status=status, **stats)
    return run_id


def test_samples_from_the_run_log(table: SqlDocumentTable) -> None:
    registry, _live = build_registry(table.metrics_snapshot)
    assert (
        registry.get_sample_value("reconciler_build_info", {"version": reconciler.__version__})
        == 1.0
    )
    assert registry.get_sample_value("reconciler_live_siblings") == 0.0
    assert registry.get_sample_value("reconciler_guard_refusals_total") == 0.0

    record(
        table,
        job="full",
        status="succeeded",
        rows_written=2,
        payload_writes=2,
        points_written=7,
        reingest_requests=1,
        chunks_scanned=100,
        findings=[
            (finding("siblings", "live_siblings", doc_id="h:a"), False),
            (finding("hash", "in_place_edit", doc_id="h:b"), True),
            (finding("family", "missing_in_source", severity=Severity.WARNING), True),
        ],
    )
    success = table.last_runs(1)[0].finished_at
    record(table, job="full", status="failed", chunks_scanned=50)
    record(
        table,
        job="full",
        status="refused",
        findings=[
            (finding("siblings", "live_siblings", doc_id="h:x"), True),
            (finding("siblings", "live_siblings", doc_id="h:y"), True),
            (finding("guard", "blast_radius", family=None, doc_id=None), True),
        ],
    )
    guard = {"check": "guard", "kind": "blast_radius", "severity": "critical"}
    registry, _live = build_registry(table.metrics_snapshot)
    assert registry.get_sample_value("reconciler_findings", guard) == 1.0
    # A later ttl job is the ttl check's latest run: its findings count, the full run's do not;
    # guard findings are those of the newest run, which was not refused.
    record(
        table,
        job="ttl",
        status="succeeded",
        checks="ttl",
        findings=[
            (finding("ttl", "ttl_expired", family="h:f1", doc_id="h:1"), True),
            (finding("ttl", "ttl_expired", family="h:f1", doc_id="h:2"), True),
            (finding("ttl", "ttl_expired", family="h:f2", doc_id="h:3"), True),
        ],
    )
    table.record_source_attempt("handbook", ok=True, documents_seen=3)
    table.record_source_attempt("wiki", ok=False, error="down")
    table.record_source_attempt("wiki", ok=False, error="down")

    registry, _live = build_registry(table.metrics_snapshot)
    value = registry.get_sample_value
    full = {"reconciler_job": "full"}
    assert value("reconciler_last_success_timestamp_seconds", full) == success.timestamp()
    last_run = value("reconciler_last_run_timestamp_seconds", full)
    assert last_run is not None
    assert last_run >= success.timestamp()
    assert value("reconciler_last_run_success", full) == 0.0  # the refused run is the last
    assert value("reconciler_last_run_success", {"reconciler_job": "ttl"}) == 1.0
    assert value("reconciler_run_failures_total", full) == 1.0
    assert value("reconciler_guard_refusals_total") == 1.0
    assert value("reconciler_table_writes_total") == 2.0
    assert value("reconciler_payload_writes_total") == 2.0
    assert value("reconciler_points_written_total") == 7.0
    assert value("reconciler_reingest_requests_total") == 1.0
    assert value("reconciler_points_scanned_total") == 150.0
    assert value("reconciler_repairs_total", {"check": "siblings", "kind": "live_siblings"}) == 1.0
    # Findings: each check's latest run, outstanding only.
    assert value("reconciler_live_siblings") == 2.0
    assert (
        value(
            "reconciler_findings",
            {"check": "siblings", "kind": "live_siblings", "severity": "critical"},
        )
        == 2.0
    )
    assert (
        value(
            "reconciler_findings",
            {"check": "hash", "kind": "in_place_edit", "severity": "critical"},
        )
        is None
    )  # the refused run is hash's latest
    assert value("reconciler_findings", guard) is None
    assert value("reconciler_ttl_expired_families") == 2.0
    assert value("reconciler_source_up", {"source": "handbook"}) == 1.0
    assert value("reconciler_source_up", {"source": "wiki"}) == 0.0
    assert value("reconciler_source_errors_total", {"source": "wiki"}) == 2.0
    assert value("reconciler_source_errors_total", {"source": "handbook"}) == 0.0


def doc(n: int, **changes: object) -> Document:
    values: dict[str, object] = {
        "doc_id": f"h:doc-{n}",
        "source": "h",
        "source_key": f"doc-{n}",
        "doc_family_id": f"h:fam-{n // 3}",
        "doc_version": 1,
        "version_state": VersionState.CURRENT,
    }
    return Document(**{**values, **changes})  # type: ignore[arg-type]


def test_quarantined_families_by_reason(table: SqlDocumentTable) -> None:
    table.upsert_documents(
        [
            doc(0, quarantined=True, quarantine_reason="ttl_expired"),
            doc(1, quarantined=True, quarantine_reason="ttl_expired"),  # same family as 0
            doc(3, quarantined=True, quarantine_reason="in_place_edit"),
            doc(6),
        ]
    )
    registry, _live = build_registry(table.metrics_snapshot)
    assert (
        registry.get_sample_value("reconciler_quarantined_families", {"reason": "ttl_expired"})
        == 1.0
    )
    assert (
        registry.get_sample_value("reconciler_quarantined_families", {"reason": "in_place_edit"})
        == 1.0
    )


def test_live_metrics_durations_and_lease(table: SqlDocumentTable) -> None:
    registry, live = build_registry(table.metrics_snapshot)
    live.observe(timings={"family": 0.02, "payload": 0.3}, total=1.5)
    live.lease_held.labels(shard="0/1").set(1)
    live.lease_skips.labels(shard="0/1").inc()
    value = registry.get_sample_value
    assert value("reconciler_run_duration_seconds_count", {"check": "family"}) == 1.0
    assert value("reconciler_run_duration_seconds_bucket", {"check": "family", "le": "0.05"}) == 1.0
    assert value("reconciler_run_duration_seconds_bucket", {"check": "payload", "le": "0.1"}) == 0.0
    assert value("reconciler_run_duration_seconds_sum", {"check": "total"}) == 1.5
    assert value("reconciler_lease_held", {"shard": "0/1"}) == 1.0
    assert value("reconciler_lease_skips_total", {"shard": "0/1"}) == 1.0


def test_textfile_is_replaced_atomically_and_keeps_the_last_success(
    sqlite_url: str, tmp_path: Path
) -> None:
    table = SqlDocumentTable.from_url(sqlite_url)
    table.ensure_schema(create=True)
    target = tmp_path / "textfile" / "reconciler.prom"
    target.parent.mkdir()
    record(table, job="cron", status="succeeded")
    success = table.last_runs(1)[0].finished_at.timestamp()
    registry, _ = build_registry(table.metrics_snapshot)
    assert export(registry, textfile=str(target)) == [f"textfile {target}"]
    inode = os.stat(target).st_ino
    record(table, job="cron", status="failed")
    registry, _ = build_registry(table.metrics_snapshot)
    export(registry, textfile=str(target))
    assert os.stat(target).st_ino != inode  # a new file renamed into place, never rewritten
    assert sorted(p.name for p in target.parent.iterdir()) == ["reconciler.prom"]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(target.read_text())
        for s in family.samples
    }
    job = (("reconciler_job", "cron"),)
    assert samples[("reconciler_last_success_timestamp_seconds", job)] == success
    assert samples[("reconciler_last_run_success", job)] == 0.0
    assert samples[("reconciler_run_failures_total", job)] == 1.0
    table.close()


def test_a_broken_run_log_does_not_break_the_scrape() -> None:
    def broken() -> dict[str, object]:
        raise RuntimeError("database is locked")

    registry, _ = build_registry(broken)  # type: ignore[arg-type]
    assert registry.get_sample_value("reconciler_run_log_readable") == 0.0
    assert (
        registry.get_sample_value("reconciler_build_info", {"version": reconciler.__version__})
        == 1.0
    )


def test_broken_documents_counts_documents_not_findings(table: SqlDocumentTable) -> None:
    registry, _live = build_registry(table.metrics_snapshot)
    assert registry.get_sample_value("reconciler_broken_documents") == 0.0
    bad_field = finding("family", "invalid_source_document", doc_id="h:a")
    record(
        table,
        job="full",
        status="succeeded",
        findings=[
            (bad_field, True),  # two bad fields of one note
            (finding("family", "invalid_source_document", doc_id="h:a"), True),
            (finding("family", "source_problem", doc_id="h:new"), True),
            (finding("family", "source_problem", family=None, doc_id=None), True),
            (finding("family", "missing_in_source", doc_id="h:b"), True),
        ],
    )
    assert registry.get_sample_value("reconciler_broken_documents") == 3.0
