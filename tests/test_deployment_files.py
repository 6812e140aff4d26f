"""The deployment files shipped in config/deploy are well-formed and agree with the program:
the commands they run exist, the sharded Job covers every partition, the dashboard queries
metrics the program exports."""

from __future__ import annotations

import configparser
import json
import re
import shlex
from pathlib import Path

import yaml
from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.cli import cli
from reconciler.metrics import build_registry
from reconciler.stores.sql import SqlDocumentTable

DEPLOY = Path(__file__).resolve().parents[1] / "config" / "deploy"
ROOT = Path(__file__).resolve().parents[1]


def exported(tmp_path: Path) -> set[str]:
    """Every sample name the program exposes, read off a real registry over a real table (a
    counter's ``_total``, a histogram's ``_bucket``...): never a hand-kept list."""
    table = SqlDocumentTable.from_url(f"sqlite:///{tmp_path / 'metrics.db'}")
    table.ensure_schema(create=True)
    try:
        for status in ("succeeded", "failed"):  # per-job series appear once a job has run
            run_id = table.start_run(mode="run", actor="schedule", job="full")
            table.finish_run(run_id, status=status)
        registry, live = build_registry(table.metrics_snapshot)
        live.observe(timings={"family": 0.1}, total=0.2)
        live.lease_held.labels(shard="0/1").set(1)
        live.lease_skips.labels(shard="0/1").inc()
        text = generate_latest(registry).decode()
    finally:
        table.close()
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    } | {family.name for family in text_string_to_metric_families(text)}


def cli_accepts(args: list[str]) -> None:
    """The argument list parses as a reconciler command (checked through --help)."""
    flags = [a for a in args if not a.startswith("$")]
    result = CliRunner().invoke(cli, [*flags, "--help"])
    assert result.exit_code == 0, (args, result.output)


def test_crontab_runs_a_real_command() -> None:
    lines = [
        line
        for line in (DEPLOY / "crontab").read_text().splitlines()
        if line and not line.startswith("#") and "=" not in line.split()[0]
    ]
    assert len(lines) == 1
    fields = shlex.split(lines[0].split(">>")[0])
    assert fields[:5] == ["0", "2", "*", "*", "*"]
    assert fields[5].endswith("/reconciler")
    cli_accepts(fields[6:])


def test_systemd_units() -> None:
    units = {}
    for name in ("reconciler.service", "reconciler-run.service", "reconciler-run.timer"):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read(DEPLOY / "systemd" / name)
        units[name] = parser
    serve = units["reconciler.service"]["Service"]
    assert serve["KillSignal"] == "SIGTERM"
    assert serve["User"] == "reconciler"
    cli_accepts(shlex.split(serve["ExecStart"])[1:])
    assert shlex.split(serve["ExecStart"])[-1] == "serve"
    oneshot = units["reconciler-run.service"]["Service"]
    assert oneshot["Type"] == "oneshot"
    assert shlex.split(oneshot["ExecStart"])[-1] == "run"
    assert units["reconciler-run.timer"]["Timer"]["OnCalendar"].endswith("UTC")


def load(name: str) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((DEPLOY / "kubernetes" / name).read_text())  # type: ignore[no-any-return]


def test_kubernetes_manifests_mount_config_and_secrets(tmp_path: Path) -> None:
    config = load("configmap.yaml")
    toml_text = config["data"]["reconciler.toml"]
    assert "api_key_env" in toml_text
    assert "CHANGE-ME" not in toml_text
    from reconciler.settings import load_settings  # noqa: PLC0415

    path = tmp_path / "reconciler.toml"
    path.write_text(toml_text)
    settings = load_settings(path, environ={"DATABASE_URL": "postgresql+psycopg://x@y/z"})
    assert settings.index.url
    assert settings.table.url_env == "DATABASE_URL"
    for name in ("cronjob.yaml", "indexed-job.yaml", "deployment.yaml"):
        manifest = load(name)
        spec = manifest["spec"]
        pod = (spec.get("jobTemplate", {}).get("spec", spec))["template"]["spec"]
        container = pod["containers"][0]
        assert container["envFrom"][0]["secretRef"]["name"] == "reconciler-secrets"
        assert pod["volumes"][0]["configMap"]["name"] == "reconciler-config"
        assert pod["securityContext"]["runAsNonRoot"] is True
    assert load("cronjob.yaml")["spec"]["concurrencyPolicy"] == "Forbid"
    cli_accepts(load("deployment.yaml")["spec"]["template"]["spec"]["containers"][0]["args"])


def test_indexed_job_covers_every_shard() -> None:
    job = load("indexed-job.yaml")["spec"]
    assert job["completionMode"] == "Indexed"
    script = job["template"]["spec"]["containers"][0]["args"][0]
    match = re.search(r'--shard "\$\{JOB_COMPLETION_INDEX\}/(\d+)"', script)
    assert match, script
    assert int(match.group(1)) == job["completions"] == job["parallelism"]
    cli_accepts(["run", "--shard", f"0/{job['completions']}"])


def test_dashboard_queries_exported_metrics(tmp_path: Path) -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "reconciler-dashboard.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"reconciler_[a-z_]+", target["expr"])
    } - {"reconciler_job"}  # a label, not a metric
    assert used
    names = exported(tmp_path)
    assert used <= names, used - names


def test_alert_rules_use_exported_metrics(tmp_path: Path) -> None:
    text = (ROOT / "config" / "alerts" / "reconciler.rules.yml").read_text()
    rules = yaml.safe_load(text)["groups"][0]["rules"]
    used = {name for rule in rules for name in re.findall(r"reconciler_[a-z_]+", rule["expr"])}
    used -= {"reconciler_job"}  # a label, not a metric
    names = exported(tmp_path)
    assert used <= names, used - names
