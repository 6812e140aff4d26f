"""``audit served --at T`` for a document re-ingested after ``T`` into more chunks: the new
points did not exist at ``T`` (``absent``, counted, not listed), so the document was plainly
served then, not ``undetermined``; and ``--all``, the whole corpus answered a batch of
documents at a time, as the scoped form answers each, with a summary. Real SQLite and Qdrant
local mode, through the CLI."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from acceptance_kit import Deployment, body

from reconciler.app import auditing


def test_points_a_later_reingestion_created_were_absent_not_unknown(deploy: Deployment) -> None:
    deploy.note("policy", body("Policy", "Rule one.", "Rule two."), id="policy", family="p",
                status="current", effective_from="2025-01-01")  # fmt: skip
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    before = {p for p in deploy.points().of("hb:policy")}
    time.sleep(0.01)  # (T strictly between the two ingestions: the log's instants)
    at = datetime.now(UTC)
    time.sleep(0.01)
    deploy.note("policy", body("Policy", "Rule one.", "Rule two.", "Rule three.", "Rule four."),
                id="policy", family="p", status="current", effective_from="2025-01-01")  # fmt: skip
    assert deploy.json("apply")[0] == 0  # the edit: quarantined, a re-ingest requested
    assert deploy.json("ingest", "--outbox-only")[0] == 0
    assert deploy.json("apply")[0] == 0
    after = {p for p in deploy.points().of("hb:policy")}
    assert len(after) > len(before)  # the re-ingestion created points

    code, data = deploy.json("audit", "served", "--at", at.isoformat(), "--doc", "hb:policy")
    assert code == 0, data
    [document] = data["documents"]
    assert document["served"] == "yes", document
    statuses = {v["status"] for v in document["variants"]}
    assert statuses == {"known"}, document
    assert sum(len(v["points"]) for v in document["variants"]) == len(before)


def test_the_whole_corpus_is_answered_a_batch_at_a_time_with_a_summary(
    deploy: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy.family("a", 2, sections=3)
    deploy.family("b", 3)
    deploy.note("c", id="c", family="c", status="current", effective_from="2025-01-01")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    at = datetime.now(UTC).isoformat()

    code, whole = deploy.json("audit", "served", "--at", at, "--all")
    assert code == 0, whole
    assert whole["scope"] == {"all": True}
    by_doc = {d["doc_id"]: d for d in whole["documents"]}
    assert set(by_doc) == {"hb:a-v1", "hb:a-v2", "hb:b-v1", "hb:b-v2", "hb:b-v3", "hb:c"}
    for family in ("hb:a", "hb:b", "hb:c"):  # each as the scoped form answers it
        code, scoped = deploy.json("audit", "served", "--at", at, "--family", family)
        assert code == 0
        for document in scoped["documents"]:
            assert by_doc[document["doc_id"]] == document
    assert whole["summary"]["documents"] == 6
    assert whole["summary"]["served"] == {"no": 3, "yes": 3}
    assert sum(whole["summary"]["chunks"].values()) == sum(
        len(v["points"]) for d in whole["documents"] for v in d["variants"]
    )
    assert whole["basis"][0].startswith("the audit log's")

    # one document a batch: the same answer (what is held at once is a batch)
    monkeypatch.setattr(auditing, "CORPUS_BATCH", 1)
    answer = auditing.audit_served_corpus(deploy.settings, at=datetime.fromisoformat(at))
    assert list(answer.documents()) == whole["documents"]
    assert answer.tail()["summary"] == whole["summary"]

    text = deploy.cli("audit", "served", "--at", at, "--all")
    assert text.exit_code == 0, text.output
    assert "hb:a  hb:a-v2  v2  current  served: yes  3/3 chunk(s)" in text.output
    assert "6 document(s): 3 no, 3 yes" in text.output
    assert deploy.cli("audit", "served", "--at", at, "--all", "--family", "hb:a").exit_code == 64
