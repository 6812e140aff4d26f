"""One corpus, three systems of record in one run: a vault, an HTTP registry and a SQL
document-control table, driven through the CLI (init, ingest, drift in each, check, apply)."""

from __future__ import annotations

from pathlib import Path

from acceptance_kit import Deployment, body, day, kinds, sql_table, writes_zero
from pytest_httpserver import HTTPServer
from registry_kit import FakeRegistry


def test_one_run_reconciles_families_from_three_connectors(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    # The HTTP registry: a security policy and a runbook.
    registry = FakeRegistry()
    registry.add("SEC-1", family="security", version=1, status="current", effective_from=day(-200))
    registry.add("RUN-1", body("Runbook", "Page the on-call."), status="current")
    url = registry.serve(httpserver)
    # The SQL table: a travel policy, with the DMS's own column names and status codes.
    dms_url = f"sqlite:///{tmp_path / 'dms.db'}"
    sql_table(
        dms_url,
        "CREATE TABLE controlled (doc_no INTEGER PRIMARY KEY, series TEXT, rev INTEGER, "
        "state_code TEXT, valid_from DATE, replaced_by INTEGER, text_body TEXT)",
        "INSERT INTO controlled VALUES (1, 'travel', 1, 'A', '2024-01-01', NULL, "
        "'# Travel\n\nSecond class.')",
    )
    deployment = Deployment(tmp_path)
    deployment.configure(
        source_extra="\n".join(
            [
                "[[sources]]",
                'name = "reg"',
                'type = "http"',
                f'url = "{url}"',
                "[sources.options]",
                "page_size = 1",
                "retries = 1",
                "backoff_factor = 0",
                "[[sources]]",
                'name = "dms"',
                'type = "sql"',
                f'url = "{dms_url}"',
                "[sources.options]",
                'table = "controlled"',
                'status_map = { A = "current", S = "superseded", W = "retired" }',
                "[sources.options.columns]",
                'id = "doc_no"',
                'family = "series"',
                'version = "rev"',
                'status = "state_code"',
                'effective_from = "valid_from"',
                'superseded_by = "replaced_by"',
                'body = "text_body"',
            ]
        )
    )
    # The vault: one expenses policy.
    deployment.family("expenses", versions=1)

    report = deployment.init_ingest()
    assert {s["source"]: s["ingested"] for s in report["sources"]} == {"hb": 1, "reg": 2, "dms": 1}
    code, data = deployment.json("check")
    assert code == 0, data["findings"]

    # Drift in every source: new versions in the vault and the registry, an edit in place in
    # the registry, a retirement in the table.
    deployment.note(
        "expenses-v2",
        body("expenses v2", "Meals up to 55 EUR."),
        id="expenses-v2",
        family="expenses",
        version="2",
        status="current",
        effective_from=day(-10),
    )
    deployment.edit_front("expenses-v1", status="superseded", superseded_by="expenses-v2")
    registry.add("SEC-2", family="security", version=2, status="current", effective_from=day(-5))
    registry.update("SEC-1", status="superseded", superseded_by="SEC-2")
    sql_table(dms_url, "UPDATE controlled SET state_code = 'W' WHERE doc_no = 1")

    code, report = deployment.json("ingest")  # registers the new versions
    assert code == 0
    assert report["totals"]["ingested"] == 2
    # (edited after the ingestion, which would have re-ingested it: the run sees it first)
    registry.bodies["RUN-1"] = body("Runbook", "Page the incident commander.")

    code, data = deployment.json("check")
    assert code == 2
    found = kinds(data)
    assert {
        ("family", "successor_not_marked", "hb:expenses-v1"),
        ("family", "successor_not_marked", "reg:SEC-1"),
        ("hash", "in_place_edit", "reg:RUN-1"),
        ("family", "retired_in_source", "dms:1"),
    } <= found
    assert {doc_id.split(":")[0] for _, _, doc_id in found if doc_id} == {"hb", "reg", "dms"}

    code, data = deployment.json("apply")
    assert code == 0, data
    assert data["writes"]["table"] >= 4
    assert data["writes"]["payload"] >= 4
    rows = deployment.rows()
    assert (rows["hb:expenses-v1"]["version_state"], rows["hb:expenses-v1"]["superseded_by"]) == (
        "superseded",
        "hb:expenses-v2",
    )
    assert (rows["reg:SEC-1"]["version_state"], rows["reg:SEC-1"]["superseded_by"]) == (
        "superseded",
        "reg:SEC-2",
    )
    assert rows["dms:1"]["version_state"] == "retired"
    assert (rows["reg:RUN-1"]["quarantined"], rows["reg:RUN-1"]["quarantine_reason"]) == (
        True,
        "in_place_edit",
    )
    assert deployment.served() == {"hb:expenses-v2", "reg:SEC-2"}

    # The edited runbook is re-ingested from the registry; the quarantine is then lifted.
    code, report = deployment.json("ingest", "--outbox-only")
    assert code == 0
    assert report["totals"]["reingested"] == 1
    code, data = deployment.json("apply")
    assert code == 0, data
    assert ("hash", "quarantine_lifted", "reg:RUN-1") in kinds(data)
    assert deployment.served() == {"hb:expenses-v2", "reg:SEC-2", "reg:RUN-1"}

    code, data = deployment.json("check")
    assert code == 0, data["findings"]
    code, data = deployment.json("apply")
    assert writes_zero(data)
