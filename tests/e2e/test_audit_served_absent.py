"""``audit served --at T`` for a document re-ingested after ``T`` into more chunks: the new
points did not exist at ``T`` (``absent``, counted, not listed), so the document was plainly
served then, not ``undetermined``. Real SQLite and Qdrant local mode, through the CLI."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from acceptance_kit import Deployment, body


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
