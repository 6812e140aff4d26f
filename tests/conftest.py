"""The root of the suite, kept light: it imports no driver, so ``tests/unit/`` runs in seconds.

- ``tests/unit/``: pure logic on plain values; no driver (``sqlalchemy``, ``qdrant_client``,
  ``qdrant_edge``, ``psycopg``, ``alembic``) is imported, no process started
  (``tests/integration/test_unit_tests_are_light.py`` holds that).
- ``tests/integration/``: one part against the real thing: the stores on SQLite, PostgreSQL,
  Qdrant local mode and Edge, the connectors against local servers and repositories, the
  engine on real stores, the import contracts.
- ``tests/e2e/``: the product as shipped: the CLI over a whole deployment, real processes
  (``serve``, killed runs, racing shards), Prometheus and promtool, the docs, the bench.

Their fixtures of real stores are in ``stores_kit.py`` (taken in by the integration and e2e
conftests). Hypothesis runs under the profile named by ``RECONCILER_HYPOTHESIS_PROFILE``:
``ci`` (the default, Hypothesis' own) or ``thorough`` (see ``hypothesis_kit``).
"""

from __future__ import annotations

from pathlib import Path

import hypothesis_kit
import pytest

# The reusable connector contract suite asserts in a library module: rewrite its asserts.
pytest.register_assert_rewrite("connectors.testing")

hypothesis_kit.load_profile()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite database file in a temporary folder."""
    return f"sqlite:///{tmp_path / 'reconciler.db'}"


#: Tests slow by what they do, by file or by test (not marked one by one, to keep them easy to
#: merge): they copy the code or start interpreters, kill processes, or race them.
SLOW = (
    "tests/integration/test_layers.py",
    "tests/integration/test_check_registry.py",
    "tests/integration/test_unit_tests_are_light.py",
    "tests/integration/test_migrations_killed.py",
    "tests/e2e/test_rekey_killed.py",
    "tests/integration/test_audit_chain.py::test_parallel_appenders_extend_one_chain",
    "tests/integration/test_leasing.py::test_two_processes_contend_and_exactly_one_runs",
    "tests/integration/test_lease_exclusion.py::test_processes_racing_never_hold_both_kinds",
    "tests/integration/test_lease_exclusion.py::test_a_killed_holder_of_either_kind_is_taken_over_at_once",
    "tests/e2e/test_authorized_killed.py",
    "tests/e2e/test_peps_replay.py",
)
ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``e2e`` every test under ``tests/e2e/``, and ``slow`` every Hypothesis property
    and every test of ``SLOW`` (``pytest -m "not slow and not e2e"``: the development run,
    README; CI runs them all)."""
    for item in items:
        where = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
        if where.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.e2e)
        test = f"{where}::{item.name.partition('[')[0]}"
        function = getattr(item, "function", None)
        if where in SLOW or test in SLOW or getattr(function, "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)
