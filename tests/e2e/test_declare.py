"""``reconciler declare`` through the CLI, on SQLite and PostgreSQL with Qdrant local mode: a
person's decisions recorded as declarations, planned (``--dry-run`` writes nothing anywhere),
guarded against the whole corpus, audited, undone by ``rollback`` (and redone by the rollback
of that rollback); what a system of record says wins over them, and a source that later links
the documents the other way is reported, never overridden."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from acceptance_kit import Deployment, body, day, kinds, writes_zero

from reconciler.model import MANAGED_KEYS

pytestmark = pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)


def adopted(deploy: Deployment, notes: dict[str, dict[str, Any]], *, fraction: float = 1.0) -> None:
    """Notes ingested, then the source taken out of the config: rows no configured source holds
    (what ``bootstrap`` leaves), each its own family."""
    for name, front in notes.items():
        deploy.note(name, body(name.replace("-", " "), f"The text of {name}."), **front)
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    deploy.config.write_text(
        deploy.config.read_text(encoding="utf-8")
        .replace('[[sources]]\nname = "hb"\ntype = "vault"\npath = "vault"\n', "")
        .replace("max_changed_fraction = 1.0", f"max_changed_fraction = {fraction}"),
        encoding="utf-8",
    )
    assert "[[sources]]" not in deploy.config.read_text(encoding="utf-8")


def rows(deploy: Deployment) -> dict[str, tuple[Any, ...]]:
    """Each row's managed fields (what a rollback restores)."""
    fields = ("doc_family_id", "version_state", "superseded_by", "effective_to")
    return {k: tuple(str(v[f]) for f in fields) for k, v in deploy.rows().items()}


def managed(deploy: Deployment) -> dict[str, dict[str, Any]]:
    return {pid: {k: p.get(k) for k in MANAGED_KEYS} for pid, p in deploy.points().payloads.items()}


def tables(deploy: Deployment) -> dict[str, Any]:
    """Every table but the leases (a command takes and gives back its lease)."""
    return {k: v for k, v in deploy.dump().items() if k != "leases"}


POLICIES = {
    "policy-2024": {"effective_from": day(-400)},
    "policy": {"effective_from": day(-30)},
    "other": {},
}


def test_declare_is_a_planned_guarded_audited_run_that_rollback_undoes(
    deploy: Deployment,
) -> None:
    adopted(deploy, POLICIES)
    before_tables, before_rows, before_points = tables(deploy), rows(deploy), managed(deploy)
    assert deploy.served() == {"hb:policy-2024", "hb:policy", "hb:other"}
    decide = ["--supersede", "hb:policy-2024", "--by", "hb:policy", "--who", "alice"]

    code, dry = deploy.json("declare", *decide, "--dry-run", "--reason", "HR said so")
    assert code == 2  # a plan: it would write
    assert dry["dry_run"] is True
    assert [d["run_id"] for d in dry["declarations"]] == [None]  # (no run records it)
    assert ("family", "successor_not_marked", "hb:policy-2024") in kinds(dry)
    assert {r["doc_id"]: sorted(r["fields"]) for r in dry["plan"]["rows"]} == {
        "hb:policy-2024": ["effective_to", "superseded_by", "version_state"],
        "hb:policy": ["doc_family_id"],
    }
    assert tables(deploy) == before_tables  # no declaration, no run, no audit entry
    assert managed(deploy) == before_points

    code, done = deploy.json("declare", *decide, "--reason", "HR said so")
    assert code == 0, done
    assert done["mode"] == "declare"
    assert done["writes"]["table"] == 2
    [made] = done["declarations"]
    assert (made["declared_by"], made["reason"], made["run_id"]) == (
        "alice",
        "HR said so",
        done["run_id"],
    )
    after_rows = rows(deploy)
    assert after_rows["hb:policy-2024"][1:3] == ("superseded", "hb:policy")
    assert after_rows["hb:policy"][0] == after_rows["hb:policy-2024"][0]  # one family
    assert deploy.served() == {"hb:policy", "hb:other"}
    code, checked = deploy.json("check")
    assert (code, checked["findings"]) == (0, [])
    code, again = deploy.json("run")
    assert code == 0
    assert writes_zero(again)

    code, listed = deploy.json("declare", "--list")
    assert [d["id"] for d in listed["declarations"]] == [made["id"]]
    assert deploy.json("status")[1]["declarations"] == 1
    audited = [e for e in deploy.dump()["audit_log"].values() if e["target_type"] == "declaration"]
    assert [(e["target"], e["run_id"], e["before"]) for e in audited] == [
        (made["id"], done["run_id"], None)
    ]

    code, undone = deploy.json("rollback", done["run_id"])
    assert code == 0, undone
    assert (undone["declarations"], undone["rows"]) == (1, 2)
    assert rows(deploy) == before_rows
    assert managed(deploy) == before_points
    assert deploy.json("declare", "--list")[1]["declarations"] == []
    assert deploy.json("status")[1]["declarations"] == 0
    [revoked] = deploy.json("declare", "--list", "--all")[1]["declarations"]
    assert revoked["revoked_by"] == undone["run_id"]
    code, checked = deploy.json("check")
    assert (code, checked["findings"]) == (0, [])  # nothing brings the declaration back

    code, redone = deploy.json("rollback", undone["run_id"])  # the rollback of the rollback
    assert code == 0, redone
    assert rows(deploy) == after_rows
    assert [d["id"] for d in deploy.json("declare", "--list")[1]["declarations"]] == [made["id"]]
    assert deploy.cli("audit", "verify").exit_code == 0


def test_a_chain_declared_ahead_serves_one_version_at_every_instant(deploy: Deployment) -> None:
    adopted(
        deploy,
        {
            "vpn-2024": {"effective_from": day(-400), "status": "current"},
            "vpn-2025": {"effective_from": day(-30)},
            "vpn-2027": {"effective_from": day(30)},
        },
    )
    for old, new in (("vpn-2024", "vpn-2025"), ("vpn-2025", "vpn-2027")):
        code, data = deploy.json("declare", "--supersede", f"hb:{old}", "--by", f"hb:{new}")
        assert code == 0, data
    now = datetime.now(UTC)
    assert deploy.served() == {"hb:vpn-2025"}
    assert deploy.served(now + timedelta(days=31)) == {"hb:vpn-2027"}
    # the windows meet: each version ends where its successor starts
    found = deploy.rows()
    for old, new in (("vpn-2024", "vpn-2025"), ("vpn-2025", "vpn-2027")):
        assert found[f"hb:{old}"]["effective_to"] == found[f"hb:{new}"]["effective_from"]
    code, checked = deploy.json("check")
    assert (code, checked["findings"]) == (0, [])


def test_what_cannot_be_declared_is_listed_and_nothing_is_written(deploy: Deployment) -> None:
    adopted(
        deploy,
        {
            "a": {"effective_from": day(-300)},
            "b": {"effective_from": day(-200)},
            "c": {"effective_from": day(-100)},
            "dead": {"effective_from": day(-50), "status": "superseded"},
        },
    )
    assert deploy.json("declare", "--supersede", "hb:a", "--by", "hb:b")[0] == 0
    before = tables(deploy)
    cases = {
        ("--supersede", "hb:nope", "--by", "hb:a"): "no document 'hb:nope' in the table",
        ("--supersede", "hb:c", "--by", "hb:c"): "cannot supersede itself",
        ("--supersede", "hb:b", "--by", "hb:a"): "says the reverse",
        ("--supersede", "hb:c", "--by", "hb:dead"): "would leave nothing served",
    }
    for args, message in cases.items():
        result = deploy.cli("declare", *args)
        assert result.exit_code == 1, (args, result.output)
        assert message in result.output, (args, result.output)
    # declared again: nothing new, no run, success (a reviewed file can be declared twice)
    code, again = deploy.json("declare", "--supersede", "hb:a", "--by", "hb:b")
    assert (code, again["run_id"], again["declarations"]) == (0, None, [])
    assert "already declared" in again["skipped"][0]
    assert tables(deploy) == before
    assert deploy.json("declare", "--supersede", "hb:b", "--by", "hb:c")[0] == 0
    before = tables(deploy)
    result = deploy.cli("declare", "--supersede", "hb:c", "--by", "hb:a")
    assert result.exit_code == 1
    assert "would close a cycle" in result.output
    assert tables(deploy) == before
    for args in (("--supersede", "hb:a"), ("--family", "F"), ()):
        assert deploy.cli("declare", *args).exit_code == 64, args


def test_the_guard_weighs_a_declaration_against_the_whole_corpus(
    deploy: Deployment, tmp_path: Path
) -> None:
    notes = {f"{n}-{year}": {"effective_from": day(-900 + 300 * i)} for n in range(12)
             for i, year in enumerate((2024, 2025))}  # fmt: skip
    adopted(deploy, notes, fraction=0.2)
    proposals = [
        {
            "id": f"link-{n}",
            "kind": "link",
            "older": f"hb:{n}-2024",
            "newer": f"hb:{n}-2025",
            "direction": "older -> newer",
            "score": 0.9,
            "evidence": "names 1.00 alike",
            "decision": "accept",
        }
        for n in range(12)
    ]
    reviewed = tmp_path / "reviewed.yaml"
    reviewed.write_text(
        yaml.safe_dump(
            {"format": "reconciler-proposals/1", "min_score": 0.7, "proposals": proposals}
        ),
        encoding="utf-8",
    )
    before = tables(deploy)
    code, refused = deploy.json("declare", str(reviewed))
    assert code == 3, refused
    assert refused["refused"] is True
    assert refused["declarations"] == []
    # 12 families of 24 hidden or changed (0.5 > 0.2), weighed against all of them
    assert refused["guard"]["families_total"] == 24
    run = deploy.dump()["runs"][refused["run_id"]]
    assert run["status"] == "refused"
    assert {k: v for k, v in tables(deploy).items() if k not in ("runs", "findings")} == {
        k: v for k, v in before.items() if k not in ("runs", "findings")
    }
    code, forced = deploy.json("declare", str(reviewed), "--force")
    assert code == 0, forced
    assert len(forced["declarations"]) == 12
    assert {d["proposal"] for d in forced["declarations"]} == {p["id"] for p in proposals}
    assert len(deploy.served()) == 12


def test_a_system_of_record_wins_and_a_later_reverse_link_is_reported(deploy: Deployment) -> None:
    deploy.note("a", body("Expenses", "Old rules."), effective_from=day(-300))
    deploy.note("b", body("Expenses", "New rules."), effective_from=day(-100))
    deploy.note("c", body("Leave", "Days off."), effective_from=day(-200), status="current")
    deploy.note("d", body("Leave", "More days off."), effective_from=day(-50), family="leave")
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0

    before = tables(deploy)
    for args, message in {
        ("--supersede", "hb:c", "--by", "hb:b"): "its source declares it current",
        ("--family", "hb:other", "hb:d"): "its source declares family 'hb:leave'",
    }.items():
        result = deploy.cli("declare", *args)
        assert result.exit_code == 1, result.output
        assert message in result.output, result.output
    assert tables(deploy) == before

    # The source says nothing of a and b: the declaration fills it in.
    code, data = deploy.json("declare", "--supersede", "hb:a", "--by", "hb:b")
    assert code == 0, data
    assert deploy.rows()["hb:a"]["superseded_by"] == "hb:b"
    assert "hb:a" not in deploy.served()

    # The source later links them the other way: the source's link wins, the declaration is
    # reported on every run and written nowhere.
    deploy.edit_front("b", superseded_by="a")
    code, data = deploy.json("run")
    assert code == 0, data
    assert ("family", "declaration_conflict", "hb:a") in kinds(data)
    conflict = next(f for f in data["findings"] if f["kind"] == "declaration_conflict")
    assert "declares the reverse" in conflict["actual"]["message"]
    assert conflict["severity"] == "warning"
    row_a, row_b = deploy.rows()["hb:a"], deploy.rows()["hb:b"]
    assert (row_b["version_state"], row_b["superseded_by"]) == ("superseded", "hb:a")
    assert row_a["superseded_by"] is None
    assert "hb:a" in deploy.served()
    code, data = deploy.json("run")
    assert code == 0
    assert writes_zero(data)
    # (the source's own link makes the older one the successor: reported too, and kept)
    assert sorted(f["kind"] for f in data["findings"]) == [
        "declaration_conflict",
        "successor_predates",
    ]


def test_a_reviewed_proposals_file_records_what_was_accepted(
    deploy: Deployment, tmp_path: Path
) -> None:
    texts = {
        "expenses-2024": ("Expenses policy 2024", "Claim within 30 days. Receipts over 20 euros."),
        "expenses": ("Expenses policy", "Claim within 60 days. Receipts over 25 euros."),
        "vpn-old": ("VPN setup (old)", "Install the client. Use the old gateway host."),
        "vpn": ("VPN setup", "Install the client. Use the new gateway host."),
    }
    starts = {"expenses-2024": day(-400), "expenses": day(-30)}
    for name, (title, text) in texts.items():
        deploy.note(name, body(title, text), effective_from=starts.get(name))
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    proposals = tmp_path / "proposals.yaml"
    assert deploy.cli("suggest", "-o", str(proposals)).exit_code == 0
    data = yaml.safe_load(proposals.read_text(encoding="utf-8"))
    links = {p["older"]: p for p in data["proposals"] if p["kind"] == "link"}
    assert set(links) == {"hb:expenses-2024", "hb:vpn-old"}
    links["hb:expenses-2024"]["decision"] = "accept"
    links["hb:vpn-old"]["decision"] = "reject"
    proposals.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    code, done = deploy.json("declare", str(proposals), "--who", "carol")
    assert code == 0, done
    [made] = done["declarations"]
    assert (made["doc_id"], made["target"], made["proposal"]) == (
        "hb:expenses-2024",
        "hb:expenses",
        links["hb:expenses-2024"]["id"],
    )
    assert made["evidence"] == links["hb:expenses-2024"]["evidence"]
    assert any("reject" in left for left in done["skipped"])
    assert deploy.served() == {"hb:expenses", "hb:vpn-old", "hb:vpn"}

    # A link accepted with no direction names a pair only: nothing is recorded.
    links["hb:vpn-old"].update(decision="accept", direction="no direction")
    proposals.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    before = tables(deploy)
    result = deploy.cli("declare", str(proposals))
    assert result.exit_code == 1
    assert "accepted with no direction" in result.output
    assert tables(deploy) == before
