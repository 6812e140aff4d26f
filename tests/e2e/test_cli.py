"""The command line as people and cron meet it: where options go, what each exit code means,
what happens without a config, run ids by prefix, and what importing the CLI costs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment
from click.testing import CliRunner, Result

from reconciler.cli import EXIT_CODES, EXIT_PARTIAL, EXIT_USAGE, cli
from reconciler.settings import load_settings


@pytest.fixture
def deploy(tmp_path: Path) -> Deployment:
    """A small vault (two families), initialised and ingested."""
    deployment = Deployment(tmp_path / "dep")
    deployment.family("expenses", 2)
    deployment.family("travel", 2)
    deployment.init_ingest()
    return deployment


@pytest.fixture
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder and no RECONCILER_* variable that names a config."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    for name in list(os.environ):
        if name.startswith("RECONCILER_") and name != "RECONCILER_TEST_PG":
            monkeypatch.delenv(name)
    return empty


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


# -- exit codes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["check", "--no-such-option"], "No such option"),
        (["check", "--check", "bogus"], "'bogus' is not one of"),
        (["plan", "--now", "yesterday"], "not an ISO-8601 instant"),
        (["run", "--shard", "3/2"], "--shard"),
        (["apply", "--shard", "x"], "--shard"),
        (["status", "--format", "xml"], "'xml' is not one of"),
        (["--format", "xml", "status"], "'xml' is not one of"),
        (["no-such-command"], "No such command"),
        (["repair"], "exactly one of --family or --doc"),
        (["repair", "--doc", "a", "--family", "b"], "exactly one of --family or --doc"),
        (["rollback"], "Missing argument"),
        (["audit", "show", "--limit", "many"], "'many' is not a valid integer"),
    ],
)
def test_usage_errors_exit_64_not_the_drift_code(deploy: Deployment, args: list[str], says: str):
    result = deploy.cli(*args)
    assert result.exit_code == EXIT_USAGE == 64, result.output
    assert says in result.output
    assert {row["mode"] for row in deploy.dump()["runs"].values()} == {"ingest"}  # nothing ran


def test_drift_is_still_2_and_a_partial_run_is_4(deploy: Deployment) -> None:
    _drift(deploy)
    assert deploy.cli("check").exit_code == 2
    assert deploy.cli("run").exit_code == 0
    shutil.rmtree(deploy.vault)  # the source is now unreadable
    code, data = deploy.json("run")
    assert code == EXIT_PARTIAL == 4
    assert data["status"] == "partial"
    assert data["unread_sources"] == ["hb"]
    code, data = deploy.json("apply")
    assert (code, data["status"]) == (4, "partial")
    runs = sorted(deploy.dump()["runs"].values(), key=lambda r: r["started_at"])
    assert [(r["mode"], r["status"]) for r in runs[-3:]] == [
        ("run", "succeeded"),
        ("run", "partial"),
        ("apply", "partial"),
    ]
    result = deploy.cli("run")
    assert result.exit_code == 4
    assert "could not be read" in result.output
    # a partial run is not a success: the last success stays with the run before the outage
    with deploy.stores() as opened:
        jobs = opened.table.metrics_snapshot()["jobs"]
    succeeded = runs[-3]
    assert jobs["run"]["last_success"] == succeeded["finished_at"]
    assert jobs["run"]["last_ok"] is False
    assert jobs["run"]["failures"] == 0


def test_check_only_the_ttl_is_not_partial(deploy: Deployment) -> None:
    shutil.rmtree(deploy.vault)  # not read at all: the ttl check needs no source
    code, data = deploy.json("run", "--check", "ttl")
    assert (code, data["status"], data["unread_sources"]) == (0, "succeeded", [])


def test_help_documents_the_exit_codes_options_after_the_verb_and_completion() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for code, _meaning in EXIT_CODES:
        assert f"  {code:>3}  " in result.output
    assert "status --format json" in result.output
    assert "_RECONCILER_COMPLETE=bash_source reconciler" in result.output
    assert "--format" in invoke("status", "--help").output


# -- global options before and after the verb ---------------------------------------------------


def test_format_and_config_before_or_after_the_verb(deploy: Deployment) -> None:
    config = str(deploy.config)
    outputs = []
    for args in (
        ["--config", config, "--format", "json", "status"],
        ["--config", config, "status", "--format", "json"],
        ["status", "--config", config, "--format", "json"],
        ["--format", "table", "--config", config, "status", "--format", "json"],  # after wins
    ):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
        outputs.append(json.loads(result.stdout))
    assert all(o == outputs[0] for o in outputs)
    assert outputs[0]["documents"] == 4
    table = invoke("--format", "json", "--config", config, "status", "--format", "table")
    assert table.stdout.startswith("document table")


def test_global_options_after_a_subcommand_of_a_group(deploy: Deployment) -> None:
    _applied(deploy)
    result = invoke("audit", "show", "--config", str(deploy.config), "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["entries"]
    result = invoke("audit", "--format", "json", "verify", "--config", str(deploy.config))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True


def test_log_options_after_the_verb(deploy: Deployment) -> None:
    result = deploy.cli("check", "--log-level", "info", "--log-format", "json")
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert any("check" in line["message"] for line in lines)


# -- no config is not a deployment -------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["init"], ["ingest"], ["status"], ["check"], ["run"], ["audit", "verify"]]
)
def test_without_a_config_commands_refuse_in_one_line(no_config: Path, command: list[str]):
    result = invoke(*command)
    assert result.exit_code == EXIT_USAGE, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "reconciler demo" in lines[0]
    assert "reconciler config example > reconciler.toml" in lines[0]
    assert "config/" not in lines[0]  # a pip user has no checkout
    assert list(no_config.iterdir()) == []  # no reconciler.db, no qdrant/


@pytest.mark.parametrize(
    ("command", "codes"),
    [
        (["declare"], [0, 1, 2, 3, 4, 64]),
        (["ingest"], [0, 1, 2, 3, 64]),
        (["rekey"], [0, 1, 2, 64]),
        (["vocabulary", "check"], [0, 1, 2, 64]),
        (["config", "example"], [0, 64]),
    ],
)
def test_help_lists_every_exit_code_the_command_uses(command: list[str], codes: list[int]) -> None:
    said = invoke(*command, "--help").output
    listed = said.split("Exit codes:", 1)[1]
    found = [int(n) for n in re.findall(r"(?m)^\s+(\d+)  ", listed)]
    assert found == codes, said


def test_the_example_config_ships_in_the_package_and_loads(no_config: Path) -> None:
    result = invoke("config", "example")
    assert result.exit_code == 0
    (no_config / "reconciler.toml").write_text(result.output, encoding="utf-8")
    assert load_settings(no_config / "reconciler.toml").sources
    (no_config / "reconciler.toml").unlink()


@pytest.mark.parametrize(
    ("args", "code", "kind"),
    [
        (["status"], EXIT_USAGE, "no_config"),
        (["--config", "missing.toml", "status"], 1, "invalid_configuration"),
        (["rollback", "--no-such-option"], EXIT_USAGE, "usage"),
    ],
)
def test_errors_are_one_json_object_under_format_json(
    no_config: Path, args: list[str], code: int, kind: str
) -> None:
    result = invoke("--format", "json", *args)
    assert result.exit_code == code, result.output
    error = json.loads(result.stdout)
    assert error["error"] == kind
    assert error["exit_code"] == code
    assert error["message"]
    assert list(no_config.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--format", "json", "--check", "bogus"],
        ["rollback", "--format=json"],
        ["plans", "--no-such-option", "--format", "json"],
        ["--format", "table", "rollback", "--format", "json"],
    ],
)
def test_a_usage_error_is_json_when_format_json_follows_the_command(
    no_config: Path, args: list[str]
) -> None:
    """``--format`` is accepted after the command, and a script writes it there
    (``reconciler check --format json ...``): a usage error was the text usage on stderr, with
    nothing on stdout, unless ``--format json`` came before the command."""
    result = invoke(*args)
    assert result.exit_code == EXIT_USAGE, result.output
    error = json.loads(result.stdout)
    assert (error["error"], error["exit_code"]) == ("usage", EXIT_USAGE)
    assert error["message"]


def test_without_a_config_help_version_and_connectors_still_work(no_config: Path) -> None:
    for args in (["--help"], ["--version"], ["connectors"], ["check", "--help"]):
        assert invoke(*args).exit_code == 0, args
    assert list(no_config.iterdir()) == []


def test_a_config_file_in_the_folder_is_found(no_config: Path) -> None:
    (no_config / "reconciler.toml").write_text('[table]\nurl = "sqlite:///t.db"\n')
    assert invoke("init").exit_code == 0
    assert (no_config / "t.db").exists()


def test_a_missing_collection_says_what_to_do_not_that_a_store_is_down(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path / "dep")
    deployment.note("a", id="a", status="current")
    assert deployment.cli("init").exit_code == 0
    result = deployment.cli("check")
    assert result.exit_code == 1
    assert "does not exist" in result.output
    assert "reconciler ingest" in result.output
    assert "store is running" not in result.output


# -- run ids -------------------------------------------------------------------------------------


def _drift(deploy: Deployment) -> None:
    """Old chunks made servable again by another tool (a payload drift apply repairs)."""
    points = deploy.points()
    deploy.set_payload(sorted(points.of("hb:expenses-v1")), {"version_state": "current"})


def _applied(deploy: Deployment) -> str:
    _drift(deploy)
    code, data = deploy.json("apply")
    assert code == 0, data
    return str(data["run_id"])


def test_audit_and_rollback_take_the_8_characters_audit_show_prints(deploy: Deployment) -> None:
    run_id = _applied(deploy)
    shown = deploy.cli("audit", "show")
    assert run_id[:8] in shown.output
    code, full = deploy.json("audit", "show", "--run", run_id)
    code_short, short = deploy.json("audit", "show", "--run", run_id[:8])
    assert (code, code_short) == (0, 0)
    assert short == full
    assert full["entries"]
    code, dry = deploy.json("rollback", run_id[:8], "--dry-run")
    assert (code, dry["rolled_back"], dry["dry_run"]) == (0, run_id, True)
    code, done = deploy.json("rollback", run_id[:6])
    assert (code, done["rolled_back"]) == (0, run_id)


def test_an_ambiguous_prefix_is_a_usage_error_listing_the_runs(deploy: Deployment) -> None:
    with deploy.stores() as opened:
        for run_id in ("abc-1", "abc-2"):
            opened.table.start_run(mode="apply", actor="test", run_id=run_id)
            opened.table.finish_run(run_id, status="succeeded")
    for args in (["audit", "show", "--run", "abc"], ["rollback", "abc", "--dry-run"]):
        result = deploy.cli(*args)
        assert result.exit_code == EXIT_USAGE, result.output
        assert "abc-1" in result.output
        assert "abc-2" in result.output
    assert deploy.cli("audit", "show", "--run", "abc-2").exit_code == 0
    # a prefix is text, not a LIKE pattern: "%" and "_" match themselves only
    for pattern in ("%", "abc_"):
        assert deploy.cli("audit", "show", "--run", pattern).exit_code == 1


def test_an_unknown_run_id_is_an_error_not_an_empty_answer(deploy: Deployment) -> None:
    for args in (["audit", "show", "--run", "feedface"], ["rollback", "feedface", "--dry-run"]):
        result = deploy.cli(*args)
        assert result.exit_code == 1, result.output
        assert "no run 'feedface'" in result.output


def test_check_and_plan_print_no_run_id_and_a_manual_run_is_the_cli_s(deploy: Deployment):
    for mode in ("check", "plan"):
        code, data = deploy.json(mode)
        assert (code, data["run_id"], data["status"]) == (0, None, None)
        header = deploy.cli(mode).output.splitlines()[0]
        assert header.startswith(f"{mode} (read-only")
    code, data = deploy.json("run")
    assert code == 0
    row = deploy.dump()["runs"][data["run_id"]]
    assert (row["mode"], row["actor"], row["status"]) == ("run", "cli", "succeeded")
    assert deploy.cli("run").output.splitlines()[0].startswith("run ")
    assert "run run" not in deploy.cli("run").output


# -- start-up ----------------------------------------------------------------------------------

#: Modules the CLI must not import before a command needs them (each costs 50-700 ms).
HEAVY = (
    "qdrant_client",
    "sqlalchemy",
    "alembic",
    "apscheduler",
    "prometheus_client",
    "pydantic",
    "pydantic_settings",
    "numpy",
    "httpx",
    "requests",
    "yaml",
    "frontmatter",
    "reconciler.settings",
    "reconciler.app.operations",
    "reconciler.app.deployment",
    "reconciler.pipeline",
    "connectors.options",
)


def test_importing_the_cli_imports_no_heavy_module() -> None:
    code = (
        "import sys, json, reconciler.cli; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {list(HEAVY)!r} "
        f"or m in {list(HEAVY)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []


def test_help_and_version_import_no_heavy_module() -> None:
    code = (
        "import sys, json\n"
        "from reconciler.cli import cli\n"
        "for args in (['--help'], ['--version'], ['check', '--help']):\n"
        "    try:\n"
        "        cli.main(args, prog_name='reconciler')\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m in {list(HEAVY)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []


# -- config and source problems, said once and plainly ------------------------------------------


def test_config_problems_suggest_keys_and_list_an_unknown_connector_with_the_rest(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(
        '[table]\nurll = "x"\n[guard]\nmax_changed_fraction = 7\n'
        '[[sources]]\nname = "a"\ntype = "valt"\npathh = "v"\n'
    )
    result = invoke("--config", str(config), "status")
    assert result.exit_code == 1
    assert "table.urll: unknown key; did you mean 'url'?" in result.output
    assert "sources[0].pathh: unknown key; did you mean 'path'?" in result.output
    assert "guard.max_changed_fraction" in result.output
    assert "sources[0].type: no connector 'valt' is installed (did you mean 'vault'?)" in (
        result.output
    )


def test_a_yaml_error_is_one_short_line_naming_the_note_s_line(deploy: Deployment) -> None:
    (deploy.vault / "broken.md").write_text('---\ntitle: "unclosed\nstatus: x\n---\nbody\n')
    code, data = deploy.json("check")
    assert code == 2
    (problem,) = [f for f in data["findings"] if f["kind"] == "source_problem"]
    message = problem["actual"]["message"]
    assert message.startswith("frontmatter is not valid YAML: line ")
    assert "^" not in message
    assert "<unicode string>" not in message
    assert len(message) < 140
    result = deploy.cli("ingest")
    assert result.output.count("not valid YAML") == 1  # in the report, not again in a log line


def test_check_loads_neither_the_scheduler_nor_metrics_nor_alembic(deploy: Deployment) -> None:
    """A check needs the stores and the sources, not what serve, run or a migration need."""
    code = (
        "import sys, json\n"
        "from reconciler.cli import cli\n"
        "try:\n"
        f"    cli.main(['--config', {str(deploy.config)!r}, 'check'], prog_name='reconciler')\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "wanted = ('apscheduler', 'prometheus_client', 'alembic', 'reconciler.embedding')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in wanted\n"
        "    or m in wanted)))"
    )
    assert printed_by(code) == []


def printed_by(code: str) -> Any:
    """The last line a fresh interpreter running ``code`` prints, read as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_what_does_not_touch_qdrant_does_not_import_qdrant_client(deploy: Deployment) -> None:
    """qdrant-client is ~1 s of start-up: only its adapter imports it, when a command opens the
    index. The audit, a rollback of a run that does not exist (refused before the index is
    opened) and the Edge rendering of the default filter never load it."""
    _applied(deploy)
    config = str(deploy.config)
    code = (
        "import sys, json\n"
        "from reconciler.cli import cli\n"
        "codes = []\n"
        "for args in (['audit', 'show'], ['audit', 'verify'], ['rollback', 'feedface']):\n"
        "    try:\n"
        f"        cli.main(['--config', {config!r}, *args], prog_name='reconciler')\n"
        "    except SystemExit as exit:\n"
        "        codes.append(exit.code)\n"
        "from reconciler import default_edge_filter\n"
        "default_edge_filter()\n"
        "print(json.dumps([codes, 'qdrant_client' in sys.modules]))"
    )
    assert printed_by(code) == [[0, 0, 1], False]


def test_bootstrap_help_names_the_layout_key_the_docs_teach() -> None:
    """docs/adopting.md configures the payload layout with `[index] layout` (default,
    langchain, llamaindex); `[bootstrap] preset` is only its old name. The help named the old
    key and its old value `native` alone, so a team following `--help` wrote the retired
    spelling."""
    said = " ".join(invoke("bootstrap", "--help").output.split())
    assert "[index] layout" in said
    assert "default | langchain | llamaindex" in said


@pytest.mark.parametrize(
    "command", [["check"], ["plan"], ["apply"], ["search", "expenses"]], ids=lambda c: c[0]
)
def test_a_missing_local_index_folder_is_named_and_not_created(
    deploy: Deployment, command: list[str]
) -> None:
    """`index.path` mistyped (or the folder gone): the commands that need the collection say
    it is missing (exit 1) and leave the folder absent. Before, opening qdrant-client in local
    mode created an empty folder at the mistyped path first, so read-only `check` and `plan`
    wrote to the disk, and the next command found a folder where there was none."""
    shutil.rmtree(deploy.root / "qdrant")
    code, data = deploy.json(*command)
    assert code == 1
    assert data["error"] == "collection_missing", data
    assert not (deploy.root / "qdrant").exists()
