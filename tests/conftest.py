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
