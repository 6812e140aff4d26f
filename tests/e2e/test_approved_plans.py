"""Acceptance (issue 37): approve a plan, not a flag. A refused run saves what it held back as
a plan; ``reconciler apply --plan ID`` applies exactly that plan, once, and refuses a plan the
stores have moved past or one that expired. The refusal, ``status`` and ``plans`` name the
command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from acceptance_kit import Deployment, body, day

ROOT = Path(__file__).resolve().parents[2]
NOTES = 20
RETIRED = 12


def retiring(deploy: Deployment) -> tuple[list[str], list[str]]:
    """``NOTES`` current notes ingested clean, then ``RETIRED`` of them retired in the source
    (a mass retirement the guard stops: 12 of 20 families hidden)."""
    deploy.configure(fraction=0.2)
    for n in range(NOTES):
        deploy.note(f"n{n:02d}", body(f"note {n}", f"rule {n}"), id=f"n{n:02d}",
                    status="current", effective_from=day(-300 + n))  # fmt: skip
    deploy.init_ingest()
    for n in range(RETIRED):
        deploy.edit_front(f"n{n:02d}", status="retired")
    ids = [f"hb:n{n:02d}" for n in range(NOTES)]
    return ids[:RETIRED], ids[RETIRED:]


def refused_plan(deploy: Deployment) -> tuple[str, dict[str, Any]]:
    code, refused = deploy.json("run")
    assert (code, refused["refused"]) == (3, True), refused["guard"]
    plan_id = refused["guard"]["plan_id"]
    assert refused["guard"]["approve"] == f"reconciler apply --plan {plan_id}"
    return plan_id, refused


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_a_refused_run_is_approved_as_its_saved_plan(deploy: Deployment) -> None:
    retired, kept = retiring(deploy)
    plan_id, refused = refused_plan(deploy)
    assert refused["guard"]["held"] == retired
    assert deploy.served() == set(retired + kept)  # nothing hidden yet
    text = deploy.cli("run").output
    assert f"saved as plan {plan_id}" in text
    assert f"`reconciler apply --plan {plan_id}`" in text
    # the next cron run, refused again over the same stores, keeps the same plan
    assert refused_plan(deploy)[0] == plan_id

    code, status = deploy.json("status")
    assert code == 0
    [listed] = status["plans"]
    assert (listed["plan_id"], listed["status"], listed["documents"]) == (
        plan_id,
        "pending",
        RETIRED,
    )
    assert (listed["hidden"], listed["approve"]) == (RETIRED, f"reconciler apply --plan {plan_id}")
    assert f"reconciler apply --plan {plan_id}" in deploy.cli("status").output
    code, shown = deploy.json("plans", plan_id[:8])
    assert code == 0
    writes = shown["plans"][0]["writes"]
    assert sorted(writes) == retired
    assert writes["hb:n00"]["before"]["version_state"] == "current"
    assert writes["hb:n00"]["after"]["version_state"] == "retired"
    shown_text = deploy.cli("plans", plan_id).output
    assert "version_state: 'current' -> 'retired'" in shown_text
    assert f"approve: reconciler apply --plan {plan_id}" in shown_text

    code, applied = deploy.json("apply", "--plan", plan_id[:8])
    assert code == 0, applied
    assert (applied["plan_id"], applied["writes"]["table"]) == (plan_id, RETIRED)
    assert deploy.served() == set(kept)
    code, clean = deploy.json("check")
    assert (code, clean["findings"]) == (0, [])
    code, again = deploy.json("run")
    assert (code, again["refused"], again["writes"]["table"]) == (0, False, 0)

    # applied at most once
    code, twice = deploy.json("apply", "--plan", plan_id)
    assert (code, twice["error"]) == (3, "plan_refused"), twice
    assert "applied at most once" in twice["message"]
    # the approval is audited with the run that applied it
    code, audit = deploy.json("audit", "show", "--run", applied["run_id"])
    reasons = [e["reason"] for e in audit["entries"]]
    assert reasons[0] == f"approved plan {plan_id}"
    assert deploy.json("plans")[1]["plans"] == []  # nothing open


def test_a_plan_the_stores_moved_past_is_refused(deploy: Deployment) -> None:
    retired, kept = retiring(deploy)
    plan_id, _ = refused_plan(deploy)
    deploy.set_row("hb:n03", title="edited by hand since")
    code, stale = deploy.json("apply", "--plan", plan_id)
    assert (code, stale["error"]) == (3, "plan_refused"), stale
    assert "moved past it" in stale["message"]
    assert "hb:n03" in stale["message"]
    assert deploy.served() == set(retired + kept)  # nothing written
    assert deploy.json("plans", plan_id)[1]["plans"][0]["status"] == "stale"
    # the next run plans again and saves a new plan
    assert refused_plan(deploy)[0] != plan_id


def test_a_plan_whose_chunks_moved_is_refused(deploy: Deployment) -> None:
    _retired, _kept = retiring(deploy)
    plan_id, _ = refused_plan(deploy)
    point = next(p for p, v in deploy.points().payloads.items() if v["doc_id"] == "hb:n05")
    deploy.set_payload([point], {"doc_class": "changed-by-another-tool"})
    code, stale = deploy.json("apply", "--plan", plan_id)
    assert (code, stale["error"]) == (3, "plan_refused"), stale
    assert "hb:n05" in stale["message"]


def test_an_expired_plan_is_refused_and_said_so(deploy: Deployment) -> None:
    retiring(deploy)
    plan_id, _ = refused_plan(deploy)
    deploy.sql("UPDATE plans SET expires_at = created_at")
    code, expired = deploy.json("apply", "--plan", plan_id)
    assert (code, expired["error"]) == (3, "plan_refused"), expired
    assert "expired" in expired["message"]
    assert "guard.plan_ttl" in expired["message"]
    code, unknown = deploy.json("apply", "--plan", "no-such-plan")
    assert code == 1
    assert "no saved plan" in unknown["message"]


def test_an_outage_saves_nothing_to_approve(deploy: Deployment) -> None:
    retiring(deploy)
    for path in deploy.vault.glob("*.md"):
        path.unlink()
    code, refused = deploy.json("run")
    assert (code, refused["refused"]) == (3, True)
    assert "plan_id" not in refused["guard"]
    assert "rerun with --force" in deploy.cli("run").output


def test_the_alert_names_the_command() -> None:
    rules = yaml.safe_load((ROOT / "config" / "alerts" / "reconciler.rules.yml").read_text())
    [refused] = [
        rule
        for group in rules["groups"]
        for rule in group["rules"]
        if rule.get("alert") == "ReconcilerGuardRefused"
    ]
    assert "`reconciler apply --plan ID`" in refused["annotations"]["runbook"]
    assert "`reconciler status`" in refused["annotations"]["runbook"]


def test_a_plan_the_sources_no_longer_ask_for_is_not_applied(deploy: Deployment) -> None:
    """The mass retirement is undone in the source before anyone approves it: the next cron run
    succeeds with nothing to write, so the saved plan asks for writes no source wants any more.
    It was left ``pending`` (``status`` still said to approve it) and ``apply --plan`` retired
    the twelve notes that the source says are current; the next run was then refused."""
    retired, kept = retiring(deploy)
    plan_id, _ = refused_plan(deploy)
    for doc_id in retired:
        deploy.edit_front(doc_id.removeprefix("hb:"), status="current")
    code, settled = deploy.json("run")
    assert (code, settled["refused"], settled["writes"]["table"]) == (0, False, 0), settled
    assert deploy.json("status")[1]["plans"] == []  # nothing left to approve
    assert deploy.json("plans", plan_id)[1]["plans"][0]["status"] == "stale"
    code, moot = deploy.json("apply", "--plan", plan_id)
    assert (code, moot["error"]) == (3, "plan_refused"), moot
    assert "no longer asks for it" in moot["message"]
    assert deploy.served() == set(retired + kept)  # nothing hidden
    code, clean = deploy.json("check")
    assert (code, clean["findings"]) == (0, [])
