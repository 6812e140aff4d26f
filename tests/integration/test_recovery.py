"""Recovery and rollback edge cases, on a real table (both dialects) and the in-memory index:
runs whose audit entries interleave, long cascades, orphan intents, failed runs that left a
batch unconfirmed, a lost head record."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconciler.model import OPEN_END, Document, PayloadWrite, VersionState
from reconciler.payload import chunk_payload, payload_for
from reconciler.stores.sql import SqlDocumentTable, audit
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.recovery import plan_resolutions, resolve_interrupted
from reconciler.writing.rollback import RollbackResult, read_history, rollback
from reconciler.writing.rollback_plan import plan_rollback

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


def test_planning_a_rollback_writes_nothing_and_its_plan_is_what_the_rollback_does(
    table: SqlDocumentTable,
) -> None:
    """A run A, and a later run B killed amid its payload batch (still recorded as running):
    reading the cascade and planning it, B planned as resolved, changes neither store; the
    rollback, B resolved first, then does what the plan said."""
    table.upsert_documents([document("a")])
    index = index_with("p1", "p2")
    finished(table, "A")
    change_class(table, "A", "a", "b")
    table.append_audit([payload_intent("A", "a", "b")])
    index.set_payloads([PayloadWrite(("p1", "p2"), {"doc_class": "b"}, "h:doc")])
    table.finish_run("A", status="succeeded")
    table.start_run(mode="apply", actor="cli", run_id="B", shard="0/1")  # never finished
    change_class(table, "B", "b", "c")
    table.append_audit([payload_intent("B", "b", "c")])
    index.set_payloads([PayloadWrite(("p1",), {"doc_class": "c"}, "h:doc")])  # p2: killed

    def stores() -> tuple[object, ...]:
        run = table.get_run("B")
        return (
            table.get_documents(["h:doc"]),
            list(table.audit_entries(limit=100)),
            run.status if run is not None else None,
            [(s.point_id, s.payload) for s in index.retrieve(["p1", "p2"])],
        )

    before = stores()
    resolving = plan_resolutions(table=table, index=index, shard="0/1")
    plan = plan_rollback(read_history(table, index, "A", cascade=True, resolving=resolving))
    assert stores() == before
    assert [s.rolled_back for s in plan.steps()] == ["B", "A"]
    resolve_interrupted(table=table, index=index, shard="0/1")
    done = rollback(table=table, index=index, run_id="A", cascade=True)
    assert counts(done.to_json()) == counts(RollbackResult.planned(plan).to_json())
    # B's rollback sets back p1 (p2 never got B's value), A's both
    assert (done.rows, done.points, done.cascaded[0]["points"]) == (1, 2, 1)
    assert table.get_documents(["h:doc"])["h:doc"].doc_class == "a"
    assert {s.payload["doc_class"] for s in index.retrieve(["p1", "p2"])} == {"a"}


def counts(data: dict[str, Any]) -> dict[str, Any]:
    """A rollback's output without the run ids it ran as, or whether it was dry."""
    return {
        **{k: v for k, v in data.items() if k not in ("run_id", "dry_run", "cascaded")},
        "cascaded": [counts(c) for c in data["cascaded"]],
    }


def payload_intent(run_id: str, before: str, after: str) -> audit.AuditEntry:
    """A run's intent to write the document's two points, from ``before`` to ``after``."""
    return audit.AuditEntry(
        run_id,
        AT,
        "cli",
        "payload_drift",
        "payload",
        "h:doc",
        {"points": ["p1", "p2"], "payload": payload_for(document(before))},
        {"payload": payload_for(document(after))},
    )
