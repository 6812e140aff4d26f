"""The layers are enforced, not described: the import-linter contracts of pyproject.toml must
all be kept, and they bite: each import the architecture forbids, added to a copy of the
code, makes ``lint-imports`` fail on the contract that forbids it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = {
    contract["id"]: contract["name"]
    for contract in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]["contracts"]
}

#: (the module to add the import to, the module it imports, the contract that must refuse it).
FORBIDDEN = [
    # the engine: reconciler.pipeline (Reconciler in pipeline.running)
    ("reconciler/pipeline/running.py", "reconciler.app.wiring", "layers"),
    ("reconciler/pipeline/running.py", "reconciler.cli", "layers"),
    ("reconciler/pipeline/running.py", "reconciler.app.holding", "layers"),
    ("reconciler/writing/recovery.py", "reconciler.app.wiring", "layers"),
    ("reconciler/writing/applying.py", "reconciler.pipeline.running", "layers"),
    ("reconciler/writing/differs.py", "reconciler.writing.applying", "writing"),
    ("reconciler/pipeline/chunk_tally.py", "reconciler.stores.qdrant.index", "core"),
    ("reconciler/model/states.py", "reconciler.settings", "core"),
    ("reconciler/rules/time_rule.py", "reconciler.check_inputs", "layers"),
    ("reconciler/rules/time_rule.py", "reconciler.rules.declared_state", "rules"),
    ("reconciler/ports/__init__.py", "connectors.vault", "core"),
    ("reconciler/ports/table.py", "reconciler.ports.index", "ports"),
    ("reconciler/checks/family.py", "reconciler.planning", "layers"),
    ("connectors/http.py", "reconciler.pipeline.running", "connectors"),
    ("connectors/git/repository.py", "connectors.git.tree", "git"),
    ("connectors/git/command.py", "connectors.git.options", "git"),
    ("connectors/confluence/client.py", "connectors.confluence.options", "confluence"),
    ("connectors/confluence/pages.py", "connectors.confluence.declaration", "confluence"),
    ("connectors/sql/options.py", "connectors.sql.source", "sql"),
    ("reconciler/pipeline/values.py", "reconciler.pipeline.guarding", "pipeline"),
    ("reconciler/planning.py", "sqlalchemy", "drivers"),
    ("reconciler/app/operations.py", "reconciler.cli.group", "layers"),
    ("reconciler/pipeline/reading.py", "reconciler.stores.sql", "composition"),
    ("reconciler/app/wiring.py", "reconciler.app.operations", "app"),
    ("reconciler/app/holding.py", "reconciler.app.wiring", "app"),
    ("reconciler/ports/lease.py", "reconciler.ports.table", "ports"),
    ("reconciler/cli/reconcile.py", "reconciler.stores.qdrant.index", "composition"),
    ("reconciler/cli/group.py", "reconciler.cli.reconcile", "cli"),
    ("reconciler/integrations/retrieving.py", "reconciler.app.wiring", "integrations"),
    ("reconciler/checks/family.py", "reconciler.integrations.retrieving", "core"),
    # the cycle settings -> sources -> settings, which a type annotation once made
    ("reconciler/sources.py", "reconciler.settings", "acyclic"),
]


def lint_imports() -> str:
    beside = Path(sys.executable).parent / "lint-imports"
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert found, "lint-imports is not installed (pip install -e '.[test]')"
    return found


def run_lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [lint_imports(), "--no-cache"],
        cwd=where,
        env={**os.environ, "COLUMNS": "1000"},  # a contract's name on one line
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_import_contracts_are_kept() -> None:
    result = run_lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The code and its contracts, copied: lint-imports reads the copy (the working directory
    comes first on its path), which each test below changes and restores."""
    where = tmp_path_factory.mktemp("layers")
    for package in ("reconciler", "connectors"):
        shutil.copytree(ROOT / package, where / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    result = run_lint_imports(where)
    assert result.returncode == 0, result.stdout + result.stderr  # the copy is read, and kept
    return where


@pytest.mark.parametrize(("module", "imported", "contract"), FORBIDDEN)
def test_a_forbidden_import_breaks_its_contract(
    copy: Path, module: str, imported: str, contract: str
) -> None:
    path = copy / module
    original = path.read_text(encoding="utf-8")
    path.write_text(f"{original}\nimport {imported}  # forbidden\n", encoding="utf-8")
    try:
        result = run_lint_imports(copy)
    finally:
        path.write_text(original, encoding="utf-8")
    assert result.returncode != 0, result.stdout
    name = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    broken = result.stdout.split("Broken contracts", 1)[-1]
    if contract == "acyclic":  # it names the dependency to remove, relative to the package
        name, imported = (f".{m.rsplit('.', 1)[1]}" for m in (name, imported))
    assert f"{name} -> {imported}" in broken, result.stdout
    assert f"\n{CONTRACTS[contract]}\n" in broken, result.stdout
