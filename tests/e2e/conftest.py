"""Real stores for the end-to-end tests (``stores_kit``), and the metrics a real deployment
exposes through its life (``exposition_kit``), read once a session."""

from __future__ import annotations

import exposition_kit
import pytest
from exposition_kit import Exposition
from stores_kit import deploy, pg_admin_url, pg_server, pg_url, table, table_url
from watch_kit import watch_story

__all__ = ["deploy", "pg_admin_url", "pg_server", "pg_url", "table", "table_url"]


@pytest.fixture(scope="session")
def cron_readings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exposition]:
    """The textfile of real cron ``run``s through a deployment's life (``exposition_kit``)."""
    return exposition_kit.cron_readings(tmp_path_factory.mktemp("cron"))


@pytest.fixture(scope="session")
def serve_readings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exposition]:
    """``/metrics`` of a real ``reconciler serve``: a job skipped on a held lease, then a
    successful full job (``exposition_kit``)."""
    return exposition_kit.serve_readings(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="session")
def watch_readings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exposition]:
    """serve's watch through a fast change, a change held up by a busy lease, and a vault
    whose folder vanished (``watch_kit``)."""
    return watch_story(tmp_path_factory.mktemp("watch"))


@pytest.fixture(scope="session")
def outage_readings(
    tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str
) -> dict[str, Exposition]:
    """``/metrics`` of a real ``reconciler serve`` before and during a document-table outage
    (PostgreSQL refusing its connections; ``exposition_kit``)."""
    return exposition_kit.table_outage_readings(tmp_path_factory.mktemp("outage"), pg_admin_url)
