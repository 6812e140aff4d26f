"""The layers are enforced, not described: the import-linter contracts of pyproject.toml
(drivers only in the stores, the core through ``reconciler.ports``, checks -> planning ->
applying -> engine, connectors independent of the engine) must all be kept."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint_imports() -> str:
    beside = Path(sys.executable).parent / "lint-imports"
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert found, "lint-imports is not installed (pip install -e '.[test]')"
    return found


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [lint_imports(), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
