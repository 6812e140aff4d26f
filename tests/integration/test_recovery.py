"""Recovery and rollback edge cases, on a real table (both dialects) and the in-memory index:
runs whose audit entries interleave, long cascades, orphan intents, failed runs that left a
batch unconfirmed, a lost head record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.model import OPEN_END, Document, PayloadWrite, RowChange, VersionState
from reconciler.payload import chunk_payload, payload_for
from reconciler.stores.sql import SqlDocumentTable, audit
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.dry import dry_stores
from reconciler.writing.recovery import resolve_interrupted
from reconciler.writing.rollback import rollback

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)


def document(doc_class: str) -> Document:
    return Document(
        doc_id="h:doc",
        source="h",
        source_key="doc",
        doc_family_id="h:doc",
        doc_version=1,
        version_state=VersionState.CURRENT,
        effective_to=OPEN_END,
        doc_class=doc_class,
    )


def row_entry(run_id: str, before: str, after: str) -> audit.AuditEntry:
    return audit.AuditEntry(
        run_id, AT, "cli", "test", "row", "h:doc", {"doc_class": before}, {"doc_class": after}
    )


def change_class(table: SqlDocumentTable, run_id: str, before: str, after: str) -> None:
    """What a run's table write is: the row and its audit entry."""
    table.upsert_documents([document(after)])
    table.append_audit([row_entry(run_id, before, after)])


def finished(table: SqlDocumentTable, run_id: str) -> str:
    table.start_run(mode="apply", actor="cli", run_id=run_id, shard="0/1")
    return run_id


def index_with(*ids: str) -> InMemoryChunkIndex:
    index = InMemoryChunkIndex()
    index.ensure_collection(dim=2)
    for pid in ids:
        payload = chunk_payload(document("a"), chunk_id=f"h:doc#{pid}")
        index.put_point(pid, vector=(0.0, 1.0), payload=payload)
    return index


def test_interleaved_runs_cascade_without_looping(table: SqlDocumentTable) -> None:
    """A and B (overlapping shards hold different leases) wrote one document in turns: each
    is "later" than the other. The cascade rolls B back once, then A, and stops."""
    table.upsert_documents([document("a")])
    for run in ("A", "B"):
        finished(table, run)
    change_class(table, "A", "a", "b")
    change_class(table, "B", "b", "c")
    table.append_audit(
        [audit.AuditEntry("A", AT, "cli", "test", "confirm", "A", None, {"through": "x"})]
    )
    table.append_audit([row_entry("A", "c", "c")])  # A touches the document once more
    for run in ("A", "B"):
        table.finish_run(run, status="succeeded")
    index = index_with()
    result = rollback(table=table, index=index, run_id="A", cascade=True)
    assert [c["rolled_back"] for c in result.cascaded] == ["B"]
    assert table.get_documents(["h:doc"])["h:doc"].doc_class == "a"


def test_a_dry_cascade_lists_each_later_run_once(table: SqlDocumentTable) -> None:
    table.upsert_documents([document("v0")])
    runs = [f"R{n}" for n in range(8)]
    for n, run in enumerate(runs):
        finished(table, run)
        change_class(table, run, f"v{n}", f"v{n + 1}")
        table.finish_run(run, status="succeeded")
    result = rollback(table=table, index=index_with(), run_id="R0", cascade=True, dry_run=True)

    def walk(node: dict[str, object]) -> list[str]:
        nested = node.get("cascaded") or []
        assert isinstance(nested, list)
        return [str(node["rolled_back"])] + [r for child in nested for r in walk(child)]

    undone = walk(result.to_json())
    assert sorted(undone) == sorted(runs)
    assert len(undone) == len(set(undone))
    assert table.get_documents(["h:doc"])["h:doc"].doc_class == "v8"  # dry: nothing written


def test_an_interrupted_orphan_quarantine_is_resolved_as_written(table: SqlDocumentTable) -> None:
    """Intents of orphan chunks set only the quarantine keys: re-read, they count as written
    when those keys hold."""
    index = index_with("p1", "p2")
    for pid in ("p1", "p2"):
        _vector, payload = index.point(pid)
        payload.update(quarantined=True, quarantine_reason="orphan_chunks")
        index.put_point(pid, vector=(0.0, 1.0), payload=payload)
    table.start_run(mode="apply", actor="cli", run_id="dead", shard="0/1")
    table.append_audit(
        [
            audit.AuditEntry(
                "dead",
                AT,
                "cli",
                "payload/orphan_chunks",
                "payload",
                "h:gone",
                {"points": ["p1", "p2"], "payload": {"quarantined": False}},
                {"payload": {"quarantined": True, "quarantine_reason": "orphan_chunks"}},
            )
        ]
    )
    [resolved] = resolve_interrupted(table=table, index=index, shard="0/1")
    assert (resolved.written, resolved.not_written) == (2, 0)
    run = table.get_run("dead")
    assert run is not None
    assert run.status == "interrupted"


def test_a_failed_run_that_left_a_batch_unconfirmed_is_resolved_and_stays_failed(
    table: SqlDocumentTable,
) -> None:
    index = index_with("p1", "p2")
    table.start_run(mode="apply", actor="cli", run_id="broken", shard="0/1")
    head = table.append_audit(
        [
            audit.AuditEntry(
                "broken",
                AT,
                "cli",
                "payload_drift",
                "payload",
                "h:doc",
                {"points": ["p1", "p2"], "payload": {"doc_class": "old"}},
                {"payload": payload_for(document("a"))},
            )
        ]
    )
    table.finish_run("broken", status="failed", counts={"unconfirmed": head}, error="boom")
    [resolved] = resolve_interrupted(table=table, index=index, shard="0/1")
    assert resolved.written == 2
    run = table.get_run("broken")
    assert run is not None
    assert run.status == "failed"
    assert "unconfirmed" not in (run.counts or {})
    assert resolve_interrupted(table=table, index=index, shard="0/1") == []  # once


def test_a_lost_head_record_is_rebuilt_from_the_log(table: SqlDocumentTable) -> None:
    table.append_audit([row_entry("r1", "a", "b"), row_entry("r1", "b", "c")])
    with table.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM audit_head")
    table.append_audit([row_entry("r2", "c", "d")])
    result = audit.verify(table.engine)
    assert (result.problems, result.entries) == ([], 3)


def test_dry_stores_hold_their_writes_and_refuse_what_they_do_not_keep_true(
    table: SqlDocumentTable,
) -> None:
    """A dry run reads its own row and payload writes over the real stores, which keep what
    they held; a call the overlay does not keep true (a write it does not hold, a scroll it
    would not overlay) raises instead of reaching a store."""
    table.upsert_documents([document("a")])
    index = index_with("p1")
    dry_table, dry_index = dry_stores(table, index)
    change = RowChange("h:doc", "test", {"doc_class": "a"}, {"doc_class": "b"})
    dry_table.write_rows_and_outbox(run_id="R", actor="t", changes=[change], reingests=[], at=AT)
    dry_index.set_payloads([PayloadWrite(("p1",), {"doc_class": "b"}, "h:doc")])
    assert dry_table.get_documents(["h:doc"])["h:doc"].doc_class == "b"
    assert [s.payload["doc_class"] for s in dry_index.retrieve(["p1"])] == ["b"]
    assert table.get_documents(["h:doc"])["h:doc"].doc_class == "a"
    assert [s.payload["doc_class"] for s in index.retrieve(["p1"])] == ["a"]
    with pytest.raises(AttributeError, match="upsert_documents"):
        dry_table.upsert_documents([document("c")])
    with pytest.raises(AttributeError, match="scroll"):
        dry_index.scroll()
