"""End to end with a real Prometheus on loopback: it scrapes `reconciler serve` over a drifted
embedded corpus, the live-siblings alert fires, an apply repairs the drift, the alert resolves."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from acceptance_kit import Deployment, day
from exposition_kit import free_port

RULES = Path(__file__).resolve().parents[2] / "config" / "alerts" / "reconciler.rules.yml"


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_live_siblings_alert_fires_and_resolves(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail(
            "prometheus is needed: run scripts/install-system-packages (Debian 'prometheus')"
        )
    dep = Deployment(tmp_path)
    # Two versions both declared current and both started, the second ingested in a family of
    # its own and then moved into the first's: live siblings. Superseding the first is a merge
    # (what takes over joins from another family), which the guard weighs as a hide; a
    # handover within one family would be a relabel, written at once, and no alert would fire.
    dep.note(
        "policy-v1",
        id="policy-v1",
        family="policy",
        version="1",
        status="current",
        effective_from=day(-300),
    )
    dep.note(
        "policy-v2",
        id="policy-v2",
        family="policy-draft",
        version="2",
        status="current",
        effective_from=day(-30),
    )
    dep.note("other", id="other", status="current", effective_from=day(-500))
    dep.init_ingest()
    dep.note(
        "policy-v2",
        id="policy-v2",
        family="policy",
        version="2",
        status="current",
        effective_from=day(-30),
    )
    metrics_port, prometheus_port = free_port(), free_port()
    # A strict guard with no floor: serve's run is refused, so the drift stays outstanding.
    dep.configure(fraction=0.01)
    dep.config.write_text(
        dep.config.read_text()
        + f'floor = 0\n[metrics]\nlisten = "127.0.0.1:{metrics_port}"\n'
        + '[schedule]\nfull = "0 2 1 1 *"\nttl = "0 3 1 1 *"\ndates = "0 4 1 1 *"\n'
    )
    with (tmp_path / "serve.log").open("wb") as serve_log:
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "reconciler.cli",
                    "--config",
                    str(dep.config),
                    "--log-level",
                    "info",
                    "serve",
                    "--run-now",
                ],
                stdout=serve_log,
                stderr=subprocess.STDOUT,
            )
        )
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        "scrape_configs:\n  - job_name: reconciler\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    with (tmp_path / "prometheus.log").open("wb") as prom_log:
        processes.append(
            subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prometheus_port}",
                ],
                stdout=prom_log,
                stderr=subprocess.STDOUT,
            )
        )
    api = f"http://127.0.0.1:{prometheus_port}/api/v1"

    def alert_state() -> str | None:
        try:
            alerts = requests.get(f"{api}/alerts", timeout=2).json()["data"]["alerts"]
        except (requests.RequestException, ValueError, KeyError):
            return None
        states = [
            a["state"] for a in alerts if a["labels"]["alertname"] == "ReconcilerLiveSiblings"
        ]
        return states[0] if states else "inactive"

    def refused_run_recorded() -> bool:
        try:
            text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2).text
        except requests.RequestException:
            return False
        return "reconciler_guard_refusals_total 1.0" in text

    wait_for("serve's first run to be refused by the guard", refused_run_recorded)
    wait_for("the live-siblings alert to fire", lambda: alert_state() == "firing")

    # Repair by hand (the guard is overridden, audited); serve holds no lease between jobs.
    result = dep.cli("apply", "--force")
    assert result.exit_code == 0, result.output
    wait_for("the live-siblings alert to resolve", lambda: alert_state() == "inactive")
    text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2).text
    assert "reconciler_live_siblings 0.0" in text
