"""Adding a check is one module and one line: a copy of the code gains a check module and its
line in ``reconciler.checks.REGISTRY`` for each kind of check (per family, over the
collection with its own planner, over the sources, in the consequence round), nothing else,
and the new checks are offered by ``--help``, accepted by the options' validation, run and
reported."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from acceptance_kit import Deployment

ROOT = Path(__file__).resolve().parents[2]

SHOUT = textwrap.dedent(
    '''
    """``shout``: a check added by a test, one warning a family."""

    from __future__ import annotations

    from reconciler.check_inputs import CheckContext, FamilyView
    from reconciler.model import Finding, Severity


    def check_shout(view: FamilyView, ctx: CheckContext) -> list[Finding]:
        return [
            Finding(
                check="shout",
                kind="shouted",
                severity=Severity.WARNING,
                family=view.family,
                doc_id=None,
                expected=None,
                actual=len(view.rows),
                action="none",
            )
        ]
    '''
)


TALLY = textwrap.dedent(
    '''
    """``tally``: a check over the collection added by a test, planned by a registered planner."""

    from __future__ import annotations

    from reconciler.check_inputs import CollectionView, Wide
    from reconciler.model import Finding, Severity


    def collection_tally(view: CollectionView) -> Wide:
        finding = Finding(
            check="tally",
            kind="counted",
            severity=Severity.WARNING,
            family=None,
            doc_id=None,
            expected=None,
            actual=view.chunks_scanned,
            action="create_payload_index(tallied, keyword)",
            index=("tallied", "keyword"),
        )
        return Wide((finding,), checked=view.chunks_scanned)
    '''
)

ROSTER = textwrap.dedent(
    '''
    """``roster``: a check over the sources added by a test, one warning a source."""

    from __future__ import annotations

    from reconciler.check_inputs import SourcesView, Wide
    from reconciler.model import Finding, Severity


    def sources_roster(view: SourcesView) -> Wide:
        return Wide(
            tuple(
                Finding(
                    check="roster",
                    kind="listed",
                    severity=Severity.WARNING,
                    family=None,
                    doc_id=None,
                    expected=None,
                    actual={"source": name, "documents": len(view.documents)},
                    action="none",
                )
                for name in sorted(view.states)
            ),
            checked=len(view.states),
        )
    '''
)

ECHO = textwrap.dedent(
    '''
    """``echo``: a check of the consequence round added by a test (it finds nothing)."""

    from __future__ import annotations

    from reconciler.check_inputs import CheckContext, FamilyView
    from reconciler.model import Finding


    def check_echo(view: FamilyView, ctx: CheckContext) -> list[Finding]:
        return []
    '''
)

#: Each added check: its module, and its line in the registry.
ADDED = {
    "shout": (SHOUT, 'Registered("shout")'),
    "tally": (
        TALLY,
        'Registered("tally", per_family=False, over_collection=True, plans="plan_indexes")',
    ),
    "roster": (
        ROSTER,
        'Registered("roster", reads_sources=True, per_family=False, over_sources=True)',
    ),
    "echo": (ECHO, 'Registered("echo", consequence=3)'),
}


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the code with the ``shout`` check added by its module and one line."""
    where = tmp_path_factory.mktemp("code")
    for package in ("reconciler", "connectors"):
        shutil.copytree(
            ROOT / package, where / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    for name, (module, _line) in ADDED.items():
        (where / "reconciler" / "checks" / f"{name}.py").write_text(module, encoding="utf-8")
    registry = where / "reconciler" / "checks" / "__init__.py"
    before = registry.read_text(encoding="utf-8")
    line = '    Registered("dates", consequence=1),\n'
    assert before.count(line) == 1
    added = "".join(f"    {entry},\n" for _module, entry in ADDED.values())
    after = before.replace(line, line + added)
    registry.write_text(after, encoding="utf-8")
    changed = [
        d
        for d in difflib.ndiff(before.splitlines(), after.splitlines())
        if d.startswith(("+ ", "- "))
    ]
    assert changed == [f"+     {entry}," for _module, entry in ADDED.values()]
    return where


@pytest.fixture(scope="module")
def deploy(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    deployment = Deployment(tmp_path_factory.mktemp("dep"))
    deployment.family("expenses", 2)
    deployment.family("travel", 2)
    deployment.init_ingest()
    return deployment


def python(where: Path | None, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the interpreter on the copy of the code at ``where`` (None: the code itself)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if where is not None:
        env["PYTHONPATH"] = str(where)
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_copy_is_what_runs(code: Path) -> None:
    result = python(code, "-c", "import reconciler; print(reconciler.__file__)", cwd=code)
    assert result.stdout.strip() == str(code / "reconciler" / "__init__.py"), result.stderr


def test_help_offers_the_new_check(code: Path, tmp_path: Path) -> None:
    result = python(code, "-m", "reconciler.cli", "check", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    offered = " ".join(result.stdout.split())
    assert "[family|hash|siblings|ttl|payload|dates|shout|tally|roster|echo|index]" in offered
    unchanged = python(None, "-m", "reconciler.cli", "check", "--help", cwd=tmp_path)
    assert "shout" not in unchanged.stdout


def test_the_options_accept_it_and_name_it_when_refusing(code: Path, deploy: Deployment) -> None:
    script = textwrap.dedent(
        f"""
        from reconciler.app.operations import engine_options
        from reconciler.errors import ConfigError
        from reconciler.settings import load_settings
        settings = load_settings({str(deploy.config)!r})
        print(sorted(engine_options(settings, mode="check", checks=["shout"]).checks))
        print("shout" in engine_options(settings, mode="check").checks)
        try:
            engine_options(settings, mode="check", checks=["bogus"])
        except ConfigError as exc:
            print(" ".join(str(exc).split()))
        """
    )
    result = python(code, "-c", script, cwd=deploy.root)
    assert result.returncode == 0, result.stderr
    chosen, default, refused = result.stdout.splitlines()[:3]
    assert chosen == "['shout']"
    assert default == "True"
    assert (
        "family, hash, siblings, ttl, payload, dates, shout, tally, roster, echo, index" in refused
    )


@pytest.mark.parametrize("chosen", [["--check", "shout"], []], ids=["alone", "with-all"])
def test_a_run_runs_it_on_every_family_and_reports_it(
    code: Path, deploy: Deployment, chosen: list[str]
) -> None:
    args = ["-m", "reconciler.cli", "--config", str(deploy.config), "--format", "json"]
    result = python(code, *args, "check", *chosen, cwd=deploy.root)
    assert result.returncode == 2, result.stderr  # its warnings are drift
    data = json.loads(result.stdout)
    shouted = sorted((f["family"], f["actual"]) for f in data["findings"] if f["check"] == "shout")
    assert shouted == [("hb:expenses", 2), ("hb:travel", 2)]
    assert data["summary"]["shout"] == {"checked": 2, "findings": 2}
    if chosen:
        assert {f["check"] for f in data["findings"]} == {"shout"}
    else:  # (the others: over the collection, with its plan, and over the sources)
        [tallied] = [f for f in data["findings"] if f["check"] == "tally"]
        assert tallied["actual"] == data["summary"]["tally"]["checked"] > 0
        assert {"key": "tallied", "schema": "keyword"} in data["plan"]["indexes"]
        listed = [f["actual"] for f in data["findings"] if f["check"] == "roster"]
        assert listed == [{"source": "hb", "documents": 4}]
        assert data["summary"]["roster"] == {"checked": 1, "findings": 1}
        assert data["summary"]["echo"] == {"checked": 2, "findings": 0}
    unchanged = python(None, *args, "check", "--check", "shout", cwd=deploy.root)
    assert unchanged.returncode == 64
