"""`reconciler demo` end to end in a temporary folder, its measured numbers asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from reconciler.app.demo import QUESTIONS
from reconciler.cli import cli


def test_demo_tells_the_story_with_real_numbers(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["--format", "json", "demo", "--dir", str(target)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    with_stale = sum(1 for q in QUESTIONS if q.stale)
    assert data["before"]["questions"] == len(QUESTIONS)
    assert data["before"]["stale_first"] > 0  # the problem is real before reconciliation
    assert data["before"]["stale_in_top5"] > 0
    assert data["after"]["stale_in_top5"] == 0  # stale cited: 0
    assert data["after"]["stale_first"] == 0
    assert data["after"]["current_found"] == len(QUESTIONS)  # every current document found
    assert data["applied"]["table"] == data["plan"]["table"] > 0
    assert data["findings_after"] == 0
    assert with_stale == 6
    assert (target / "reconciler.toml").is_file()
    # The folder is a deployment to go on with.
    status = CliRunner().invoke(cli, ["--config", str(target / "reconciler.toml"), "check"])
    assert status.exit_code == 0, status.output


def test_demo_refuses_a_folder_in_use(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "not empty" in result.output
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_demo_prints_the_story(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "BEFORE reconciliation" in result.output
    assert "stale version cited: 0" in result.output


def test_the_closing_command_runs_as_printed_without_an_activated_venv(tmp_path: Path) -> None:
    """`.venv/bin/reconciler demo` from a shell whose PATH has no venv: the last line it prints
    is a command that shell runs as printed (it printed `reconciler …`, which was not found).
    """
    script = Path(sys.executable).with_name("reconciler")
    env = {**os.environ, "PATH": "/usr/bin:/bin", "RECONCILER_CONFIG": ""}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [str(script), "demo", "--dir", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().splitlines()[-1].strip()
    config = tmp_path / "demo" / "reconciler.toml"
    assert printed == f"{script} --config {config} check"
    again = subprocess.run(
        printed,
        shell=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "the three stores agree" in again.stdout
