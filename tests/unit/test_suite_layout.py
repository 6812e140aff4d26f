"""Every test file is collected: ``testpaths`` (pyproject) names the three folders."""

from __future__ import annotations

import tomllib
from pathlib import Path

import hypothesis_kit
import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("tests/unit", "tests/integration", "tests/e2e")


def test_testpaths_cover_every_test_file() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    paths = pyproject["tool"]["pytest"]["ini_options"]["testpaths"]
    assert paths[:3] == list(FOLDERS)
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")}
    uncovered = {f for f in found if not any(f == p or f.startswith(p + "/") for p in paths)}
    assert uncovered == set()


def test_the_hypothesis_profile_is_ci_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(hypothesis_kit.ENV, raising=False)
    assert (hypothesis_kit.profile(), hypothesis_kit.examples(6)) == ("ci", 6)
    monkeypatch.setenv(hypothesis_kit.ENV, "thorough")
    assert (hypothesis_kit.profile(), hypothesis_kit.examples(6)) == ("thorough", 60)
    monkeypatch.setenv(hypothesis_kit.ENV, "fast")
    with pytest.raises(ValueError, match="the profiles are ci, thorough"):
        hypothesis_kit.profile()


def test_the_ci_profile_is_hypothesis_own() -> None:
    """What CI ran before the profiles existed (Hypothesis loads its ``ci`` profile where
    ``CI`` is set), and what every run does now."""
    ci = settings.get_profile("ci")
    assert ci.derandomize
    assert ci.deadline is None
    assert ci.database is None
    assert HealthCheck.too_slow in ci.suppress_health_check
