"""Acceptance: families repaired after registration — a link that joins two registered families,
an explicit ``family`` added later — found as ``membership_changed``, repaired through the CLI
(row and chunks), quiet on a second run, undone by a rollback; and an id whose text moved to
another id (``id_reused``)."""

from __future__ import annotations

import pytest
from acceptance_kit import Deployment, day, kinds, writes_zero


def families(deploy: Deployment) -> dict[str, str]:
    return {doc_id: row["doc_family_id"] for doc_id, row in deploy.rows().items()}


def chunk_families(deploy: Deployment, doc_id: str) -> set[str]:
    return {p["doc_family_id"] for p in deploy.points().of(doc_id).values()}


def guard_counts_both_families(data: dict[str, object]) -> bool:
    """The guard weighs a move in the family it leaves and the one it joins."""
    guard = data["guard"]
    assert isinstance(guard, dict)
    return guard["changed_families"] == 2


def split_chain(deploy: Deployment) -> None:
    """Two versions of one policy registered before the source linked them: two families."""
    deploy.note("policy-2014", id="policy-2014", status="current", effective_from=day(-300))
    deploy.note("policy-2024", id="policy-2024", status="current", effective_from=day(-10))
    deploy.init_ingest()
    assert families(deploy) == {
        "hb:policy-2014": "hb:policy-2014",
        "hb:policy-2024": "hb:policy-2024",
    }
    assert {"hb:policy-2014", "hb:policy-2024"} <= deploy.served()
    assert deploy.json("run")[0] == 0


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_a_link_added_later_merges_the_split_chain(deploy: Deployment) -> None:
    split_chain(deploy)
    deploy.edit_front("policy-2014", status="superseded", superseded_by="policy-2024")

    code, found = deploy.json("check")
    assert code == 2
    assert ("family", "membership_changed", "hb:policy-2024") in kinds(found)
    assert ("family", "successor_not_marked", "hb:policy-2014") in kinds(found)
    [moved] = [f for f in found["findings"] if f["kind"] == "membership_changed"]
    assert moved["family"] == "hb:policy-2014"  # the root's id stays: the older family's
    assert moved["actual"] == {"doc_family_id": "hb:policy-2024"}
    assert moved["expected"]["doc_family_id"] == "hb:policy-2014"
    assert "hb:policy-2014" in moved["expected"]["because"]
    assert moved["severity"] == "warning"
    assert families(deploy)["hb:policy-2024"] == "hb:policy-2024"  # check writes nothing

    code, plan = deploy.json("plan")
    assert code == 2
    assert plan["writes"]["table"] == 2  # the move, and the supersession it reveals
    rows = {r["doc_id"]: r for r in plan["plan"]["rows"]}
    assert rows["hb:policy-2024"]["fields"] == {
        "doc_family_id": ["hb:policy-2024", "hb:policy-2014"]
    }
    assert rows["hb:policy-2024"]["reasons"] == ["family/membership_changed"]
    [payload] = [p for p in plan["plan"]["payloads"] if p["doc_id"] == "hb:policy-2024"]
    assert payload["payload"]["doc_family_id"] == "hb:policy-2014"
    assert guard_counts_both_families(plan)

    code, ran = deploy.json("run")
    assert code == 0, ran
    assert families(deploy) == {
        "hb:policy-2014": "hb:policy-2014",
        "hb:policy-2024": "hb:policy-2014",
    }
    assert chunk_families(deploy, "hb:policy-2024") == {"hb:policy-2014"}
    assert deploy.rows()["hb:policy-2014"]["version_state"] == "superseded"
    served = deploy.served()
    assert "hb:policy-2024" in served
    assert "hb:policy-2014" not in served
    code, audit = deploy.json("audit", "show", "--run", ran["run_id"])
    assert code == 0
    assert any(
        e["target"] == "hb:policy-2024" and e["after"].get("doc_family_id") == "hb:policy-2014"
        for e in audit["entries"]
    ), audit

    code, again = deploy.json("run")
    assert code == 0, again
    assert writes_zero(again), again
    assert deploy.json("check")[0] == 0

    code, rolled = deploy.json("rollback", ran["run_id"])
    assert code == 0, rolled
    assert families(deploy) == {
        "hb:policy-2014": "hb:policy-2014",
        "hb:policy-2024": "hb:policy-2024",
    }
    assert chunk_families(deploy, "hb:policy-2024") == {"hb:policy-2024"}
    assert deploy.rows()["hb:policy-2014"]["version_state"] == "current"


def test_an_explicit_family_added_later_moves_the_document(deploy: Deployment) -> None:
    deploy.family("expenses", 2)
    deploy.note("expenses-old", id="expenses-old", status="current", effective_from=day(-500))
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    assert families(deploy)["hb:expenses-old"] == "hb:expenses-old"
    assert "hb:expenses-old" in deploy.served()  # its own family: in force beside v2

    deploy.edit_front("expenses-old", family="expenses")
    code, found = deploy.json("check")
    assert code == 2
    [moved] = [f for f in found["findings"] if f["kind"] == "membership_changed"]
    assert (moved["doc_id"], moved["family"]) == ("hb:expenses-old", "hb:expenses")
    assert moved["expected"]["because"] == "its source declares family 'expenses'"

    code, ran = deploy.json("run")
    assert code == 0, ran
    assert families(deploy)["hb:expenses-old"] == "hb:expenses"
    assert chunk_families(deploy, "hb:expenses-old") == {"hb:expenses"}
    # Settled with its new family: the older version is no longer served beside v2.
    served = deploy.served()
    assert "hb:expenses-old" not in served
    assert "hb:expenses-v2" in served
    code, again = deploy.json("run")
    assert code == 0, again
    assert writes_zero(again), again

    code, rolled = deploy.json("rollback", ran["run_id"])
    assert code == 0, rolled
    assert families(deploy)["hb:expenses-old"] == "hb:expenses-old"
    assert "hb:expenses-old" in deploy.served()


@pytest.mark.parametrize("scope", ["hb:policy-2014", "hb:policy-2024"])
def test_a_scoped_repair_moves_a_document_into_or_out_of_its_family(
    deploy: Deployment, scope: str
) -> None:
    split_chain(deploy)
    deploy.note("other", id="other", status="current", effective_from=day(-50))
    assert deploy.json("ingest")[0] == 0
    deploy.edit_front("policy-2014", status="superseded", superseded_by="policy-2024")

    code, repaired = deploy.json("repair", "--family", scope)
    assert code == 0, repaired
    assert families(deploy)["hb:policy-2024"] == "hb:policy-2014"
    assert deploy.rows()["hb:policy-2014"]["version_state"] == "superseded"
    assert "hb:policy-2014" not in deploy.served()
    code, again = deploy.json("run")
    assert code == 0, again
    assert writes_zero(again), again


def test_an_id_whose_text_moved_to_another_id_is_a_finding(deploy: Deployment) -> None:
    deploy.note("pep-0837", id="pep-0837", status="current", effective_from=day(-30))
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    old = (deploy.vault / "pep-0837.md").read_text(encoding="utf-8")
    # Renamed 840, and a new 837 written in its place.
    (deploy.vault / "pep-0840.md").write_text(
        old.replace("id: pep-0837", "id: pep-0840"), encoding="utf-8"
    )
    (deploy.vault / "pep-0837.md").unlink()
    deploy.note("pep-0837", "# A new PEP 837\n\nAn unrelated text.", id="pep-0837")

    code, found = deploy.json("check")
    assert code == 2
    assert ("hash", "in_place_edit", "hb:pep-0837") in kinds(found)
    [reused] = [f for f in found["findings"] if f["kind"] == "id_reused"]
    assert reused["check"] == "hash"
    assert reused["severity"] == "warning"
    assert reused["doc_id"] == "hb:pep-0837"
    assert reused["actual"]["moved_to"] == ["hb:pep-0840"]
    assert "hb:pep-0840" in reused["action"]
    assert "hb:pep-0837" in reused["action"]
    # Not re-homed: 837 keeps its row; 840 is a new document to ingest.
    assert ("family", "not_ingested", "hb:pep-0840") in kinds(found)
    # The operator's next steps: run, ingest, run. Both are served, each its own document.
    assert deploy.json("run")[0] == 0
    assert deploy.json("ingest")[0] == 0
    code, ran = deploy.json("run")
    assert code == 0, ran
    rows = deploy.rows()
    assert rows["hb:pep-0840"]["doc_family_id"] != rows["hb:pep-0837"]["doc_family_id"]
    assert {"hb:pep-0837", "hb:pep-0840"} <= deploy.served()
    assert deploy.json("check")[0] == 0


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_sharded_runs_move_a_document_into_the_shard_of_its_new_family(
    deploy: Deployment, order: tuple[int, int]
) -> None:
    # hb:policy-2014 (the family the chain keeps) is shard 1 of 2; hb:policy-2024 is shard 0.
    split_chain(deploy)
    deploy.edit_front("policy-2014", status="superseded", superseded_by="policy-2024")
    for index in order:
        code, ran = deploy.json("run", "--shard", f"{index}/2")
        assert code == 0, ran
        moved = ("family", "membership_changed", "hb:policy-2024") in kinds(ran)
        assert moved == (index == 1)  # only the shard of the family it joins moves it
    assert families(deploy)["hb:policy-2024"] == "hb:policy-2014"
    assert chunk_families(deploy, "hb:policy-2024") == {"hb:policy-2014"}
    assert "hb:policy-2014" not in deploy.served()
    code, again = deploy.json("run")
    assert code == 0, again
    assert writes_zero(again), again


def test_a_repair_of_one_document_moves_it_and_writes_only_it(deploy: Deployment) -> None:
    split_chain(deploy)
    deploy.edit_front("policy-2014", status="superseded", superseded_by="policy-2024")
    code, repaired = deploy.json("repair", "--doc", "hb:policy-2024")
    assert code == 0, repaired
    assert {r["doc_id"] for r in repaired["plan"]["rows"]} == {"hb:policy-2024"}
    assert families(deploy)["hb:policy-2024"] == "hb:policy-2014"
    assert deploy.rows()["hb:policy-2014"]["version_state"] == "current"  # not this document
    code, ran = deploy.json("run")
    assert code == 0, ran
    assert deploy.rows()["hb:policy-2014"]["version_state"] == "superseded"
