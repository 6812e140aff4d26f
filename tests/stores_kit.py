"""The fixtures of the tests that reach real stores: SQLite and PostgreSQL databases, acceptance
deployments (SQLite or PostgreSQL, Qdrant local mode or an Edge shard). They import the drivers,
so only ``tests/integration/conftest.py`` and ``tests/e2e/conftest.py`` take them in; the root
conftest stays light and ``tests/unit/`` never loads a driver.

The PostgreSQL server (and its database) is the session's: when both folders run, the first
conftest to ask starts it and the other finds it here."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from acceptance_kit import Deployment, migrated_table
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import OperationalError

from reconciler.stores.sql import SqlDocumentTable

#: The server to create test databases on (this machine: trust auth on 127.0.0.1:5432). When
#: none answers there, the session starts an embedded one (``embedded_postgres``).
PG_ADMIN_URL = os.environ.get(
    "RECONCILER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def answers(url: str) -> bool:
    """Whether a PostgreSQL server takes a connection at ``url`` (within a few seconds)."""
    engine = create_engine(url, connect_args={"connect_timeout": 5})
    try:
        with engine.connect():
            return True
    except OperationalError:
        return False
    finally:
        engine.dispose()


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """A PostgreSQL server of this session's own, from the ``pgserver`` wheel (the ``test``
    extra): initialised in a temporary folder, reached over its Unix socket, stopped and
    deleted afterwards. Its admin URL is yielded."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        try:
            import pgserver  # noqa: PLC0415
        except ImportError:
            pytest.fail(
                f"no PostgreSQL answers at {shown(PG_ADMIN_URL)} and pgserver is not installed: "
                "pip install -e '.[test]', start a server, or set RECONCILER_TEST_PG"
            )
        folder = Path(tempfile.mkdtemp(prefix="reconciler-pg-"))
        server = pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
    try:
        socket_dir = server.get_postmaster_info().socket_dir
        yield URL.create(
            "postgresql+psycopg",
            username="postgres",
            database="postgres",
            query={"host": str(socket_dir)},
        ).render_as_string(hide_password=False)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


#: What this process's session has set up once, whichever folder asked first: the admin URL
#: (``admin``) and the test database (``database``); closed when the session ends.
_SESSION: dict[str, str] = {}
_CLEANUP = ExitStack()


def _admin_url(request: pytest.FixtureRequest) -> str:
    if "admin" in _SESSION:
        return _SESSION["admin"]
    request.config.add_cleanup(_CLEANUP.close)
    if answers(PG_ADMIN_URL):
        _SESSION["admin"] = PG_ADMIN_URL
        return PG_ADMIN_URL
    url = _CLEANUP.enter_context(embedded_postgres())
    _CLEANUP.callback(_SESSION.pop, "admin", None)
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(
            f"\nno PostgreSQL answers at {shown(PG_ADMIN_URL)}: "
            f"this session uses an embedded one ({shown(url)})",
            flush=True,
        )
    _SESSION["admin"] = url
    return url


@pytest.fixture(scope="session")
def pg_admin_url(request: pytest.FixtureRequest) -> str:
    """The admin URL of the server test databases are made on: ``RECONCILER_TEST_PG`` (default
    127.0.0.1:5432) when a server answers there, else an embedded one for this session."""
    return _admin_url(request)


def _drop(admin_url: str, name: str) -> None:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest, pg_admin_url: str) -> str:
    """A fresh PostgreSQL database for this test session, dropped afterwards."""
    if "database" in _SESSION:
        return _SESSION["database"]
    admin = create_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
    name = f"reconciler_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # a real failure: the suite needs this server
        pytest.fail(f"cannot create a database on PostgreSQL at {shown(pg_admin_url)} ({exc})")
    finally:
        admin.dispose()
    url = make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    _CLEANUP.callback(_SESSION.pop, "database", None)
    _CLEANUP.callback(_drop, pg_admin_url, name)
    _SESSION["database"] = url
    return url


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """The session database, emptied of every table after each test."""
    yield pg_server
    engine = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


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
    if table_url.startswith("sqlite:///"):  # a copy of the session's migrated file
        store = migrated_table(Path(table_url.removeprefix("sqlite:///")))
    else:
        store = SqlDocumentTable.from_url(table_url)
        store.ensure_schema(create=True)
    yield store
    store.close()
