"""Rollback: by key, derived, guarded by later runs (``--cascade``), under the lease, dry-run
first; through the CLI on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from acceptance_kit import Deployment, writes_zero

from reconciler.app.operations import engine_options, reconcile
from reconciler.errors import LeaseLost
from reconciler.payload import payload_for

DIALECTS = pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
MANAGED_ROW = ("version_state", "superseded_by", "effective_to", "doc_class")


def managed_rows(deploy: Deployment) -> dict[str, dict[str, Any]]:
    return {k: {c: r[c] for c in MANAGED_ROW} for k, r in deploy.rows().items()}


def assert_rows_and_chunks_agree(deploy: Deployment) -> None:
    """Every chunk carries exactly what ``payload_for`` derives from its row."""
    payloads = deploy.points().payloads.values()
    with deploy.stores() as opened:
        rows = opened.table.get_documents({p["doc_id"] for p in payloads})
    for payload in payloads:
        expected = payload_for(rows[payload["doc_id"]])
        got = {k: payload.get(k) for k in expected}
        assert got == expected, payload["doc_id"]


@DIALECTS
def test_a_rollback_under_a_later_run_is_refused_and_cascades_newest_first(
    deploy: Deployment,
) -> None:
    for n in range(10):
        deploy.note(f"p{n}", family=f"p{n}", status="current", doc_class="internal")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    before_a = managed_rows(deploy)

    for n in range(10):
        deploy.edit_front(f"p{n}", status="retired")
    code, a = deploy.json("apply")
    assert (code, a["writes"]["table"]) == (0, 10)
    for n in range(5):
        deploy.edit_front(f"p{n}", doc_class="confidential")
    code, b = deploy.json("apply")
    assert (code, b["writes"]["table"]) == (0, 5)
    after_b = managed_rows(deploy)

    result = deploy.cli("rollback", a["run_id"])
    assert result.exit_code == 3, result.output
    assert b["run_id"] in result.output
    assert "--cascade" in result.output
    assert managed_rows(deploy) == after_b  # refused: nothing written

    code, dry = deploy.json("rollback", a["run_id"], "--cascade", "--dry-run")
    assert code == 0
    assert [c["rolled_back"] for c in dry["cascaded"]] == [b["run_id"]]
    assert managed_rows(deploy) == after_b

    code, rolled = deploy.json("rollback", a["run_id"], "--cascade")
    assert code == 0, rolled
    assert [c["rolled_back"] for c in rolled["cascaded"]] == [b["run_id"]]
    assert managed_rows(deploy) == before_a
    assert_rows_and_chunks_agree(deploy)
    # Rows and chunks agree: only the source's drift is left (the vault still says retired).
    code, data = deploy.json("check", "--check", "payload", "--check", "siblings")
    assert (code, data["findings"]) == (0, [])
    assert writes_zero(data)
    assert deploy.json("audit", "verify")[0] == 0


def test_rollback_restores_only_the_keys_the_run_changed(deploy: Deployment) -> None:
    """Run A retires a note; run B (on another document) is unrelated; someone changes the
    note's doc_class in the table afterwards by hand: the rollback of A puts the state back
    and leaves that doc_class alone, and the chunks follow the row."""
    deploy.note("p", family="p", status="current", doc_class="internal")
    deploy.note("q", family="q", status="current")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    deploy.edit_front("p", status="retired")
    code, a = deploy.json("apply")
    assert code == 0
    deploy.edit_front("q", status="retired")
    assert deploy.json("apply")[0] == 0
    deploy.set_row("hb:p", doc_class="restricted")

    code, rolled = deploy.json("rollback", a["run_id"])
    assert code == 0, rolled
    row = deploy.rows()["hb:p"]
    assert (row["version_state"], row["doc_class"]) == ("current", "restricted")
    assert deploy.rows()["hb:q"]["version_state"] == "retired"
    assert_rows_and_chunks_agree(deploy)


def test_a_runner_that_loses_its_lease_stops_writing_and_fails(deploy: Deployment) -> None:
    """Another runner takes the lease over in the middle of the payload writes: the next
    batch is not sent, the run is recorded as failed, and what it wrote is audited."""
    deploy.config.write_text(
        deploy.config.read_text().replace(
            'collection = "corpus"', 'collection = "corpus"\nwrite_batch = 2\nscroll_batch = 2'
        )
    )
    for n in range(8):
        deploy.family(f"f{n}", 2)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    for n in range(8):
        deploy.edit_front(f"f{n}-v2", status="retired")

    def steal(stage: str, done: int) -> None:
        if stage == "applied" and done >= 4:
            deploy.sql("UPDATE leases SET holder = 'elsewhere:1:x'")

    settings = deploy.settings
    options = engine_options(settings, mode="apply")
    with pytest.raises(LeaseLost, match="writing stopped before the next batch"):
        reconcile(settings, options, progress=steal)
    [run] = [r for r in deploy.dump()["runs"].values() if r["mode"] == "apply" and r["error"]]
    assert run["status"] == "failed"
    assert "LeaseLost" in run["error"]
    written = run["points_written"]
    assert 0 < written < 8 * 2 * 2
    _code, shown = deploy.json("audit", "show", "--run", run["run_id"])
    confirmed = [e for e in shown["entries"] if e["target_type"] == "confirm"]
    assert sum(e["after"]["points"] for e in confirmed) == written


def test_a_field_changed_since_outside_any_run_is_left_and_listed(deploy: Deployment) -> None:
    """Run A retired a note; someone then set it back to current by hand. The rollback of A
    does not overwrite that (nor audit a before-value that was not there): it lists it."""
    deploy.note("p", family="p", status="current")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    deploy.edit_front("p", status="retired")
    code, a = deploy.json("apply")
    assert code == 0
    deploy.set_row("hb:p", version_state="pending")
    code, rolled = deploy.json("rollback", a["run_id"])
    assert code == 0, rolled
    assert deploy.rows()["hb:p"]["version_state"] == "pending"
    [left] = [n for n in rolled["not_undone"] if n["target"] == "hb:p"]
    assert left["after"] == {"version_state": "pending", "changed_since": True}
    assert rolled["rows"] == 0


def rolled_back_counts(data: dict[str, Any]) -> dict[str, Any]:
    """What a rollback (or its dry run) restored, cascade included, without the run ids it
    was (or would be) recorded as."""
    return {
        "rolled_back": data["rolled_back"],
        "rows": data["rows"],
        "payload_writes": data["payload_writes"],
        "points": data["points"],
        "not_undone": data["not_undone"],
        "cascaded": [rolled_back_counts(c) for c in data["cascaded"]],
    }


def test_a_dry_cascade_counts_exactly_what_the_real_cascade_restores(deploy: Deployment) -> None:
    """Run A retires a note and run B makes it current again (the same field): on its own the
    dry run of A's rollback saw B's value and thought A had nothing left to restore, while
    the real cascade rolls B back first, then A (issue 27, item 9)."""
    deploy.note("p", family="p", status="current")
    deploy.note("q", family="q", status="current")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    deploy.edit_front("p", status="retired")
    code, a = deploy.json("apply")
    assert (code, a["writes"]["table"]) == (0, 1)
    deploy.edit_front("p", status="current")
    code, b = deploy.json("apply")
    assert (code, b["writes"]["table"]) == (0, 1)
    after_b = managed_rows(deploy), deploy.points().payloads

    code, dry = deploy.json("rollback", a["run_id"], "--cascade", "--dry-run")
    assert code == 0, dry
    assert (managed_rows(deploy), deploy.points().payloads) == after_b  # dry: nothing written
    code, rolled = deploy.json("rollback", a["run_id"], "--cascade")
    assert code == 0, rolled
    assert rolled_back_counts(dry) == rolled_back_counts(rolled)
    assert (rolled["rows"], rolled["cascaded"][0]["rows"]) == (1, 1)
    assert deploy.rows()["hb:p"]["version_state"] == "current"  # before A, as B left it
