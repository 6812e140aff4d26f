"""Acceptance: what must hold around every repair — convergence, payload-only writes, exact
rollback, a tamper-evident audit log, the blast-radius guard, the default filter, read-only
check/plan, scoped repair, and the JSON contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from acceptance_kit import (
    FINDING_KEYS,
    REPORT_EXTRAS,
    REPORT_KEYS,
    WRITE_KEYS,
    Deployment,
    day,
    instant,
    kinds,
    writes_zero,
)

from reconciler import default_filter
from reconciler.checks import CHECKS
from reconciler.model import OPEN_END, rfc3339
from reconciler.stores.sql import audit


def drifted_corpus(deploy: Deployment) -> None:
    """A corpus ingested clean, then drifted several ways at once (grace 0s)."""
    deploy.configure(policy={"missing_in_source_grace": "0s"})
    deploy.family("expenses", 2, sections=3)
    deploy.family("handbook", 2, sections=4)
    deploy.family("travel", 1, sections=2)
    deploy.family("faq", 1, sections=2)
    deploy.family("guide", 1)
    deploy.family("memo", 1)
    deploy.family("rules", 2)
    deploy.note("policy-v1", id="policy-v1", family="policy", status="current",
                version="1", effective_from=day(-300))  # fmt: skip
    deploy.note("oncall", id="oncall", status="current", effective_from=day(30))
    deploy.note("legacy", "# Legacy\n\nNo frontmatter at all.")
    deploy.init_ingest()
    code, clean = deploy.json("check")
    assert (code, clean["findings"]) == (0, [])

    # successor_not_marked: v2 ingested, v1's supersession never applied.
    deploy.note("policy-v2", id="policy-v2", family="policy", status="current",
                version="2", effective_from=day(-3))  # fmt: skip
    deploy.edit_front("policy-v1", status="superseded", superseded_by="policy-v2")
    assert deploy.json("ingest")[0] == 0
    # successor_not_ingested: rules v3 only in the vault.
    deploy.note("rules-v3", id="rules-v3", family="rules", status="current",
                version="3", effective_from=day(-1))  # fmt: skip
    deploy.edit_front("rules-v2", status="superseded", superseded_by="rules-v3")
    # retired_in_source, missing_in_source, in_place_edit.
    deploy.edit_front("guide-v1", status="retired")
    (deploy.vault / "memo-v1.md").unlink()
    faq = deploy.vault / "faq-v1.md"
    faq.write_text(faq.read_text().replace("rule 1", "rule 1, amended"), encoding="utf-8")
    # payload_drift: re-chunking reset half of a superseded document to current.
    old = sorted(deploy.points().of("hb:handbook-v1"))
    deploy.set_payload(old[:2], {"version_state": "current", "superseded_by": None})
    # Two versions current and open-ended in rows and payloads: both served.
    deploy.set_row(
        "hb:expenses-v1", version_state="current", superseded_by=None, effective_to=OPEN_END
    )
    deploy.set_payload(
        sorted(deploy.points().of("hb:expenses-v1")),
        {"version_state": "current", "superseded_by": None, "effective_to": rfc3339(OPEN_END)},
    )


def assert_served_exactly_the_current(deploy: Deployment) -> None:
    """``default_filter()`` returns every chunk in force and nothing else."""
    now = datetime.now(UTC)
    everything = deploy.points()
    served = deploy.points(default_filter(now))
    rows = deploy.rows()
    for payload in served.payloads.values():
        assert payload["version_state"] in ("current", "unknown"), payload
        assert payload["quarantined"] is False, payload
    in_force = {
        doc_id
        for doc_id, row in rows.items()
        if row["version_state"] in ("current", "unknown")
        and not row["quarantined"]
        and (row["effective_from"] is None or row["effective_from"] <= now)
        and now < row["effective_to"]
    }
    expected = {
        pid for pid, payload in everything.payloads.items() if payload["doc_id"] in in_force
    }
    assert set(served.payloads) == expected
    assert {p["doc_id"] for p in served.payloads.values()} == in_force


def test_apply_converges_and_a_second_apply_writes_nothing(deploy: Deployment) -> None:
    drifted_corpus(deploy)
    code, data = deploy.json("check")
    assert code == 2
    found = kinds(data)
    for expected in [
        ("family", "successor_not_marked", "hb:policy-v1"),
        ("family", "successor_not_ingested", "hb:rules-v2"),
        ("family", "retired_in_source", "hb:guide-v1"),
        ("family", "missing_in_source", "hb:memo-v1"),
        ("hash", "in_place_edit", "hb:faq-v1"),
        ("payload", "payload_drift", "hb:handbook-v1"),
        ("siblings", "live_siblings", "hb:expenses-v1"),
    ]:
        assert expected in found, expected

    code, first = deploy.json("apply")
    assert code == 0
    assert not first["refused"]
    assert first["writes"]["table"] > 0
    assert first["writes"]["points"] > 0

    # Nothing left to write; only what waits on the ingestion pipeline is still reported.
    code, data = deploy.json("check")
    assert code == 2
    assert {f["kind"] for f in data["findings"]} == {"in_place_edit", "successor_not_ingested"}
    assert writes_zero(data), data["writes"]
    code, second = deploy.json("apply")
    assert code == 0
    assert writes_zero(second), second["writes"]
    assert_served_exactly_the_current(deploy)
    states = {k: r["version_state"] for k, r in deploy.rows().items()}
    for doc_id in ("hb:policy-v1", "hb:rules-v2", "hb:expenses-v1"):
        assert states[doc_id] == "superseded", doc_id
    assert states["hb:guide-v1"] == states["hb:memo-v1"] == "retired"
    assert states["hb:oncall"] == "pending"
    assert deploy.rows()["hb:faq-v1"]["quarantined"] is True
    assert states["hb:legacy"] == "unknown"

    code, ingested = deploy.json("ingest", "--outbox-only")
    assert (code, ingested["totals"]["reingested"]) == (0, 2)
    code, third = deploy.json("apply")
    assert code == 0
    assert not writes_zero(third)  # the quarantine of the re-ingested faq is lifted
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])
    code, fourth = deploy.json("apply")
    assert code == 0
    assert writes_zero(fourth), fourth["writes"]
    assert_served_exactly_the_current(deploy)
    assert {"hb:rules-v3", "hb:faq-v1", "hb:policy-v2", "hb:legacy"} <= deploy.served()


def test_apply_and_rollback_never_touch_vectors_text_or_the_point_set(
    deploy: Deployment,
) -> None:
    drifted_corpus(deploy)
    before = deploy.points()
    code, data = deploy.json("apply")
    assert code == 0
    applied = deploy.points()
    assert applied.payloads != before.payloads  # payloads were repaired...
    assert applied.vectors == before.vectors  # ...and nothing else
    assert applied.unmanaged() == before.unmanaged()
    result = deploy.cli("rollback", data["run_id"])
    assert result.exit_code == 0, result.output
    rolled = deploy.points()
    assert rolled.vectors == before.vectors
    assert rolled.unmanaged() == before.unmanaged()


def _without_updated_at(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: {c: v for c, v in r.items() if c != "updated_at"} for k, r in rows.items()}


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_rollback_restores_exactly_and_the_audit_chain_is_tamper_evident(
    deploy: Deployment,
) -> None:
    drifted_corpus(deploy)
    rows_before, points_before = deploy.rows(), deploy.points()
    code, data = deploy.json("apply")
    assert code == 0
    run_id = data["run_id"]
    assert deploy.rows() != rows_before
    code, verified = deploy.json("audit", "verify")
    assert code == 0
    assert verified["ok"] is True
    assert verified["entries"] > 0

    code, dry = deploy.json("rollback", run_id, "--dry-run")
    assert (code, dry["dry_run"], dry["run_id"]) == (0, True, None)
    assert deploy.rows() != rows_before  # nothing written
    code, rolled = deploy.json("rollback", run_id)
    assert code == 0
    assert rolled["rolled_back"] == run_id
    assert rolled["rows"] == dry["rows"] == data["writes"]["table"]
    # Every row as it was before the apply; every chunk derived from its restored row: exactly
    # as before, except the two chunks whose drift the apply repaired without touching their
    # row (a rollback never writes drift back: rows and chunks agree).
    assert _without_updated_at(deploy.rows()) == _without_updated_at(rows_before)
    repaired = set(sorted(points_before.of("hb:handbook-v1"))[:2])
    after = deploy.points()
    assert rolled["points"] == data["writes"]["points"] - len(repaired)
    assert {k: v for k, v in after.payloads.items() if k not in repaired} == {
        k: v for k, v in points_before.payloads.items() if k not in repaired
    }
    rows = deploy.rows()
    for pid in repaired:
        doc = rows[after.payloads[pid]["doc_id"]]
        assert after.payloads[pid]["version_state"] == doc["version_state"] == "superseded"
    assert after.vectors == points_before.vectors
    code, entries = deploy.json("audit", "show", "--run", rolled["run_id"])
    assert code == 0
    assert entries["entries"]
    assert {e["actor"] for e in entries["entries"]} == {"rollback"}
    assert deploy.json("audit", "verify")[0] == 0

    # Alter one entry in the database: verify fails; put it back: it passes again.
    with deploy.stores() as opened:
        first = next(audit.show(opened.table.engine, run_id=run_id))
    seq, original = first["seq"], json.dumps(first["after"])
    cast = "CAST(:after AS JSONB)" if deploy.table_url.startswith("postgresql") else ":after"
    deploy.sql(
        f"UPDATE audit_log SET after = {cast} WHERE seq = :seq",
        after=json.dumps({"version_state": "current"}),
        seq=seq,
    )
    code, verified = deploy.json("audit", "verify")
    assert code == 1
    assert verified["ok"] is False
    assert any(f"entry {seq}" in p and "altered" in p for p in verified["problems"])
    deploy.sql(f"UPDATE audit_log SET after = {cast} WHERE seq = :seq", after=original, seq=seq)
    assert deploy.json("audit", "verify")[0] == 0

    # Cut the last entry off the end: verify fails too.
    deploy.sql("DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)")
    code, verified = deploy.json("audit", "verify")
    assert code == 1
    assert any("missing" in p for p in verified["problems"])


def _stores_but_runs(deploy: Deployment) -> dict[str, Any]:
    """Every table except the run record (runs, findings, and the plan a refused run saves
    for approval: a record of the refusal, not a change to what is served)."""
    return {k: v for k, v in deploy.dump().items() if k not in ("runs", "findings", "plans")}


def _assert_refused_run(deploy: Deployment, data: dict[str, Any], kind: str) -> None:
    assert data["refused"] is True
    assert data["forced"] is False
    assert writes_zero(data)  # what it would have written is in the plan, not in writes
    assert data["plan"]["rows"] or data["plan"]["payloads"] or kind == "source_empty"
    assert ("guard", kind, None) in kinds(data)
    guards = [f for f in data["findings"] if f["check"] == "guard"]
    assert guards
    assert {f["severity"] for f in guards} == {"critical"}
    with deploy.stores() as opened:
        run = opened.table.get_run(data["run_id"])
        recorded = opened.table.findings_of(data["run_id"])
    assert run is not None
    assert run.status == "refused"
    assert ("guard", kind) in {(f["check"], f["kind"]) for f in recorded}


def _assert_forced_run_audited(deploy: Deployment, data: dict[str, Any]) -> None:
    assert (data["refused"], data["forced"]) == (False, True)
    with deploy.stores() as opened:
        entries = list(audit.show(opened.table.engine, run_id=data["run_id"]))
    [override] = [e for e in entries if e["target_type"] == "run"]
    assert override["target"] == data["run_id"]
    assert override["after"] == {"forced": True}
    assert override["before"]["guard"]


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_guard_refuses_an_emptied_source(deploy: Deployment) -> None:
    deploy.family("expenses", 2)
    deploy.family("travel", 1)
    deploy.family("faq", 1)
    deploy.init_ingest()
    for note in deploy.vault.glob("*.md"):
        note.unlink()
    assert deploy.vault.is_dir()
    stores_before, points_before = _stores_but_runs(deploy), deploy.points()

    for args in [(), ("--now", instant(30))]:  # within the grace period, and past it
        code, data = deploy.json("apply", *args)
        assert code == 3
        _assert_refused_run(deploy, data, "source_empty")
        assert _stores_but_runs(deploy) == stores_before
        assert deploy.points().payloads == points_before.payloads
    assert deploy.json("run", "--now", instant(30))[0] == 3
    assert _stores_but_runs(deploy) == stores_before

    code, data = deploy.json("apply", "--now", instant(30), "--force")
    assert code == 0
    _assert_forced_run_audited(deploy, data)
    assert {r["version_state"] for r in deploy.rows().values()} == {"retired"}
    assert deploy.served() == set()
    # Once everything it held is retired, an empty source is what the table expects.
    code, data = deploy.json("apply", "--now", instant(30))
    assert (code, data["refused"]) == (0, False)
    assert writes_zero(data)


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_guard_refuses_an_over_threshold_change(deploy: Deployment) -> None:
    deploy.configure(fraction=0.2)
    names = [f"fam{n:02d}" for n in range(14)]
    for name in names:
        deploy.family(name, 2, sections=1)
    deploy.init_ingest()
    points = deploy.points()
    drifted = names[:12]
    for name in drifted:  # a re-chunking run resurrected twelve old versions
        deploy.set_payload(sorted(points.of(f"hb:{name}-v1")), {"version_state": "current"})
    stores_before, points_before = _stores_but_runs(deploy), deploy.points()

    code, data = deploy.json("apply")
    assert code == 3
    _assert_refused_run(deploy, data, "blast_radius")
    assert data["guard"]["changed_families"] == 12
    assert data["guard"]["families_total"] == 14
    assert data["guard"]["tripped"] == ["blast_radius"]  # families and chunks: one reason
    refusal = deploy.cli("apply").output
    assert (
        "REFUSED by the blast-radius guard (too much of what is served would change): 12 of 14"
        in refusal
    )
    assert _stores_but_runs(deploy) == stores_before
    assert deploy.points().payloads == points_before.payloads
    code, plan = deploy.json("plan")
    assert code == 2  # plan shows the trip but is not refused: it writes nothing anyway
    assert plan["refused"] is False
    assert ("guard", "blast_radius", None) in kinds(plan)

    code, data = deploy.json("apply", "--force")
    assert code == 0
    _assert_forced_run_audited(deploy, data)
    assert data["writes"]["points"] == 12
    assert deploy.points().payloads == points.payloads
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])


def test_plan_and_check_write_nothing(deploy: Deployment) -> None:
    drifted_corpus(deploy)
    dump_before, points_before = deploy.dump(), deploy.points()
    for command in ("plan", "check"):
        code, data = deploy.json(command)
        assert code == 2
        assert data["mode"] == command
        assert not writes_zero(data)  # the writes it *would* do
        assert deploy.dump() == dump_before, command
        assert deploy.points().payloads == points_before.payloads, command
        assert deploy.cli(command).exit_code == 2  # the table rendering too
        assert deploy.dump() == dump_before, command
    code, dry = deploy.json("repair", "--family", "hb:expenses", "--dry-run")
    assert code == 2
    assert dry["plan"]["rows"]
    assert deploy.dump() == dump_before
    assert deploy.points().payloads == points_before.payloads


def test_repair_fixes_only_its_scope(deploy: Deployment) -> None:
    drifted_corpus(deploy)
    points_before = deploy.points()
    rows_before = deploy.rows()

    code, data = deploy.json("repair", "--family", "hb:expenses")
    assert code == 0
    assert {f["family"] for f in data["findings"]} == {"hb:expenses"}
    assert deploy.rows()["hb:expenses-v1"]["version_state"] == "superseded"
    after = deploy.points()
    changed = {
        after.payloads[p]["doc_id"]
        for p in after.payloads
        if after.payloads[p] != points_before.payloads[p]
    }
    assert changed == {"hb:expenses-v1"}
    rows = deploy.rows()
    assert {k for k in rows if rows[k] != rows_before[k]} == {"hb:expenses-v1"}

    dump = deploy.dump()
    code, data = deploy.json("repair", "--doc", "hb:policy-v1", "--dry-run")
    assert code == 2
    assert data["mode"] == "plan"
    assert [r["doc_id"] for r in data["plan"]["rows"]] == ["hb:policy-v1"]
    assert deploy.dump() == dump
    code, data = deploy.json("repair", "--doc", "hb:policy-v1")
    assert code == 0
    assert {f["doc_id"] for f in data["findings"]} == {"hb:policy-v1"}
    rows_after = deploy.rows()
    assert {k for k in rows_after if rows_after[k] != rows[k]} == {"hb:policy-v1"}
    assert rows_after["hb:policy-v1"]["version_state"] == "superseded"

    # Everything else is still there to be found.
    code, data = deploy.json("check")
    remaining = {f["doc_id"] for f in data["findings"]}
    assert remaining >= {"hb:handbook-v1", "hb:guide-v1", "hb:memo-v1", "hb:faq-v1"}
    assert not remaining & {"hb:expenses-v1", "hb:policy-v1"}

    for args in [(), ("--doc", "hb:faq-v1", "--family", "hb:faq")]:  # exactly one scope
        result = deploy.cli("repair", *args)
        assert result.exit_code == 64  # a usage error, not "drift found"
        assert "exactly one of --family or --doc" in result.output


def test_one_repair_run_covers_several_families_and_nothing_else(deploy: Deployment) -> None:
    drifted_corpus(deploy)
    points_before = deploy.points()
    rows_before = deploy.rows()

    code, data = deploy.json("repair", "--family", "hb:expenses", "--family", "hb:policy")
    assert code == 0
    assert {f["family"] for f in data["findings"]} == {"hb:expenses", "hb:policy"}
    rows = deploy.rows()
    assert {k for k in rows if rows[k] != rows_before[k]} == {"hb:expenses-v1", "hb:policy-v1"}
    after = deploy.points()
    changed = {
        after.payloads[p]["doc_id"]
        for p in after.payloads
        if after.payloads[p] != points_before.payloads[p]
    }
    assert changed == {"hb:expenses-v1", "hb:policy-v1"}
    # One run did it, and the rest of the corpus is still there to be found.
    assert [r["mode"] for r in deploy.dump()["runs"].values()].count("repair") == 1
    code, data = deploy.json("check")
    remaining = {f["doc_id"] for f in data["findings"]}
    assert remaining >= {"hb:handbook-v1", "hb:guide-v1"}
    assert not remaining & {"hb:expenses-v1", "hb:policy-v1"}
    # An unknown family among known ones refuses the whole run: nothing is written.
    result = deploy.cli("repair", "--family", "hb:handbook", "--family", "hb:nope")
    assert result.exit_code == 1
    assert "hb:nope" in result.output
    assert deploy.rows() == rows


def test_json_output_has_exactly_the_documented_keys(deploy: Deployment) -> None:
    drifted_corpus(deploy)
    # Exit codes too: drift found (2) by check/plan; applied (0); drift left that waits on
    # the ingestion pipeline (2).
    for command, exit_code in [("check", 2), ("plan", 2), ("apply", 0), ("run", 0), ("check", 2)]:
        code, data = deploy.json(command)
        assert code == exit_code, command
        assert set(data) == REPORT_KEYS | REPORT_EXTRAS, command
        assert data["mode"] == command
        # `writes` carries the four counts and the index creations (docs/contracts.md).
        assert set(data["writes"]) == WRITE_KEYS | {"index"}
        assert all(isinstance(v, int) for v in data["writes"].values())
        assert set(data["summary"]) == set(CHECKS)
        for counts in data["summary"].values():
            assert set(counts) == {"checked", "findings"}
        assert sum(c["findings"] for c in data["summary"].values()) == len(data["findings"])
        for finding in data["findings"]:
            assert set(finding) == FINDING_KEYS
            assert finding["severity"] in ("critical", "warning", "info")
        for stamp in (data["started_at"], data["finished_at"]):
            assert datetime.fromisoformat(stamp).tzinfo is not None
        assert set(data["plan"]) == {"rows", "payloads", "reingest", "indexes"}
    _code, data = deploy.json("check", "--check", "payload", "--check", "family")
    assert set(data["summary"]) == {"payload", "family"}
