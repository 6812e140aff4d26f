"""The README's test command on a fresh machine: no promtool or valgrind, no PostgreSQL
running, no driver.

``scripts/install-system-packages`` installs what is missing or names it in one line; a test
session that finds no PostgreSQL starts an embedded one; a missing database driver is one line
naming what to install, not a traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-system-packages"
#: Nothing listens on port 1 of loopback.
NOWHERE = "postgresql+psycopg://postgres@127.0.0.1:1/postgres"


def readme_test_command() -> str:
    """The README's test command: the code block after "Install and run the tests"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"Install and run the tests.*?```sh\n(.*?)\n```", readme, re.DOTALL)
    assert match, "README: no test command"
    return match.group(1).strip()


def bin_dir(tmp_path: Path, *commands: str) -> Path:
    """A PATH of exactly ``bash``, this Python as ``python3``, and ``commands``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    (folder / "python3").symlink_to(sys.executable)
    for command in commands:
        found = shutil.which(command)
        if found is None:
            pytest.fail(f"{command} is needed: run scripts/install-system-packages")
        (folder / command).symlink_to(found)
    return folder


def setup_script(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(path / "bash"), str(SCRIPT)],
        env={"PATH": str(path), "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_ci_runs_the_readmes_test_command() -> None:
    command = readme_test_command()
    assert command.startswith("scripts/install-system-packages && ")
    assert command.endswith(".venv/bin/pytest -n auto")
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    # A fresh clone can run the script: git keeps it executable.
    staged = subprocess.run(
        ["git", "ls-files", "--stage", "scripts/install-system-packages"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert staged.startswith("100755 "), staged


def test_without_promtool_and_without_apt_the_script_says_what_to_install(
    tmp_path: Path,
) -> None:
    """No promtool, prometheus or valgrind on PATH and no apt-get to install them (as a user
    would be without root): one line on stderr naming the packages, exit 1, nothing else
    done."""
    result = setup_script(bin_dir(tmp_path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "missing system packages: prometheus valgrind; install them (Debian/Ubuntu, as root: "
        "apt-get install prometheus valgrind) and run this again\n"
    )


def test_without_valgrind_the_script_names_it_alone(tmp_path: Path) -> None:
    result = setup_script(bin_dir(tmp_path, "promtool", "prometheus"))
    assert result.returncode == 1
    assert result.stderr == (
        "missing system packages: valgrind; install them (Debian/Ubuntu, as root: "
        "apt-get install valgrind) and run this again\n"
    )


def test_with_everything_there_the_script_is_silent(tmp_path: Path) -> None:
    result = setup_script(bin_dir(tmp_path, "promtool", "prometheus", "valgrind"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_session_with_no_postgresql_starts_an_embedded_one(tmp_path: Path) -> None:
    """The PostgreSQL table tests, in a session of their own whose RECONCILER_TEST_PG points
    where nothing answers: they run on an embedded server the session starts and removes."""
    test = "tests/integration/test_table.py::test_fresh_database_needs_init_then_reaches_head"
    basetemp = f"--basetemp={tmp_path / 'session'}"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            basetemp,
            "-k",
            "postgresql",
            test,
        ],
        cwd=ROOT,
        env={**os.environ, "RECONCILER_TEST_PG": NOWHERE},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no PostgreSQL answers at postgresql+psycopg://postgres@127.0.0.1:1/postgres" in (
        result.stdout
    )
    assert "this session uses an embedded one" in result.stdout
    assert re.search(r"\b1 passed\b", result.stdout), result.stdout
    leftovers = re.findall(r"host=%2Ftmp%2F(reconciler-pg-[a-z0-9_]+)", result.stdout)
    assert leftovers
    assert not (Path("/tmp") / leftovers[0]).exists()  # stopped and deleted


def test_a_missing_database_driver_is_one_line(tmp_path: Path) -> None:
    """An environment without psycopg (it is a dependency, but environments vary): the
    command fails with one line naming what to install."""
    config = tmp_path / "reconciler.toml"
    config.write_text(
        '[table]\nurl = "postgresql+psycopg://postgres@127.0.0.1:1/x"\n'
        '[index]\npath = "qdrant"\n[[sources]]\nname = "hb"\ntype = "vault"\npath = "vault"\n'
    )
    (tmp_path / "vault").mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['psycopg'] = None\n"  # as if it were not installed
            "from reconciler.cli import main; main()",
            "--config",
            str(config),
            "status",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: the database driver 'psycopg' is not installed: pip install 'psycopg[binary]' "
        "(the `postgres` extra: pip install 'corpus-reconciler[postgres]')"
    ]
