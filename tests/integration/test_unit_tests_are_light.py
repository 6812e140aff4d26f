"""``tests/unit/`` stays light: run alone, it imports no driver (the root conftest imports none
either), so it runs in seconds wherever the suite is checked out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = ("sqlalchemy", "alembic", "psycopg", "qdrant_client", "qdrant_edge")

SESSION = f"""
import sys

import pytest


class Light:
    def pytest_sessionfinish(self) -> None:
        loaded = sorted(m for m in {DRIVERS!r} if m in sys.modules)
        print("drivers loaded:", ",".join(loaded) or "none")


sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "tests/unit"], plugins=[Light()]))
"""


def test_the_unit_tests_import_no_driver() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SESSION],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "drivers loaded: none" in result.stdout, result.stdout
