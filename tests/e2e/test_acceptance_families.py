"""Acceptance: which version is in force — drift between the vault, the document table and the
chunk payloads, made the way it happens in life, found and repaired through the CLI."""

from __future__ import annotations

import pytest
from acceptance_kit import Deployment, day, instant, kinds, writes_zero

from reconciler.model import OPEN_END


def states(deploy: Deployment) -> dict[str, tuple[str, str | None]]:
    return {k: (r["version_state"], r["superseded_by"]) for k, r in deploy.rows().items()}


def chunk_states(deploy: Deployment, doc_id: str) -> list[tuple[str, str | None]]:
    return [
        (p["version_state"], p.get("superseded_by")) for p in deploy.points().of(doc_id).values()
    ]


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql", "edge"], indirect=True)
def test_successor_not_marked(deploy: Deployment) -> None:
    deploy.family("expenses", 2)
    deploy.note(
        "policy-v1",
        id="policy-v1",
        family="policy",
        version="1",
        status="current",
        effective_from=day(-300),
    )
    deploy.init_ingest()
    if deploy.engine == "edge":  # Edge keeps payload indexes: create those the filter needs
        assert deploy.json("apply", "--check", "index")[0] == 0
    assert deploy.json("check")[0] == 0
    # v2 is published and v1 marked superseded; ingestion registers v2, but the supersession
    # update of the already registered v1 never happens.
    deploy.note(
        "policy-v2",
        id="policy-v2",
        family="policy",
        version="2",
        status="current",
        effective_from=day(-2),
    )
    deploy.edit_front("policy-v1", status="superseded", superseded_by="policy-v2")
    code, ingest = deploy.json("ingest")
    assert (code, ingest["totals"]["ingested"]) == (0, 1)
    assert states(deploy)["hb:policy-v1"] == ("current", None)

    code, data = deploy.json("check")
    assert code == 2
    assert ("family", "successor_not_marked", "hb:policy-v1") in kinds(data)
    [finding] = [f for f in data["findings"] if f["kind"] == "successor_not_marked"]
    assert finding["severity"] == "critical"
    assert finding["family"] == "hb:policy"
    assert finding["expected"]["superseded_by"] == "hb:policy-v2"
    assert "hb:policy-v1" in deploy.served()

    code, applied = deploy.json("apply")
    assert code == 0
    assert applied["writes"]["table"] == 1
    assert applied["writes"]["points"] == 1
    after = states(deploy)
    assert after["hb:policy-v1"] == ("superseded", "hb:policy-v2")
    assert after["hb:policy-v2"] == ("current", None)
    chunks = chunk_states(deploy, "hb:policy-v1")
    assert chunks
    assert set(chunks) == {("superseded", "hb:policy-v2")}
    assert (
        deploy.rows()["hb:policy-v1"]["effective_to"]
        == deploy.rows()["hb:policy-v2"]["effective_from"]
    )
    assert "hb:policy-v1" not in deploy.served()
    assert "hb:policy-v2" in deploy.served()
    assert deploy.json("check")[0] == 0


@pytest.mark.parametrize("policy", ["supersede", "keep"])
def test_successor_present_in_the_source_but_never_ingested(
    deploy: Deployment, policy: str
) -> None:
    deploy.configure(policy={"successor_not_ingested": policy})
    deploy.family("expenses", 2)
    deploy.note(
        "policy-v1",
        id="policy-v1",
        family="policy",
        version="1",
        status="current",
        effective_from=day(-300),
    )
    deploy.init_ingest()
    # v2 lands in the vault and v1 is marked; no ingestion run has seen v2 yet.
    deploy.note(
        "policy-v2",
        id="policy-v2",
        family="policy",
        version="2",
        status="current",
        effective_from=day(-1),
    )
    deploy.edit_front("policy-v1", status="superseded", superseded_by="policy-v2")

    code, data = deploy.json("check")
    assert code == 2
    assert kinds(data) == {("family", "successor_not_ingested", "hb:policy-v1")}
    assert data["writes"]["reingest"] == 1

    code, applied = deploy.json("apply")
    assert code == 0
    assert applied["writes"]["reingest"] == 1
    with deploy.stores() as opened:
        requests = opened.table.pending_reingest()
    assert [(r.doc_id, r.source_key, r.reason) for r in requests] == [
        ("hb:policy-v2", "policy-v2", "successor_not_ingested")
    ]
    if policy == "supersede":  # query safety first: the old version leaves the default path
        assert states(deploy)["hb:policy-v1"] == ("superseded", "hb:policy-v2")
        assert set(chunk_states(deploy, "hb:policy-v1")) == {("superseded", "hb:policy-v2")}
        assert "hb:policy-v1" not in deploy.served()
    else:  # availability first: the old version stays current until v2 is ingested
        assert states(deploy)["hb:policy-v1"] == ("current", None)
        assert set(chunk_states(deploy, "hb:policy-v1")) == {("current", None)}
        assert "hb:policy-v1" in deploy.served()
    assert "hb:policy-v2" not in deploy.rows()

    # A second apply before ingestion writes nothing more (the request is already pending).
    code, again = deploy.json("apply")
    assert code == 0
    assert writes_zero(again)
    with deploy.stores() as opened:
        assert len(opened.table.pending_reingest()) == 1

    code, ingested = deploy.json("ingest", "--outbox-only")
    assert code == 0
    assert ingested["totals"]["reingested"] == 1
    assert deploy.rows()["hb:policy-v2"]["version_state"] == "current"
    assert deploy.json("apply")[0] == 0
    code, final = deploy.json("check")
    assert (code, final["findings"]) == (0, [])
    assert states(deploy)["hb:policy-v1"] == ("superseded", "hb:policy-v2")
    assert set(chunk_states(deploy, "hb:policy-v1")) == {("superseded", "hb:policy-v2")}
    assert {"hb:policy-v2", "hb:expenses-v2"} == deploy.served()


def test_note_removed_from_the_source_is_retired_after_the_grace_period(
    deploy: Deployment,
) -> None:
    deploy.family("expenses", 2)
    deploy.family("travel", 1, sections=3)
    deploy.init_ingest()
    (deploy.vault / "travel-v1.md").unlink()

    before_rows, before_points = deploy.rows(), deploy.points()
    code, data = deploy.json("apply")
    assert code == 0
    [finding] = data["findings"]
    assert (finding["check"], finding["kind"], finding["doc_id"]) == (
        "family",
        "missing_in_source",
        "hb:travel-v1",
    )
    assert finding["severity"] == "warning"
    assert writes_zero(data)
    assert deploy.rows() == before_rows
    assert deploy.points().payloads == before_points.payloads

    # Past missing_in_source_grace (default 7d): retired, table and every chunk.
    code, data = deploy.json("check", "--now", instant(8))
    assert code == 2
    [finding] = data["findings"]
    assert (finding["kind"], finding["severity"]) == ("missing_in_source", "critical")
    code, data = deploy.json("apply", "--now", instant(8))
    assert code == 0
    assert (data["writes"]["table"], data["writes"]["points"]) == (1, 3)
    assert states(deploy)["hb:travel-v1"] == ("retired", None)
    assert set(chunk_states(deploy, "hb:travel-v1")) == {("retired", None)}
    assert deploy.served() == {"hb:expenses-v2"}
    code, data = deploy.json("check", "--now", instant(8))
    assert (code, data["findings"]) == (0, [])


def test_missing_in_source_with_no_grace_retires_at_once(deploy: Deployment) -> None:
    deploy.configure(policy={"missing_in_source_grace": "0s"})
    deploy.family("expenses", 2)
    deploy.family("travel", 1)
    deploy.init_ingest()
    (deploy.vault / "travel-v1.md").unlink()
    code, data = deploy.json("apply")
    assert code == 0
    assert kinds(data) == {("family", "missing_in_source", "hb:travel-v1")}
    assert states(deploy)["hb:travel-v1"] == ("retired", None)
    assert set(chunk_states(deploy, "hb:travel-v1")) == {("retired", None)}
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])


def test_two_versions_marked_current_in_rows_and_payloads(deploy: Deployment) -> None:
    deploy.family("expenses", 2, sections=3)
    deploy.family("travel", 1)
    deploy.init_ingest()
    # A bad migration flips v1 back to current, in its row and on all its chunks.
    deploy.set_row(
        "hb:expenses-v1", version_state="current", superseded_by=None, effective_to=OPEN_END
    )
    old = sorted(deploy.points().of("hb:expenses-v1"))
    deploy.set_payload(
        old,
        {"version_state": "current", "superseded_by": None, "effective_to": "9999-12-31T00:00:00Z"},
    )
    assert "hb:expenses-v1" in deploy.served()

    code, data = deploy.json("check")
    assert code == 2
    assert ("siblings", "live_siblings", "hb:expenses-v1") in kinds(data)
    assert all(f["doc_id"] == "hb:expenses-v1" for f in data["findings"])

    # The siblings check alone repairs it: the older version is superseded by the newer.
    code, data = deploy.json("apply", "--check", "siblings")
    assert code == 0
    assert kinds(data) == {("siblings", "live_siblings", "hb:expenses-v1")}
    assert states(deploy)["hb:expenses-v1"] == ("superseded", "hb:expenses-v2")
    assert set(chunk_states(deploy, "hb:expenses-v1")) == {("superseded", "hb:expenses-v2")}
    assert deploy.served() == {"hb:expenses-v2", "hb:travel-v1"}
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])


def test_pending_version_becomes_current_when_its_effective_from_passes(
    deploy: Deployment,
) -> None:
    deploy.family("expenses", 2)
    deploy.note(
        "policy-v1",
        id="policy-v1",
        family="policy",
        version="1",
        status="current",
        effective_from=day(-300),
        effective_to=day(5),
    )
    deploy.note(
        "policy-v2",
        id="policy-v2",
        family="policy",
        version="2",
        status="current",
        effective_from=day(5),
    )
    deploy.init_ingest()
    assert states(deploy)["hb:policy-v2"] == ("pending", None)
    assert deploy.json("check")[0] == 0

    later = instant(6)
    code, data = deploy.json("check", "--now", later)
    assert code == 2
    assert ("dates", "pending_now_effective", "hb:policy-v2") in kinds(data)
    code, data = deploy.json("apply", "--now", later)
    assert code == 0
    after = states(deploy)
    assert after["hb:policy-v2"] == ("current", None)
    assert after["hb:policy-v1"] == ("superseded", "hb:policy-v2")
    assert set(chunk_states(deploy, "hb:policy-v2")) == {("current", None)}
    assert set(chunk_states(deploy, "hb:policy-v1")) == {("superseded", "hb:policy-v2")}
    code, data = deploy.json("check", "--now", later)
    assert (code, data["findings"]) == (0, [])


def test_broken_notes_beside_good_ones(deploy: Deployment) -> None:
    deploy.family("expenses", 2, sections=2)
    deploy.family("travel", 1)
    deploy.family("guide", 1)
    deploy.note("loop-a", id="loop-a", status="current", effective_from=day(-50))
    deploy.note("loop-b", id="loop-b", status="current", effective_from=day(-40))
    deploy.init_ingest()
    rows_before = deploy.rows()

    # Broken: invalid YAML, a dangling superseded_by, a supersession cycle.
    travel = deploy.vault / "travel-v1.md"
    travel.write_text(
        travel.read_text().replace("status: current", "status: [current"), encoding="utf-8"
    )
    deploy.edit_front("expenses-v2", superseded_by="expenses-v9")
    deploy.edit_front("loop-a", superseded_by="loop-b")
    deploy.edit_front("loop-b", superseded_by="loop-a")
    # Good drift in the same run: a retirement in the source, chunks reset by re-chunking.
    deploy.edit_front("guide-v1", status="retired")
    old = sorted(deploy.points().of("hb:expenses-v1"))
    deploy.set_payload(old[:1], {"version_state": "current", "superseded_by": None})

    code, data = deploy.json("check")
    assert code == 2
    found = kinds(data)
    assert ("family", "invalid_source_document", "hb:travel-v1") in found
    assert ("family", "invalid_supersession", "hb:expenses-v2") in found
    assert ("family", "invalid_supersession", "hb:loop-a") in found
    assert ("family", "invalid_supersession", "hb:loop-b") in found
    assert ("family", "retired_in_source", "hb:guide-v1") in found
    assert ("payload", "payload_drift", "hb:expenses-v1") in found
    broken = {"hb:travel-v1", "hb:expenses-v2", "hb:loop-a", "hb:loop-b"}
    problems = {
        f["doc_id"]: f["actual"]["problem"]
        for f in data["findings"]
        if f["kind"] in ("invalid_source_document", "invalid_supersession")
    }
    assert problems == {
        "hb:travel-v1": "invalid_frontmatter",
        "hb:expenses-v2": "dangling_superseded_by",
        "hb:loop-a": "supersession_cycle",
        "hb:loop-b": "supersession_cycle",
    }
    # A broken note is neither missing nor changed.
    assert not any(f["kind"] == "missing_in_source" for f in data["findings"])

    assert deploy.json("apply")[0] == 0
    rows = deploy.rows()
    for doc_id in broken:
        assert rows[doc_id] == rows_before[doc_id], doc_id
    assert rows["hb:guide-v1"]["version_state"] == "retired"
    assert set(chunk_states(deploy, "hb:guide-v1")) == {("retired", None)}
    assert set(chunk_states(deploy, "hb:expenses-v1")) == {("superseded", "hb:expenses-v2")}

    # Only the broken notes are still reported; nothing is left to write.
    code, data = deploy.json("check")
    assert code == 2
    assert {f["doc_id"] for f in data["findings"]} == broken
    assert all(f["action"].startswith("none") for f in data["findings"])
    assert writes_zero(data)
