"""The reference ingestion writes its documents in batches (``writing.ingestion``), each
document's writes in their crash order: the audit holds, entry for entry, what writing one
document at a time wrote (an intent a document, a confirmation after every
``CONFIRM_EVERY`` and at the end, each covering the intent just before it), whatever the
batches' size, and a check finds nothing in the stores but the payload indexes to create."""

from __future__ import annotations

import pytest
from acceptance_kit import Deployment

from reconciler.model import AuditKind
from reconciler.writing import ingestion


@pytest.mark.parametrize("deploy", ["edge"], indirect=True)
@pytest.mark.parametrize("most_chunks", [ingestion.BATCH_CHUNKS, 5])
def test_the_audit_is_one_document_at_a_time(
    deploy: Deployment, most_chunks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingestion, "BATCH_CHUNKS", most_chunks)
    every = ingestion.CONFIRM_EVERY
    notes = 2 * every + 22
    for i in range(notes):
        deploy.note(f"n-{i:03}", id=f"n-{i:03}", status="current")
    data = deploy.init_ingest()
    assert data["totals"]["ingested"] == notes
    with deploy.stores() as opened:
        entries, hashes = opened.table.run_entries_with_hashes(data["run_id"])
    kinds = [str(entry.target_type) for entry in entries]
    ingest, confirm = str(AuditKind.INGEST), str(AuditKind.CONFIRM)
    assert kinds == ([ingest] * every + [confirm]) * 2 + [ingest] * 22 + [confirm]
    assert {e.target for e in entries if e.target_type == AuditKind.INGEST} == {
        f"hb:n-{i:03}" for i in range(notes)
    }
    for at, entry in enumerate(entries):
        if entry.target_type == AuditKind.CONFIRM:
            assert entry.after["through"] == hashes[at - 1]
    _, report = deploy.json("check")
    # (a shard as ingested has no payload indexes yet: the first run creates them)
    assert [f for f in report["findings"] if f["check"] != "index"] == []
