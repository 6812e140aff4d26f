"""The deployment files shipped in config/deploy are well-formed and agree with the program:
the commands they run exist, the sharded Job covers every partition, the dashboard and the alert
rules query metrics, labels and label values the product really exports."""

from __future__ import annotations

import configparser
import json
import re
import shlex
from pathlib import Path

import yaml
from click.testing import CliRunner
from exposition_kit import Exposition, exposition_names

from reconciler.cli import cli

DEPLOY = Path(__file__).resolve().parents[2] / "config" / "deploy"
ROOT = Path(__file__).resolve().parents[2]


def real_series(
    cron: dict[str, Exposition], serve: dict[str, Exposition]
) -> dict[str, set[tuple[str, str]]]:
    """Every sample name the product exported in this session (a cron ``run``'s textfile
    through a deployment's life and serve's ``/metrics``), with its (label, value) pairs."""
    return exposition_names(*cron.values(), *serve.values())


SELECTOR = re.compile(r"(reconciler_[a-z_]+)(?:\{([^}]*)\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
#: Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"instance", "job"}


def unknown_in(expr: str, series: dict[str, set[tuple[str, str]]]) -> list[str]:
    """What a PromQL expression names that the product does not export: a metric, a label of
    that metric, a label value it matches (each alternative of a regex), a grouping label."""
    problems = []
    names = []
    for name, matchers in SELECTOR.findall(expr):
        if name == "reconciler_job":  # a label, not a metric
            continue
        names.append(name)
        if name not in series:
            problems.append(f"metric {name}")
            continue
        labels = {label for label, _ in series[name]}
        for label, op, value in MATCHER.findall(matchers):
            if label not in labels:
                problems.append(f"label {label} of {name}")
                continue
            wanted = value.split("|") if op == "=~" else [value]
            problems += [
                f"{name}{{{label}={v!r}}}" for v in wanted if (label, v) not in series[name]
            ]
    for grouping in GROUPING.findall(expr):
        for label in filter(None, (part.strip() for part in grouping.split(","))):
            if label not in TARGET_LABELS and not any(
                label in {lab for lab, _ in series.get(n, ())} for n in names
            ):
                problems.append(f"grouping label {label}")
    return problems


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


def test_dashboard_queries_what_the_product_exports(
    cron_readings: dict[str, Exposition], serve_readings: dict[str, Exposition]
) -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "reconciler-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert exprs
    series = real_series(cron_readings, serve_readings)
    assert {expr: unknown_in(expr, series) for expr in exprs if unknown_in(expr, series)} == {}


def test_alert_rules_use_what_the_product_exports(
    cron_readings: dict[str, Exposition], serve_readings: dict[str, Exposition]
) -> None:
    text = (ROOT / "config" / "alerts" / "reconciler.rules.yml").read_text()
    exprs = [rule["expr"] for rule in yaml.safe_load(text)["groups"][0]["rules"]]
    series = real_series(cron_readings, serve_readings)
    assert {expr: unknown_in(expr, series) for expr in exprs if unknown_in(expr, series)} == {}


def test_the_checker_catches_a_renamed_job() -> None:
    series = {"reconciler_last_success_timestamp_seconds": {("reconciler_job", "run")}}
    expr = 'max(reconciler_last_success_timestamp_seconds{reconciler_job=~"full|cron"})'
    assert unknown_in(expr, series) == [
        "reconciler_last_success_timestamp_seconds{reconciler_job='full'}",
        "reconciler_last_success_timestamp_seconds{reconciler_job='cron'}",
    ]
    assert unknown_in("sum by (shard) (reconciler_last_success_timestamp_seconds)", series) == [
        "grouping label shard"
    ]
