"""Issue 34, re-keying: a vault ingested with path ids, its configuration then fixed to read
each note's own id. Before ``reconciler rekey`` no old id is counted missing and no new id is
registered (``ingest`` refuses, ``run`` reports ``family/rekey_pending``); ``rekey
--dry-run`` shows the pairs and writes nothing; ``rekey`` renames each document in place
(rows, identities, links, chunk payloads; no point added, no vector changed), after which
``run`` has nothing to say and ``default_filter()`` serves every note under exactly one id;
``rollback`` of the rekey run gives the old ids back."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, Points, body, day

from reconciler import default_filter

#: Read each note's id from its ``ref`` frontmatter key instead of its path.
REF_IDS = '[sources.options.fields]\nid = "ref"'


def kinds_of(data: dict[str, Any]) -> Counter[str]:
    return Counter(f"{f['check']}/{f['kind']}" for f in data["findings"])


def ids_by_note(deploy: Deployment, before: Points) -> dict[str, set[str]]:
    """The ids ``default_filter()`` serves each note's chunks under, the note named by the
    path id its points carried before (a point keeps its id through a re-keying)."""
    ids: dict[str, set[str]] = {}
    for pid, payload in deploy.points(default_filter()).payloads.items():
        ids.setdefault(before.payloads[pid]["doc_id"], set()).add(payload["doc_id"])
    return ids


@pytest.fixture
def vault(tmp_path: Path) -> Deployment:
    """Two families of two versions and two single notes, ingested and reconciled under path
    ids; each note carries a ``ref`` the first configuration does not read."""
    deploy = Deployment(tmp_path)
    for name in ("leave", "travel"):
        for v in (1, 2):
            deploy.note(
                f"{name}-v{v}",
                body(f"{name} v{v}", f"{name} rule of version {v}.", "More text."),
                ref=f"POL-{name}-{v}",
                family=name,
                version=str(v),
                status="current" if v == 2 else "superseded",
                superseded_by=None if v == 2 else f"{name}-v2",
                effective_from=day(-300 + 100 * v),
            )
    for name in ("security", "expenses"):
        deploy.note(name, body(name, f"{name} rules."), ref=f"POL-{name}", status="current")
    deploy.init_ingest()
    code, data = deploy.json("run")
    assert code == 0, data
    return deploy


def before_the_rekey(vault: Deployment, old: set[str]) -> None:
    """The old ids are kept and served, nothing is missing, nothing new is registered."""
    code, data = vault.json("run")
    assert code == 0, data
    found = kinds_of(data)
    assert found["family/rekey_pending"] == 6, data["findings"]
    assert not found["family/missing_in_source"]
    assert not found["family/not_ingested"]
    assert vault.served() == old
    code, data = vault.json("ingest")
    assert code == 3, data
    assert data["error"] == "rekey_pending"
    assert "reconciler rekey" in data["message"]
    assert set(vault.rows()) == OLD_IDS


OLD_IDS = {
    "hb:leave-v1",
    "hb:leave-v2",
    "hb:travel-v1",
    "hb:travel-v2",
    "hb:security",
    "hb:expenses",
}


def dry_pairs(vault: Deployment) -> dict[str, str]:
    """``rekey --dry-run`` shows the pairs and writes nothing."""
    before = vault.dump()
    shown = vault.cli("rekey", "--dry-run")
    assert shown.exit_code == 2, shown.output
    assert "would re-key 6 document(s):" in shown.output
    assert "hb:leave-v1 -> hb:POL-leave-1  (leave-v1.md; family hb:leave;" in shown.output
    code, dry = vault.json("rekey", "--dry-run")
    assert code == 2, dry
    assert dry["conflicts"] == []
    assert dry["run_id"] is None
    assert {p["path"] for p in dry["pairs"]} >= {"leave-v1.md", "security.md"}
    assert all(p["chunks"] >= 1 for p in dry["pairs"])
    after = vault.dump()
    assert after["documents"] == before["documents"]
    assert after["audit_log"] == before["audit_log"]
    return {p["old_id"]: p["new_id"] for p in dry["pairs"]}


def renamed_in_place(vault: Deployment, pairs: dict[str, str], before: Points) -> None:
    """Rows, links and chunk payloads name the new ids; the points are the same."""
    rows = vault.rows()
    assert set(rows) == set(pairs.values())
    assert rows["hb:POL-leave-1"]["superseded_by"] == "hb:POL-leave-2"
    assert rows["hb:POL-leave-1"]["source_key"] == "POL-leave-1"
    points = vault.points()
    assert points.vectors == before.vectors  # the same points, nothing embedded
    renamed = ("doc_id", "chunk_id", "superseded_by")
    for pid, payload in points.payloads.items():
        was = before.payloads[pid]
        assert payload["doc_id"] == pairs[was["doc_id"]]
        assert payload["chunk_id"] == payload["doc_id"] + was["chunk_id"][len(was["doc_id"]) :]
        assert payload.get("superseded_by") == pairs.get(was.get("superseded_by", ""))
        assert {k: v for k, v in payload.items() if k not in renamed} == {
            k: v for k, v in was.items() if k not in renamed
        }


def test_a_config_that_changes_ids_is_a_rename_not_missing_plus_new(vault: Deployment) -> None:
    old = vault.served()
    assert old == {"hb:leave-v2", "hb:travel-v2", "hb:security", "hb:expenses"}
    points_before = vault.points()
    vault.configure(source_extra=REF_IDS)
    before_the_rekey(vault, old)
    pairs = dry_pairs(vault)
    assert pairs == {
        "hb:leave-v1": "hb:POL-leave-1",
        "hb:leave-v2": "hb:POL-leave-2",
        "hb:travel-v1": "hb:POL-travel-1",
        "hb:travel-v2": "hb:POL-travel-2",
        "hb:security": "hb:POL-security",
        "hb:expenses": "hb:POL-expenses",
    }

    code, done = vault.json("rekey")
    assert code == 0, done
    assert done["written"] == {"rows": 6, "points": len(points_before.payloads)}
    renamed_in_place(vault, pairs, points_before)

    # Then the run has nothing to say, and each note is served under exactly one id.
    code, data = vault.json("run")
    assert code == 0, data
    assert not kinds_of(data), data["findings"]
    assert vault.served() == {pairs[d] for d in old}
    assert all(len(held) == 1 for held in ids_by_note(vault, points_before).values())
    code, data = vault.json("ingest")
    assert code == 0, data
    assert data["totals"]["ingested"] == 0
    code, again = vault.json("rekey")
    assert code == 0, again
    assert again["pairs"] == []
    assert again["run_id"] is None

    # Rollback gives the old ids back (dry: says so, writes nothing); the run reports the
    # pairs again.
    code, dry = vault.json("rollback", done["run_id"], "--dry-run")
    assert code == 0, dry
    assert (dry["rows"], dry["points"]) == (6, len(points_before.payloads))
    assert set(vault.rows()) == set(pairs.values())
    code, back = vault.json("rollback", done["run_id"])
    assert code == 0, back
    assert set(vault.rows()) == OLD_IDS
    assert vault.points().payloads == points_before.payloads
    code, data = vault.json("run")
    assert code == 0, data
    assert kinds_of(data)["family/rekey_pending"] == 6
    assert vault.served() == old


def test_an_ambiguous_pair_is_a_finding_never_a_guess(tmp_path: Path) -> None:
    """A note whose new id is already registered (another note's, deleted with the change) is
    listed, not renamed: ``rekey`` exits 2 and writes nothing, ``run`` reports it."""
    deploy = Deployment(tmp_path)
    deploy.note("a", body("a", "Text of a."), ref="POL-1")
    deploy.note("POL-1", body("old POL-1", "Text of the old one."))
    deploy.note("b", body("b", "Text of b."), ref="POL-2")
    deploy.init_ingest()
    (deploy.vault / "POL-1.md").unlink()
    deploy.configure(source_extra=REF_IDS)
    before = deploy.dump()

    code, data = deploy.json("rekey")
    assert code == 2, data
    assert [p["old_id"] for p in data["pairs"]] == ["hb:b"]
    assert data["conflicts"] == [
        {
            "source": "hb",
            "path": "a.md",
            "doc_ids": ["hb:a", "hb:POL-1"],
            "reason": "the new id is already registered as another document",
        }
    ]
    rows = deploy.rows()
    assert set(rows) == {"hb:a", "hb:POL-1", "hb:POL-2"}  # the clear pair only
    assert rows["hb:POL-1"] == before["documents"]["hb:POL-1"]
    code, run = deploy.json("run")
    assert code == 0, run
    ambiguous = [f for f in run["findings"] if f["actual"].get("problem") == "rekey_ambiguous"]
    assert [(f["kind"], f["actual"]["path"]) for f in ambiguous] == [("source_problem", "a.md")]


def answered(vault: Deployment, *args: str) -> dict[str, str]:
    """``audit served`` (the real command): each document it lists, and whether served."""
    code, data = vault.json("audit", "served", *args)
    assert code == 0, data
    assert data["log"]["not_read"] == {}, data["log"]
    return {d["doc_id"]: d["served"] for d in data["documents"]}


def test_the_audit_trail_follows_a_rename(vault: Deployment) -> None:
    """``audit served --at T`` before the re-keying answers under the old ids, after it under
    the new ones, however the document is asked for; ``audit history`` of the new id begins
    where the old one's ends."""
    then = datetime.now(UTC).isoformat()
    vault.configure(source_extra=REF_IDS)
    code, done = vault.json("rekey")
    assert code == 0, done
    now = datetime.now(UTC).isoformat()

    old = {"hb:leave-v1": "no", "hb:leave-v2": "yes"}
    new = {"hb:POL-leave-1": "no", "hb:POL-leave-2": "yes"}
    assert answered(vault, "--at", then, "--family", "hb:leave") == old
    assert answered(vault, "--at", now, "--family", "hb:leave") == new
    assert answered(vault, "--at", then, "--doc", "hb:POL-leave-2") == {"hb:leave-v2": "yes"}
    assert answered(vault, "--at", now, "--doc", "hb:leave-v2") == {"hb:POL-leave-2": "yes"}
    whole = answered(vault, "--at", now, "--all")
    assert {d for d, served in whole.items() if served == "yes"} == {
        "hb:POL-leave-2",
        "hb:POL-travel-2",
        "hb:POL-security",
        "hb:POL-expenses",
    }

    code, history = vault.json("audit", "history", "--doc", "hb:POL-leave-2")
    assert code == 0, history
    periods = {d["doc_id"]: d["periods"] for d in history["documents"]}
    assert set(periods) == {"hb:leave-v2", "hb:POL-leave-2"}
    renamed_at = periods["hb:POL-leave-2"][0]["from"]
    assert periods["hb:POL-leave-2"][0]["by"]["run_id"] == done["run_id"]
    assert periods["hb:leave-v2"][-1]["from"] == renamed_at
    assert periods["hb:leave-v2"][-1]["variants"][0]["why"] == "renamed"

    # A rollback renames back: from it on, the old ids answer again.
    code, back = vault.json("rollback", done["run_id"])
    assert code == 0, back
    later = datetime.now(UTC).isoformat()
    assert answered(vault, "--at", later, "--family", "hb:leave") == old
    assert answered(vault, "--at", now, "--doc", "hb:leave-v2") == {"hb:POL-leave-2": "yes"}


def test_a_row_adopted_under_another_id_pairs_by_its_source_key(tmp_path: Path) -> None:
    """A row ``reconciler bootstrap`` adopted with an id of no ``<source>:`` form (its own
    source key) is the document the vault now names ``hb:<key>``: a pair, renamed in place."""
    deploy = Deployment(tmp_path)
    deploy.note("leave", body("leave", "Leave rules."), status="current")
    deploy.note("travel", body("travel", "Travel rules."), status="current")
    deploy.init_ingest()
    deploy.sql("UPDATE documents SET doc_id = 'leave' WHERE doc_id = 'hb:leave'")
    points = deploy.points().of("hb:leave")
    deploy.set_payload(list(points), {"doc_id": "leave"})

    code, run = deploy.json("run")
    assert code == 0, run
    assert kinds_of(run)["family/rekey_pending"] == 1, run["findings"]
    code, done = deploy.json("rekey")
    assert code == 0, done
    assert [(p["old_id"], p["new_id"], p["path"]) for p in done["pairs"]] == [
        ("leave", "hb:leave", "leave.md")
    ]
    assert set(deploy.rows()) == {"hb:leave", "hb:travel"}
    assert {p["doc_id"] for p in deploy.points().of("hb:leave").values()} == {"hb:leave"}
    assert len(deploy.points().of("hb:leave")) == len(points)


def test_a_run_under_a_later_rekey_is_rolled_back_only_after_it(vault: Deployment) -> None:
    """A re-keying is a later run of every document it renamed: a run that wrote a document
    before it was re-keyed is refused (with ``--cascade`` too: a re-keying is undone by its
    pairs swapped, on its own), and rolls back once the re-keying has been."""
    vault.edit_front("expenses", doc_class="confidential")
    code, a = vault.json("apply")
    assert (code, a["writes"]["table"]) == (0, 1), a
    vault.configure(source_extra=REF_IDS)
    code, rekeyed = vault.json("rekey")
    assert code == 0, rekeyed
    rows = vault.rows()
    for extra in ((), ("--cascade",), ("--cascade", "--dry-run")):
        result = vault.cli("rollback", a["run_id"], *extra)
        assert result.exit_code == 3, result.output
        assert rekeyed["run_id"] in result.output
        assert vault.rows() == rows  # refused: nothing written

    code, back = vault.json("rollback", rekeyed["run_id"])
    assert code == 0, back
    assert vault.rows()["hb:expenses"]["doc_class"] == "confidential"
    code, undone = vault.json("rollback", a["run_id"])
    assert code == 0, undone
    assert vault.rows()["hb:expenses"]["doc_class"] != "confidential"


@pytest.mark.xfail(
    strict=True,
    reason="rekey_back (writing/rollback.py) leaves payload_groups at 0 and its run records no "
    "'payload' count: the rollback says '0 payload write(s) on N chunk(s) restored' and "
    "reconciler_payload_writes_total misses them; the dry run would need the same count",
)
def test_the_rollback_of_a_rekey_counts_the_payload_writes_it_makes(vault: Deployment) -> None:
    """The rollback of a re-keying rewrites every renamed chunk's payload (``points``), as the
    rollback of any run does, but said it made no payload write."""
    vault.configure(source_extra=REF_IDS)
    code, done = vault.json("rekey")
    assert code == 0, done
    code, dry = vault.json("rollback", done["run_id"], "--dry-run")
    assert code == 0, dry
    code, back = vault.json("rollback", done["run_id"])
    assert code == 0, back
    assert back["points"] > 0
    assert back["payload_writes"] > 0, back
    assert (dry["rows"], dry["payload_writes"], dry["points"]) == (
        back["rows"],
        back["payload_writes"],
        back["points"],
    )
