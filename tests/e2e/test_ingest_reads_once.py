"""``ingest`` on a fresh deployment reads each source once: the vocabulary survey's scan is the
one the ingestion takes (issue 39: a 1M-chunk vault was read twice, the survey then the scan).
What it registers and reports is what an ingestion that reads the source itself does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment

from connectors.vault import VaultSource
from reconciler.model import SourceSnapshot


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the vault each ``VaultSource.scan`` reads, in order."""
    read: list[str] = []
    scan = VaultSource.scan

    def counted(self: VaultSource) -> SourceSnapshot:
        read.append(self.name)
        return scan(self)

    monkeypatch.setattr(VaultSource, "scan", counted)
    return read


def corpus(deploy: Deployment) -> None:
    deploy.family("leave", 3)
    deploy.family("travel", 2)
    deploy.note("plain", id="plain")
    deploy.note("broken", "---\n: [unclosed\n---\nbody\n")
    deploy.note("dangling", id="dangling", superseded_by="nowhere")


def ingested(deploy: Deployment, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``init`` and ``ingest ARGS``: the report's sources, and every row less its times."""
    assert deploy.cli("init").exit_code == 0
    code, data = deploy.json("ingest", *args)
    assert code == 0, data
    times = ("ingested_at", "updated_at", "created_at", "run_id", "last_run_id")
    rows = {k: {c: v for c, v in r.items() if c not in times} for k, r in deploy.rows().items()}
    return data["sources"], rows


def test_a_fresh_ingest_reads_the_vault_once_and_registers_what_reading_it_again_did(
    tmp_path: Path, scans: list[str]
) -> None:
    surveyed = Deployment(tmp_path / "surveyed")
    corpus(surveyed)
    report, rows = ingested(surveyed)
    assert scans == ["hb"]  # (the survey's scan; before, a second one for the ingestion)
    alone = Deployment(tmp_path / "alone")
    corpus(alone)
    scans.clear()
    assert ingested(alone, "--accept-unread") == (report, rows)  # (no survey: its own scan)
    assert scans == ["hb"]
    assert report[0]["ingested"] == 7
    assert {p["path"] for p in report[0]["problems"]} >= {"broken.md", "dangling.md"}
    assert len(rows) == 7


def test_a_registered_source_is_not_surveyed_and_is_read_once(
    deploy: Deployment, scans: list[str]
) -> None:
    corpus(deploy)
    ingested(deploy)
    deploy.family("parking", 1)
    scans.clear()
    code, data = deploy.json("ingest")
    assert code == 0, data
    assert scans == ["hb"]
    assert data["sources"][0]["ingested"] == 1
