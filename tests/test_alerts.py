"""The shipped Prometheus alert rules: valid, and behaving as their unit tests say (promtool)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ALERTS = Path(__file__).resolve().parents[1] / "config" / "alerts"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is needed (Debian package 'prometheus'; .ci/run installs it)")
    return path


def test_rules_are_valid() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", str(ALERTS / "reconciler.rules.yml")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 9 rules found" in result.stdout


def test_rules_pass_their_unit_tests() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", "reconciler.rules.test.yml"],
        cwd=ALERTS,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_summary_description_and_runbook() -> None:
    import yaml  # noqa: PLC0415

    rules = yaml.safe_load((ALERTS / "reconciler.rules.yml").read_text())["groups"][0]["rules"]
    tested = (ALERTS / "reconciler.rules.test.yml").read_text()
    for rule in rules:
        assert {"summary", "description", "runbook"} <= set(rule["annotations"]), rule["alert"]
        assert "`" in rule["annotations"]["runbook"], f"{rule['alert']}: runbook names no command"
        assert f"alertname: {rule['alert']}" in tested, f"{rule['alert']} has no promtool test"
