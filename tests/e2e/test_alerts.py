"""The shipped Prometheus alert rules, evaluated by promtool over series the product exported in
this test: the textfile of real cron ``reconciler run``s and the ``/metrics`` of a real
``reconciler serve`` (``exposition_kit``). No series is typed by hand, so a renamed metric,
label or job fails here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from exposition_kit import Exposition, input_series

ALERTS = Path(__file__).resolve().parents[2] / "config" / "alerts"
RULES = ALERTS / "reconciler.rules.yml"
ALERT_NAMES = [rule["alert"] for rule in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]]


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is needed: run scripts/install-system-packages (Debian 'prometheus')")
    return path


def fires(instance: str, severity: str, **labels: str) -> list[dict[str, Any]]:
    return [{"exp_labels": {"instance": instance, "severity": severity, **labels}}]


def quiet(*at: str, alerts: list[str] | None = None) -> list[dict[str, Any]]:
    """No alert (of ``alerts``, default all) at each of the times ``at``."""
    return [
        {"eval_time": t, "alertname": name, "exp_alerts": []}
        for t in at
        for name in (alerts or ALERT_NAMES)
    ]


def run_promtool(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` on the shipped rules. Only the annotations are left out of the
    copy under test (promtool would compare their rendered text); every expression, ``for``
    and label is the shipped one."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "tests.yml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests})
    )
    return subprocess.run(
        [promtool(), "test", "rules", "tests.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def scenarios(
    cron: dict[str, Exposition], serve: Exposition, outage: dict[str, Exposition]
) -> list[dict[str, Any]]:
    """What each alert must do over the product's own series, one promtool test per story."""
    failed_job = cron["failed3"].labels_of("reconciler_run_failures_total")[0]["reconciler_job"]
    return [
        {
            "name": "a cron deployment whose runs stop succeeding pages after 26h",
            "interval": "1m",
            "input_series": input_series([(cron["ok"], 28 * 60)], instance="cron"),
            "alert_rule_test": [
                *quiet("1h", "25h"),
                {
                    "eval_time": "27h",
                    "alertname": "ReconcilerNotSucceeding",
                    "exp_alerts": fires("cron", "critical"),
                },
            ],
        },
        {
            "name": "a serve deployment whose full job stops succeeding pages after 26h",
            "interval": "1m",
            "input_series": input_series([(serve, 28 * 60)], instance="serve"),
            "alert_rule_test": [
                *quiet("1h", "25h"),
                {
                    "eval_time": "27h",
                    "alertname": "ReconcilerNotSucceeding",
                    "exp_alerts": fires("serve", "critical"),
                },
            ],
        },
        {
            "name": "metrics that vanish for 30 minutes",
            "interval": "1m",
            "input_series": input_series([(cron["ok"], 10), (None, 60)], instance="cron"),
            "alert_rule_test": [
                *quiet("30m", alerts=["ReconcilerMetricsAbsent"]),
                {
                    "eval_time": "60m",
                    "alertname": "ReconcilerMetricsAbsent",
                    "exp_alerts": [{"exp_labels": {"severity": "warning"}}],
                },
            ],
        },
        {
            "name": "a drifted corpus whose repair the guard refuses",
            "interval": "1m",
            "input_series": input_series(
                [(cron["ok"], 10), (cron["refused"], 7 * 60)], instance="cron"
            ),
            "alert_rule_test": [
                *quiet("5m"),
                *[
                    {"eval_time": "15m", "alertname": name, "exp_alerts": fires("cron", severity)}
                    for name, severity in (
                        ("ReconcilerLiveSiblings", "critical"),
                        ("ReconcilerHashDrift", "warning"),
                        ("ReconcilerChunksLost", "critical"),
                        ("ReconcilerGuardRefused", "critical"),
                    )
                ],
                *quiet("5h", alerts=["ReconcilerSuccessorsNotIngested"]),
                {
                    "eval_time": "7h",
                    "alertname": "ReconcilerSuccessorsNotIngested",
                    "exp_alerts": fires("cron", "warning"),
                },
            ],
        },
        {
            "name": "three failed runs within 6h",
            "interval": "1m",
            "input_series": input_series(
                [
                    (cron["ok"], 10),
                    (cron["failed1"], 10),
                    (cron["failed2"], 10),
                    (cron["failed3"], 30),
                ],
                instance="cron",
            ),
            "alert_rule_test": [
                *quiet("25m", alerts=["ReconcilerRunsFailing"]),
                {
                    "eval_time": "40m",
                    "alertname": "ReconcilerRunsFailing",
                    "exp_alerts": fires("cron", "critical", reconciler_job=failed_job),
                },
            ],
        },
        {
            "name": "a document table that goes away under serve pages after 10 minutes",
            "interval": "1m",
            "input_series": input_series(
                [(outage["ok"], 10), (outage["down"], 30)], instance="serve"
            ),
            "alert_rule_test": [
                *quiet("5m", "15m", alerts=["ReconcilerTableUnreadable"]),
                {
                    "eval_time": "25m",
                    "alertname": "ReconcilerTableUnreadable",
                    "exp_alerts": fires("serve", "critical"),
                },
            ],
        },
        {
            "name": "a source unreadable for 30 minutes, then past its TTL",
            "interval": "1m",
            "input_series": input_series(
                [(cron["ok"], 10), (cron["source_down"], 40), (cron["ttl_expired"], 10)],
                instance="cron",
            ),
            "alert_rule_test": [
                *quiet("30m", alerts=["ReconcilerSourceErrors", "ReconcilerTTLExpired"]),
                {
                    "eval_time": "45m",
                    "alertname": "ReconcilerSourceErrors",
                    "exp_alerts": fires("cron", "warning", source="hb"),
                },
                {
                    "eval_time": "55m",
                    "alertname": "ReconcilerTTLExpired",
                    "exp_alerts": fires("cron", "critical"),
                },
            ],
        },
    ]


WATCH_ALERTS = ["ReconcilerWatchLagging", "ReconcilerWatcherDown", "ReconcilerChangesSlow"]


def watch_scenarios(readings: dict[str, Exposition]) -> list[dict[str, Any]]:
    """The watch's alerts over its own series (the watch's registry alone: the other
    alerts, which read the run log's series, are the other stories')."""
    fast, lagging, slow, down = (readings[k] for k in ("fast", "lagging", "slow", "down"))
    return [
        {
            "name": "changes reconciled within seconds raise nothing",
            "interval": "1m",
            "input_series": input_series([(fast, 70)], instance="serve"),
            "alert_rule_test": quiet("10m", "60m", alerts=WATCH_ALERTS),
        },
        {
            "name": "a change held up for minutes by a busy lease",
            "interval": "1m",
            "input_series": input_series([(fast, 10), (lagging, 20)], instance="serve"),
            "alert_rule_test": [
                *quiet("12m", alerts=["ReconcilerWatchLagging"]),
                {
                    "eval_time": "20m",
                    "alertname": "ReconcilerWatchLagging",
                    "exp_alerts": fires("serve", "warning", source="hb"),
                },
            ],
        },
        {
            "name": "a change that reached the served set minutes late",
            "interval": "1m",
            "input_series": input_series([(fast, 10), (slow, 60)], instance="serve"),
            "alert_rule_test": [
                *quiet("5m", alerts=["ReconcilerChangesSlow"]),
                {
                    "eval_time": "30m",
                    "alertname": "ReconcilerChangesSlow",
                    "exp_alerts": fires("serve", "warning", source="hb"),
                },
                *quiet("75m", alerts=["ReconcilerChangesSlow"]),
            ],
        },
        {
            "name": "a vault that cannot be watched",
            "interval": "1m",
            "input_series": input_series([(slow, 5), (down, 30)], instance="serve"),
            "alert_rule_test": [
                *quiet("10m", alerts=["ReconcilerWatcherDown"]),
                {
                    "eval_time": "20m",
                    "alertname": "ReconcilerWatcherDown",
                    "exp_alerts": fires("serve", "warning", source="hb"),
                },
            ],
        },
    ]


def test_rules_are_valid() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERT_NAMES)} rules found" in result.stdout


def test_rules_over_the_products_series(
    tmp_path: Path,
    cron_readings: dict[str, Exposition],
    serve_readings: dict[str, Exposition],
    outage_readings: dict[str, Exposition],
    watch_readings: dict[str, Exposition],
) -> None:
    tests = scenarios(cron_readings, serve_readings["ok"], outage_readings)
    tests += watch_scenarios(watch_readings)
    # Every alert fires in some story.
    firing = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert firing == set(ALERT_NAMES)
    result = run_promtool(tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_two_reconciliation_jobs_the_rule_watches(
    cron_readings: dict[str, Exposition], serve_readings: dict[str, Exposition]
) -> None:
    """A cron deployment's ``run`` and serve's ``full`` job: the jobs the first two stories
    above watch, as the product names them."""
    assert cron_readings["ok"].labels_of("reconciler_last_success_timestamp_seconds") == [
        {"reconciler_job": "run"}
    ]
    assert {"reconciler_job": "full"} in serve_readings["ok"].labels_of(
        "reconciler_last_success_timestamp_seconds"
    )


def test_every_alert_has_summary_description_and_runbook() -> None:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    for rule in rules:
        assert {"summary", "description", "runbook"} <= set(rule["annotations"]), rule["alert"]
        assert "`" in rule["annotations"]["runbook"], f"{rule['alert']}: runbook names no command"


def test_a_table_outage_leaves_only_the_readable_gauge_to_alert_on(
    outage_readings: dict[str, Exposition],
) -> None:
    """Why the table-outage rule exists: while the database is gone, serve exports no run
    timestamps (the other rules read those) and says ``run_log_readable 0``."""
    down = outage_readings["down"]
    assert down.value("reconciler_run_log_readable") == 0.0
    assert down.labels_of("reconciler_last_success_timestamp_seconds") == []
    assert outage_readings["ok"].value("reconciler_run_log_readable") == 1.0


def test_jobs_that_fail_during_a_table_outage_are_counted(
    tmp_path: Path, outage_readings: dict[str, Exposition]
) -> None:
    """Issue 24: a job that failed because its document table was gone was counted nowhere
    (the run log could not record it), so ``reconciler_run_failures_total`` stood still and
    ReconcilerRunsFailing could never fire. serve counts it itself: over the series a real
    serve exported during the outage, the counter rises while the table is unreadable."""
    down, failed = outage_readings["down"], outage_readings["failed"]
    assert failed.value("reconciler_run_log_readable") == 0.0  # the table still gone
    before = down.value("reconciler_run_failures_total", reconciler_job="dates") or 0.0
    after = failed.value("reconciler_run_failures_total", reconciler_job="dates")
    assert after is not None
    assert after > before
    selector = 'reconciler_run_failures_total{reconciler_job="dates"}'
    series = input_series([(outage_readings["ok"], 10), (down, 10), (failed, 20)], instance="serve")
    sample = {"labels": '{instance="serve", reconciler_job="dates"}', "value": after}
    result = run_promtool(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": f"{selector} > {before}", "eval_time": "15m", "exp_samples": []},
                    {
                        "expr": f"max_over_time({selector}[5m])",
                        "eval_time": "35m",
                        "exp_samples": [sample],
                    },
                ],
            }
        ],
    )
    assert result.returncode == 0, result.stdout + result.stderr
