"""Acceptance: content and payload drift — edits in place, re-chunking resurrections, a polling
source gone quiet past its TTL, and the payload indexes the filter needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from acceptance_kit import Deployment, instant, kinds, migrated_table, writes_zero

from connectors.vault import VaultSource
from reconciler.checks.index import REQUIRED_INDEXES
from reconciler.embedding import make_embedder
from reconciler.ingesting import Ingestor
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Options
from reconciler.stores.sql import audit
from reconciler.testing.memory import InMemoryChunkIndex


def quarantine(deploy: Deployment, doc_id: str) -> set[tuple[bool, str | None]]:
    return {
        (p["quarantined"], p.get("quarantine_reason")) for p in deploy.points().of(doc_id).values()
    }


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_in_place_edit_quarantines_until_reingested(deploy: Deployment) -> None:
    deploy.family("expenses", 2)
    deploy.family("travel", 1)
    deploy.init_ingest()
    note = deploy.vault / "expenses-v2.md"
    note.write_text(
        note.read_text().replace("rule 0 of version 2", "rule 0 (now 55 EUR) of version 2"),
        encoding="utf-8",
    )

    code, data = deploy.json("check")
    assert code == 2
    assert kinds(data) == {("hash", "in_place_edit", "hb:expenses-v2")}
    code, data = deploy.json("apply")
    assert code == 0
    assert data["writes"] == {"payload": 1, "table": 1, "reingest": 1, "points": 2, "index": 0}
    row = deploy.rows()["hb:expenses-v2"]
    assert (row["version_state"], row["quarantined"], row["quarantine_reason"]) == (
        "current",
        True,
        "in_place_edit",
    )
    assert quarantine(deploy, "hb:expenses-v2") == {(True, "in_place_edit")}
    assert "hb:expenses-v2" not in deploy.served()
    with deploy.stores() as opened:
        requests = opened.table.pending_reingest()
    assert [(r.doc_id, r.reason) for r in requests] == [("hb:expenses-v2", "in_place_edit")]

    code, ingested = deploy.json("ingest", "--outbox-only")
    assert (code, ingested["totals"]["reingested"]) == (0, 1)
    texts = [p["text"] for p in deploy.points().of("hb:expenses-v2").values()]
    assert any("now 55 EUR" in t for t in texts)

    code, data = deploy.json("apply")
    assert code == 0
    assert kinds(data) == {("hash", "quarantine_lifted", "hb:expenses-v2")}
    row = deploy.rows()["hb:expenses-v2"]
    assert (row["quarantined"], row["quarantine_reason"]) == (False, None)
    assert quarantine(deploy, "hb:expenses-v2") == {(False, None)}
    assert deploy.served() == {"hb:expenses-v2", "hb:travel-v1"}
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])


def test_rechunking_resets_half_of_a_superseded_documents_chunks(deploy: Deployment) -> None:
    deploy.family("expenses", 2, sections=4)
    deploy.family("travel", 1)
    deploy.init_ingest()
    clean = deploy.points()
    old = sorted(clean.of("hb:expenses-v1"))
    assert len(old) == 4
    half = old[:2]
    # A re-chunking run wrote its default state onto these points.
    deploy.set_payload(
        half,
        {"version_state": "current", "superseded_by": None, "effective_to": "9999-12-31T00:00:00Z"},
    )
    assert "hb:expenses-v1" in deploy.served()

    code, data = deploy.json("check")
    assert code == 2
    assert kinds(data) == {
        ("payload", "payload_drift", "hb:expenses-v1"),
        ("siblings", "live_siblings", "hb:expenses-v1"),
    }
    [drift] = [f for f in data["findings"] if f["kind"] == "payload_drift"]
    assert drift["severity"] == "critical"
    assert (drift["actual"]["chunks"], drift["actual"]["of"]) == (2, 4)
    assert drift["actual"]["version_state"] == "current"
    assert drift["expected"]["version_state"] == "superseded"

    code, data = deploy.json("apply")
    assert code == 0
    assert data["writes"]["table"] == 0
    assert data["writes"]["points"] == 2
    with deploy.stores() as opened:
        entries = list(audit.show(opened.table.engine, run_id=data["run_id"]))
    written = [p for e in entries if e["target_type"] == "payload" for p in e["before"]["points"]]
    assert sorted(written) == half
    # Payload intents (committed before the write), then their confirmation.
    assert [e["target_type"] for e in entries][-1] == "confirm"
    assert {e["target_type"] for e in entries} == {"payload", "confirm"}
    # Exactly those points changed, and back to what ingestion wrote, key for key.
    assert deploy.points().payloads == clean.payloads
    assert "hb:expenses-v1" not in deploy.served()
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])


def test_polling_source_unreadable_past_its_ttl(deploy: Deployment) -> None:
    deploy.family("expenses", 2)
    deploy.family("travel", 1)
    deploy.init_ingest()
    rows = deploy.rows()
    away = deploy.root / "vault.away"
    deploy.vault.rename(away)

    # Within the TTL (24h by default): reported, nothing quarantined.
    code, data = deploy.json("check")
    assert code == 2
    assert kinds(data) == {("hash", "source_unreadable", None)}
    assert writes_zero(data)

    later = instant(2)
    code, data = deploy.json("check", "--now", later)
    assert code == 2
    assert kinds(data) == {
        ("hash", "source_unreadable", None),
        ("ttl", "ttl_expired", "hb:expenses-v1"),
        ("ttl", "ttl_expired", "hb:expenses-v2"),
        ("ttl", "ttl_expired", "hb:travel-v1"),
    }
    code, data = deploy.json("apply", "--now", later)
    assert (code, data["status"]) == (4, "partial")  # applied, but the source was not read
    after = deploy.rows()
    for doc_id, row in after.items():
        assert (row["quarantined"], row["quarantine_reason"]) == (True, "ttl_expired")
        # Its state otherwise unchanged: an unreadable source is not an empty one.
        for column in ("version_state", "superseded_by", "effective_from", "effective_to"):
            assert row[column] == rows[doc_id][column], (doc_id, column)
        assert quarantine(deploy, doc_id) == {(True, "ttl_expired")}
    assert deploy.served() == set()

    # The vault is back: the next run lifts the quarantine.
    away.rename(deploy.vault)
    code, data = deploy.json("apply", "--now", instant(3))
    assert code == 0
    assert kinds(data) == {
        ("ttl", "quarantine_lifted", "hb:expenses-v1"),
        ("ttl", "quarantine_lifted", "hb:expenses-v2"),
        ("ttl", "quarantine_lifted", "hb:travel-v1"),
    }
    for doc_id, row in deploy.rows().items():
        assert (row["quarantined"], row["quarantine_reason"]) == (False, None)
        assert row["version_state"] == rows[doc_id]["version_state"]
        assert quarantine(deploy, doc_id) == {(False, None)}
    assert deploy.served() == {"hb:expenses-v2", "hb:travel-v1"}
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])


def test_local_mode_keeps_no_payload_indexes_and_reports_none(deploy: Deployment) -> None:
    deploy.family("travel", 1)
    deploy.init_ingest()
    with deploy.stores() as opened:
        assert opened.index.supports_payload_indexes is False
    code, data = deploy.json("check", "--check", "index")
    assert (code, data["findings"]) == (0, [])
    assert data["summary"] == {"index": {"checked": 0, "findings": 0}}


def test_missing_payload_indexes_are_created(tmp_path: Path) -> None:
    deploy = Deployment(tmp_path)
    deploy.family("expenses", 2)
    deploy.family("travel", 1)
    table = migrated_table(tmp_path / "engine.db")
    try:
        index = InMemoryChunkIndex()
        sources = [VaultSource("hb", deploy.vault)]
        Ingestor(table=table, index=index, embedder=make_embedder("hashing", dim=16, model="")).run(
            sources
        )
        engine = Reconciler(table=table, index=index, sources=sources)

        report = engine.run(Options(mode="check"))
        missing = {
            (f.kind, f.expected["key"], f.expected["schema"])
            for f in report.findings
            if f.check == "index"
        }
        assert missing == {("payload_index_missing", k, s) for k, s in REQUIRED_INDEXES.items()}
        assert [f.check for f in report.findings] == ["index"] * len(REQUIRED_INDEXES)
        assert index.payload_indexes() == {}  # check writes nothing

        applied = engine.run(Options(mode="apply"))
        assert applied.writes()["index"] == len(REQUIRED_INDEXES)
        assert applied.writes()["points"] == 0
        assert dict(index.payload_indexes()) == REQUIRED_INDEXES
        entries = list(audit.show(table.engine, run_id=applied.run_id))
        assert {e["target"] for e in entries if e["target_type"] == "index"} == set(
            REQUIRED_INDEXES
        )

        again = engine.run(Options(mode="check"))
        assert again.findings == ()
        assert again.summary["index"] == {"checked": len(REQUIRED_INDEXES), "findings": 0}
    finally:
        table.close()
