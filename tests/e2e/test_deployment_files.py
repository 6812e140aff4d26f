"""The deployment files shipped in config/deploy are well-formed and agree with the program:
the commands they run exist, the sharded Job covers every partition, the dashboard and the alert
rules query metrics, labels and label values the product really exports."""

from __future__ import annotations

import configparser
import copy
import importlib.util
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
    cron: dict[str, Exposition], serve: dict[str, Exposition], watch: dict[str, Exposition]
) -> dict[str, set[tuple[str, str]]]:
    """Every sample name the product exported in this session (a cron ``run``'s textfile
    through a deployment's life, serve's ``/metrics`` and its watch's), with its (label,
    value) pairs."""
    return exposition_names(*cron.values(), *serve.values(), *watch.values())


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
    cron_readings: dict[str, Exposition],
    serve_readings: dict[str, Exposition],
    watch_readings: dict[str, Exposition],
) -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "reconciler-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert exprs
    series = real_series(cron_readings, serve_readings, watch_readings)
    assert {expr: unknown_in(expr, series) for expr in exprs if unknown_in(expr, series)} == {}


def test_alert_rules_use_what_the_product_exports(
    cron_readings: dict[str, Exposition],
    serve_readings: dict[str, Exposition],
    watch_readings: dict[str, Exposition],
) -> None:
    text = (ROOT / "config" / "alerts" / "reconciler.rules.yml").read_text()
    exprs = [rule["expr"] for rule in yaml.safe_load(text)["groups"][0]["rules"]]
    series = real_series(cron_readings, serve_readings, watch_readings)
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


# -- Kubernetes' "restricted" Pod Security profile -----------------------------------------------
# No validator of the Pod Security Standards installs offline (kube-score, kubeconform and
# polaris are Go binaries; checkov's Python package needs its policy downloads), so the profile's
# rules are written out here, from https://kubernetes.io/docs/concepts/security/pod-security-standards/
# (baseline and restricted, v1.30+), and the checker is tested on a pod that breaks each one.

RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SELINUX_TYPES = {None, "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def restricted_violations(pod: dict) -> list[str]:  # type: ignore[type-arg]
    """Every rule of the "restricted" profile (baseline's included) that ``pod`` (a PodSpec)
    breaks, in words."""
    found = []
    pod_sc = pod.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(f"{key} is true")
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: type {sorted(kinds - RESTRICTED_VOLUMES)}")
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl['name']}")
    containers = [
        c
        for key in ("initContainers", "containers", "ephemeralContainers")
        for c in pod.get(key) or []
    ]
    for c in containers:
        sc, name = c.get("securityContext") or {}, f"container {c['name']}"
        if sc.get("privileged"):
            found.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(
                f"{name}: adds capabilities {sorted(set(caps['add']) - {'NET_BIND_SERVICE'})}"
            )
        if any(p.get("hostPort") for p in c.get("ports") or []):
            found.append(f"{name}: a hostPort")
        if sc.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount {sc['procMount']}")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            found.append(f"{name}: runAsNonRoot is not true (pod or container)")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile is {seccomp or 'unset'}, not RuntimeDefault")
        selinux = sc.get("seLinuxOptions") or pod_sc.get("seLinuxOptions") or {}
        if selinux.get("type") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            found.append(f"{name}: seLinuxOptions {selinux}")
        apparmor = (sc.get("appArmorProfile") or pod_sc.get("appArmorProfile") or {}).get("type")
        if apparmor not in (None, "RuntimeDefault", "Localhost"):
            found.append(f"{name}: appArmorProfile {apparmor}")
    return found


def pod_specs() -> dict[str, dict]:  # type: ignore[type-arg]
    """The PodSpec of every manifest that makes pods."""
    found = {}
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            spec = (doc or {}).get("spec") or {}
            template = spec.get("jobTemplate", {}).get("spec", spec).get("template")
            if template:
                found[path.name] = template["spec"]
    return found


def test_every_pod_passes_the_restricted_pod_security_profile() -> None:
    pods = pod_specs()
    assert set(pods) == {"deployment.yaml", "cronjob.yaml", "indexed-job.yaml"}
    assert {name: restricted_violations(pod) for name, pod in pods.items()} == {
        name: [] for name in pods
    }


def test_the_restricted_checker_names_each_rule_a_pod_breaks() -> None:
    bad = {
        "hostNetwork": True,
        "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "c",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {
                    "privileged": True,
                    "runAsUser": 0,
                    "capabilities": {"add": ["SYS_ADMIN"]},
                    "seccompProfile": {"type": "Unconfined"},
                    "procMount": "Unmasked",
                },
            }
        ],
    }
    assert len(restricted_violations(bad)) == 12
    # the shipped pods, loosened one rule at a time, each fail
    pod = pod_specs()["deployment.yaml"]
    for key in ("allowPrivilegeEscalation", "capabilities", "runAsNonRoot"):
        loose = copy.deepcopy(pod)
        del loose["containers"][0]["securityContext"][key]
        if key == "runAsNonRoot":
            del loose["securityContext"][key]
        assert restricted_violations(loose), key
    loose = copy.deepcopy(pod)
    del loose["securityContext"]["seccompProfile"]
    assert restricted_violations(loose) == [
        "container reconciler: seccompProfile is unset, not RuntimeDefault"
    ]


def test_the_vault_the_config_reads_is_mounted_and_explained() -> None:
    toml_text = load("configmap.yaml")["data"]["reconciler.toml"]
    vault = re.search(r'type = "vault"\s*\npath = "([^"]+)"', toml_text)
    assert vault, toml_text
    for name, pod in pod_specs().items():
        mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert vault.group(1) in mounts, name
        assert mounts[vault.group(1)]["readOnly"] is True
        volume = next(v for v in pod["volumes"] if v["name"] == mounts[vault.group(1)]["name"])
        assert volume["persistentVolumeClaim"]["readOnly"] is True
        text = (DEPLOY / "kubernetes" / name).read_text()
        assert "must be mounted here, or every run reads nothing and exits 4" in text, name


def test_the_operator_manifests_are_generated_from_the_one_rules_file() -> None:
    spec = importlib.util.spec_from_file_location(
        "monitoring_manifests", ROOT / "scripts" / "monitoring_manifests.py"
    )
    assert spec is not None
    assert spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    for path, text in generator.rendered().items():
        assert path.read_text() == text, f"{path.name}: run scripts/monitoring_manifests.py"
    rules = yaml.safe_load((ROOT / "config" / "alerts" / "reconciler.rules.yml").read_text())
    [rule] = yaml.safe_load_all((DEPLOY / "kubernetes" / "prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == rules["groups"]
    service, monitor = yaml.safe_load_all(
        (DEPLOY / "kubernetes" / "servicemonitor.yaml").read_text()
    )
    deployment = load("deployment.yaml")["spec"]["template"]
    assert service["spec"]["selector"].items() <= deployment["metadata"]["labels"].items()
    [port] = deployment["spec"]["containers"][0]["ports"]
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["metadata"]["labels"] == rule["metadata"]["labels"]


# -- the image (no Docker engine here: the Dockerfile is read, not built) -------------------------


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined: (INSTRUCTION, arguments)."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_image_is_pinned_runs_as_non_root_checks_its_health_and_listens_outside() -> None:
    steps = dockerfile()
    args = dict(a.split("=", 1) for kind, a in steps if kind == "ARG" and "=" in a)
    bases = [a.split()[0] for kind, a in steps if kind == "FROM"]
    assert len(bases) == 2
    for base in bases:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        assert re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}", image), image
    users = [a for kind, a in steps if kind == "USER"]
    assert users
    assert users[-1].split(":")[0] not in ("0", "root")
    assert int(users[-1].split(":")[0]) == 10001
    [health] = [a for kind, a in steps if kind == "HEALTHCHECK"]
    assert "/healthz" in health
    assert "CMD" in health
    env = dict(pair.split("=", 1) for kind, a in steps if kind == "ENV" for pair in shlex.split(a))
    [exposed] = [a for kind, a in steps if kind == "EXPOSE"]
    from reconciler.settings import load_settings  # noqa: PLC0415

    settings = load_settings(
        ROOT / "reconciler" / "settings" / "reconciler.example.toml",
        environ={"RECONCILER_METRICS__LISTEN": env["RECONCILER_METRICS__LISTEN"]},
    )
    host, port = settings.metrics.listen.rsplit(":", 1)
    assert (host, port) == ("0.0.0.0", exposed)
