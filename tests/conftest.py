"""Shared fixtures: real SQLite and PostgreSQL databases, real Qdrant local mode, vaults."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from acceptance_kit import Deployment
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from reconciler.stores.sql import SqlDocumentTable

# The reusable connector contract suite asserts in a library module: rewrite its asserts.
pytest.register_assert_rewrite("connectors.testing")

#: The server to create test databases on (this machine: trust auth on 127.0.0.1:5432).
PG_ADMIN_URL = os.environ.get(
    "RECONCILER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped afterwards."""
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"reconciler_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # a real failure: the suite needs this server
        pytest.fail(
            f"PostgreSQL at {make_url(PG_ADMIN_URL).render_as_string(hide_password=True)} is "
            f"needed by the table tests ({exc}); start it or set RECONCILER_TEST_PG"
        )
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """The session database, emptied of every table after each test."""
    yield pg_server
    engine = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite database file in a temporary folder."""
    return f"sqlite:///{tmp_path / 'reconciler.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def table_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both dialects: every table test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'reconciler.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def deploy(request: pytest.FixtureRequest, tmp_path: Path) -> Deployment:
    """An acceptance deployment (``acceptance_kit``) on SQLite and Qdrant local mode; on
    PostgreSQL when a test is parametrized with ``indirect=True`` and ``"postgresql"``, on a
    Qdrant Edge shard (and SQLite) with ``"edge"``."""
    url = "sqlite:///reconciler.db"
    param = getattr(request, "param", "sqlite")
    if param == "postgresql":
        url = request.getfixturevalue("pg_url")
    return Deployment(tmp_path, url, engine="edge" if param == "edge" else "qdrant")


@pytest.fixture
def table(table_url: str) -> Iterator[SqlDocumentTable]:
    """An initialised document table on each dialect."""
    store = SqlDocumentTable.from_url(table_url)
    store.ensure_schema(create=True)
    yield store
    store.close()
