"""End to end through the CLI: init, ingest and status on the embedded default
(SQLite + Qdrant local mode + a vault), and the same table on PostgreSQL."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text

from reconciler.app.wiring import stores
from reconciler.cli import cli
from reconciler.payload import normalize, payload_for
from reconciler.settings import load_settings
from reconciler.stores.sql import _alembic_config

ROOT = Path(__file__).resolve().parents[2]
#: The schema revision this build creates.
HEAD = ScriptDirectory.from_config(_alembic_config()).get_current_head()


def note(path: Path, front: dict[str, str], body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["---", *(f"{k}: {v}" for k, v in front.items()), "---", body]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def deployment(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A config + vault in a temp folder; the table is SQLite unless the test asks for PG."""
    today = datetime.now(UTC).date()
    vault = tmp_path / "vault"
    note(
        vault / "expenses-2025.md",
        {
            "id": "expenses-2025",
            "family": "expenses",
            "version": "1",
            "status": "superseded",
            "superseded_by": "expenses-2026",
            "effective_from": str(today - timedelta(days=700)),
        },
        "# Expenses\n\nMeals up to 40 EUR a day.\n\nClaims within 60 days.",
    )
    note(
        vault / "expenses-2026.md",
        {
            "id": "expenses-2026",
            "family": "expenses",
            "version": "2",
            "status": "current",
            "effective_from": str(today - timedelta(days=300)),
        },
        "# Expenses\n\nMeals up to 55 EUR a day.\n\nClaims within 30 days.",
    )
    note(
        vault / "runbook.md",
        {"status": "current", "effective_from": "2024-06-01"},
        "# Deploy\n\nAnnounce it.\n\n# Rollback\n\nRun the rollback job.",
    )
    note(
        vault / "oncall.md",
        {"status": "current", "effective_from": str(today + timedelta(days=400))},
        "# On call\n\nA recovery day after each week.",
    )
    (vault / "welcome.md").write_text("# Welcome\n\nNo frontmatter here.\n", encoding="utf-8")
    (vault / "broken.md").write_text("---\n: [unclosed\n---\nbody\n", encoding="utf-8")
    table_url = "sqlite:///reconciler.db"
    if getattr(request, "param", "sqlite") == "postgresql":
        table_url = request.getfixturevalue("pg_url")
    config = tmp_path / "reconciler.toml"
    config.write_text(
        f'[table]\nurl = "{table_url}"\n[index]\npath = "qdrant"\ncollection = "handbook"\n'
        '[[sources]]\nname = "handbook"\ntype = "vault"\npath = "vault"\n',
        encoding="utf-8",
    )
    return config


def run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), *args], catch_exceptions=False)


def run_json(config: Path, *args: str) -> tuple[int, Any]:
    result = run(config, "--format", "json", *args)
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("deployment", ["sqlite", "postgresql"], indirect=True)
def test_init_ingest_status(deployment: Path) -> None:
    result = run(deployment, "init")
    assert result.exit_code == 0, result.output
    assert f"schema {HEAD} (created)" in result.output
    assert "absent" in result.output

    code, data = run_json(deployment, "ingest")
    assert code == 0
    [source] = data["sources"]
    assert (source["status"], source["documents_seen"], source["ingested"]) == ("ok", 5, 5)
    assert [p["kind"] for p in source["problems"]] == ["invalid_frontmatter"]
    assert source["chunks_written"] == 6  # one per section: 1 + 1 + 2 + 1 + 1

    code, status = run_json(deployment, "status")
    assert code == 0
    assert status["documents"] == 5
    assert status["by_state"] == {"current": 2, "pending": 1, "superseded": 1, "unknown": 1}
    assert status["index"]["chunks"] == status["chunks_registered"] == source["chunks_written"]
    assert status["index"]["chunks_by_state"] == {
        "current": 3,
        "pending": 1,
        "superseded": 1,
        "unknown": 1,
    }
    assert status["families"] == 4
    assert status["sources"][0]["name"] == "handbook"
    assert status["sources"][0]["last_success_at"] is not None
    assert status["last_runs"][0]["mode"] == "ingest"

    # Every chunk's managed payload is payload_for(its row): one derivation, no drift.
    settings = load_settings(deployment)
    with stores(settings) as opened:
        rows = {d.doc_id: d for d in opened.table.iter_documents()}
        chunks = list(opened.index.scroll())
    assert {c.doc_id for c in chunks} == set(rows)
    for chunk in chunks:
        assert normalize(chunk.payload) == normalize(payload_for(rows[chunk.doc_id]))
    assert (
        rows["handbook:expenses-2025"].effective_to == rows["handbook:expenses-2026"].effective_from
    )
    assert (
        rows["handbook:expenses-2025"].doc_family_id == rows["handbook:expenses-2026"].doc_family_id
    )

    # Ingesting again registers nothing new and writes no chunk.
    code, again = run_json(deployment, "ingest")
    assert code == 0
    assert again["totals"]["ingested"] == 0
    assert again["totals"]["already_registered"] == 5
    assert run_json(deployment, "status")[1]["index"]["chunks"] == status["index"]["chunks"]


def test_ingest_leaves_registered_state_alone_and_consumes_the_outbox(deployment: Path) -> None:
    assert run(deployment, "init").exit_code == 0
    assert run(deployment, "ingest").exit_code == 0
    vault = deployment.parent / "vault"
    # Drift in the source after ingest: ingest must not repair it (that's the reconciler's job).
    text_before = (vault / "runbook.md").read_text()
    (vault / "runbook.md").write_text(
        text_before.replace("Run the rollback job.", "Page the on-call engineer first."),
        encoding="utf-8",
    )
    settings = load_settings(deployment)
    with stores(settings) as opened:
        before = opened.table.get_documents(["handbook:runbook"])["handbook:runbook"]
        opened.table.request_reingest(
            doc_id="handbook:runbook",
            source="handbook",
            source_key="runbook",
            reason="in_place_edit",
        )
    code, data = run_json(deployment, "ingest", "--outbox-only")
    assert code == 0
    assert data["totals"]["reingested"] == 1
    assert data["totals"]["ingested"] == 0
    with stores(settings) as opened:
        after = opened.table.get_documents(["handbook:runbook"])["handbook:runbook"]
        assert opened.table.pending_reingest() == []
        texts = [
            p.payload["text"]
            for p in opened.index.client.scroll(
                opened.index.collection, limit=100, with_payload=True
            )[0]
            if p.payload and p.payload.get("doc_id") == "handbook:runbook"
        ]
    assert after.source_hash != before.source_hash
    assert (after.version_state, after.doc_family_id) == (
        before.version_state,
        before.doc_family_id,
    )
    assert any("Page the on-call engineer" in t for t in texts)
    assert not any("Run the rollback job" in t for t in texts)


def test_unreadable_source_is_an_error_not_an_empty_corpus(deployment: Path) -> None:
    assert run(deployment, "init").exit_code == 0
    assert run(deployment, "ingest").exit_code == 0
    shutil.rmtree(deployment.parent / "vault")
    result = run(deployment, "ingest")
    assert result.exit_code == 1
    assert "UNAVAILABLE" in result.output
    _code, status = run_json(deployment, "status")
    assert status["documents"] == 5
    assert status["by_state"]["current"] == 2
    assert status["sources"][0]["last_error"]


def test_commands_before_init_say_what_to_do(deployment: Path) -> None:
    result = CliRunner().invoke(cli, ["--config", str(deployment), "status"])
    assert result.exit_code == 1
    assert "run `reconciler init`" in result.output


def test_bad_config_lists_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[table]\nurll = "x"\n[guard]\nmax_changed_fraction = 7\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "init"])
    assert result.exit_code == 1
    assert "table.urll: unknown key" in result.output
    assert "guard.max_changed_fraction" in result.output


def test_init_refuses_a_database_from_a_newer_build(deployment: Path) -> None:
    assert run(deployment, "init").exit_code == 0
    engine = create_engine(f"sqlite:///{deployment.parent / 'reconciler.db'}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    result = CliRunner().invoke(cli, ["--config", str(deployment), "init"])
    assert result.exit_code == 1
    assert "newer build" in result.output


def test_quickstart_example_runs(tmp_path: Path) -> None:
    target = tmp_path / "quickstart"
    shutil.copytree(
        ROOT / "examples" / "quickstart",
        target,
        ignore=shutil.ignore_patterns("reconciler.db*", "qdrant"),
    )
    config = target / "reconciler.toml"
    assert run(config, "init").exit_code == 0
    code, data = run_json(config, "ingest")
    assert code == 0
    assert data["totals"]["ingested"] == 5
    assert data["totals"]["problems"] == 0
    result = run(config, "status")
    assert result.exit_code == 0
    assert "superseded" in result.output


def test_a_source_failing_mid_ingest_stops_only_that_source(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from connectors.base import SourceUnavailable  # noqa: PLC0415
    from connectors.vault import VaultSource  # noqa: PLC0415

    assert run(deployment, "init").exit_code == 0
    calls = {"n": 0}
    real = VaultSource.read_body

    def flaky(self: VaultSource, source_key: str) -> str:
        calls["n"] += 1
        if calls["n"] == 3:
            raise SourceUnavailable("vault went away")
        return real(self, source_key)

    monkeypatch.setattr(VaultSource, "read_body", flaky)
    code, data = run_json(deployment, "ingest")
    assert code == 1
    [source] = data["sources"]
    assert source["status"] == "unavailable"
    assert source["ingested"] == 2  # what was read before the failure is kept
    monkeypatch.setattr(VaultSource, "read_body", real)
    code, again = run_json(deployment, "ingest")  # the next run picks up the rest
    assert code == 0
    assert again["totals"]["ingested"] == 3
