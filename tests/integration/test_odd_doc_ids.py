"""A chunk whose ``doc_id`` is not a text (a number, a boolean, a JSON object or list another
writer left there) names no document, as a chunk without a doc_id names none (``doc_id_of``):
an orphan without a doc_id, reported, recorded and quarantined by point id (past ``keep_ids``,
by one more scroll); never a crash of the scan or of a write, never a write of a row's payload
onto it (its JSON text would name a row: ``7`` and a row ``"7"``). ``split`` leaves such chunks
where they are and ``split --merge`` moves them with the rest. On a real SQLite table and the
in-memory index, a real Qdrant Edge shard and qdrant-client's local mode."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import migrated_table, one_chunk_doc
from qdrant_client import QdrantClient

from reconciler.app import splitting
from reconciler.checks import CHECKS
from reconciler.model import AuditKind, ChunkRecord, Document, VersionState
from reconciler.payload import chunk_payload, doc_id_of
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options
from reconciler.planning import MoveTarget
from reconciler.ports import ChunkIndex
from reconciler.settings import Settings
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.split import SplitChunkIndex
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.moving import Mover
from reconciler.writing.rollback import rollback

#: Stored doc ids that are not texts.
ODD: list[Any] = [
    {"k": 1, "a": [2]},
    ["x", 1],
    [["x"]],
    7,
    1.5,
    True,
    {"k": "é"},
    # (Qdrant's keyword filter matches an array holding the id: kb:b's filter would select it)
    ["kb:b"],
]
DIM = 2


def _records(docs: list[Document]) -> list[ChunkRecord]:
    """A chunk of each document, then one of each odd doc id (the first document's payload
    otherwise); integer point ids."""
    payloads = [chunk_payload(d, chunk_id=f"{d.doc_id}#0") for d in docs]
    payloads += [
        {**chunk_payload(docs[0], chunk_id=f"odd#{n}"), "doc_id": value}
        for n, value in enumerate(ODD)
    ]
    return [
        ChunkRecord(n, p["chunk_id"], f"text {n}", (float(n), 0.5), p)  # type: ignore[arg-type]
        for n, p in enumerate(payloads)
    ]


def _collection(engine: str, folder: Path, name: str, stack: list[Any]) -> ChunkIndex:
    if engine == "memory":
        return InMemoryChunkIndex(collection=name)
    if engine == "edge":
        return EdgeChunkIndex(folder / name)
    client = QdrantClient(path=str(folder / "qdrant"))
    stack.append(client)
    return QdrantChunkIndex(client, collection=name)


@pytest.fixture(params=["memory", "edge", "local"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    docs = [one_chunk_doc("a"), one_chunk_doc("b")]
    table = migrated_table(tmp_path / "t.db")
    clients: list[Any] = []
    index = _collection(request.param, tmp_path, "corpus", clients)
    try:
        table.upsert_documents(docs)
        index.ensure_collection(dim=DIM)
        index.upsert_chunks(_records(docs))
        yield table, index
    finally:
        index.close()
        for client in clients:
            client.close()
        table.close()


def _orphans(report: Any) -> dict[Any, Any]:
    return {f.doc_id: f.actual for f in report.findings if f.kind == "orphan_chunks"}


@pytest.mark.parametrize("keep_ids", [100_000, 1])  # (1: past it, orphans go by a scroll)
def test_an_odd_doc_id_is_an_orphan_without_a_doc_id_reported_and_quarantined(
    world: tuple[SqlDocumentTable, ChunkIndex], keep_ids: int
) -> None:
    table, index = world
    engine = Reconciler(table=table, index=index, sources=[])
    checks = frozenset(CHECKS) - {"index"}  # (every check reads the odd chunks)

    checked = engine.run(Options(mode="check", checks=checks, keep_ids=keep_ids))

    assert _orphans(checked) == {None: {"chunks": len(ODD)}}
    json.dumps(checked.to_json())  # (it prints)

    applied = engine.run(
        Options(
            mode="apply", checks=checks, keep_ids=keep_ids, guard=Guard(max_changed_fraction=1.0)
        )
    )
    # Recorded with the apply, quarantined by point id (the odd values themselves are left as
    # they are); the registered documents' chunks are untouched.
    assert [f["doc_id"] for f in table.findings_of(applied.run_id)] == [None]
    entries, _ = table.run_entries_with_hashes(applied.run_id)
    (quarantine,) = [e for e in entries if e.target_type == AuditKind.PAYLOAD]
    assert sorted(quarantine.before["points"]) == list(range(2, 2 + len(ODD)))
    assert table.verify_audit().ok
    again = engine.run(Options(mode="check", checks=checks, keep_ids=keep_ids))
    assert not again.findings
    held = {state.point_id: state for state in index.scroll()}
    for n, value in enumerate(ODD, start=2):
        point = held[n]
        assert point.doc_id == value
        assert point.payload.get("quarantined") is True
    assert not held[0].payload.get("quarantined")
    assert not held[1].payload.get("quarantined")


def test_doc_id_of_is_the_text_or_none() -> None:
    assert doc_id_of("kb:a") == "kb:a"
    assert doc_id_of("7") == "7"
    assert doc_id_of(None) is None
    for value in ODD:
        assert doc_id_of(value) is None


@pytest.mark.parametrize("engine", ["memory", "edge"])
def test_split_leaves_odd_orphans_where_they_are_and_merge_moves_them(
    engine: str, tmp_path: Path
) -> None:
    docs = [one_chunk_doc("a"), one_chunk_doc("b", VersionState.SUPERSEDED)]
    table = migrated_table(tmp_path / "t.db")
    main = _collection(engine, tmp_path, "corpus", [])
    archive = _collection(engine, tmp_path, "corpus_archive", [])
    split = SplitChunkIndex(main, archive)
    try:
        table.upsert_documents(docs)
        main.ensure_collection(dim=DIM)
        main.upsert_chunks(_records(docs))
        ways = {True: splitting._Way(), False: splitting._Way()}
        planned = [
            (t.doc_id, t.to_archive, t.points)
            for targets in splitting._placements(Settings(), table, split, ways, None)
            for t in targets
        ]
        # The superseded version goes to the archive; the odd orphans, like chunks without a
        # doc_id, are not planned (the check quarantines them where they are).
        assert planned == [("kb:b", True, 1)]

        run_id = table.start_run(mode="split", actor="test", shard="0/1")
        mover = Mover(table=table, split=split, run_id=run_id, actor="test")
        assert mover.move_targets([MoveTarget("kb:b", "kb:b", True, 1, ("t",))],
                                  to_archive=True) == 1  # fmt: skip
        mover.finish()
        # Merge moves everything in the archive back; then move the whole main collection
        # (odd doc ids with it) to the archive and back: audited as chunks without a doc_id.
        run_id = table.start_run(mode="split", actor="test", shard="0/1")
        mover = Mover(table=table, split=split, run_id=run_id, actor="test")
        total = len(_records(docs))
        assert mover.move_all(to_archive=False, reason="test") == 1
        assert mover.move_all(to_archive=True, reason="test") == total
        assert mover.move_all(to_archive=False, reason="test") == total
        mover.finish()
        entries, _ = table.run_entries_with_hashes(run_id)
        targets = {e.target for e in entries if e.target_type == AuditKind.MOVE}
        assert targets == {"kb:a", "kb:b", "(no doc_id)"}
        assert table.verify_audit().ok
        held = {state.point_id: state.doc_id for state in main.scroll()}
        assert sorted(held) == list(range(total))
        assert [held[n] for n in range(2, total)] == ODD
        # The check quarantines the odd orphans where they are: never "misplaced", so one apply
        # converges.
        engine = Reconciler(table=table, index=split, sources=[])
        checks = frozenset(CHECKS) - {"index"}
        guard = Guard(max_changed_fraction=1.0, max_moved_fraction=1.0)
        engine.run(Options(mode="apply", checks=checks, guard=guard))
        assert not engine.run(Options(mode="check", checks=checks)).findings
    finally:
        split.close()
        table.close()


@pytest.mark.parametrize("keep_ids", [100_000, 1])
def test_a_list_holding_a_rows_doc_id_is_not_that_rows_chunk(
    world: tuple[SqlDocumentTable, ChunkIndex], keep_ids: int
) -> None:
    """Regression: the run itself changes kb:b's row (a second current version of its family
    supersedes it), so its chunk is written through its doc_id filter, which on Qdrant also
    selects the chunk whose doc_id is ``["kb:b"]``: the apply failed there (``unhashable type:
    'list'``) on every run. The list's chunk is an orphan, quarantined; kb:b's chunk gets its
    row's payload."""
    table, index = world
    (row,) = table.get_documents(["kb:b"]).values()
    newer = dataclasses.replace(row, doc_id="kb:b2", source_key="b2", doc_version=2, chunk_count=0)
    table.upsert_documents([newer])
    engine = Reconciler(table=table, index=index, sources=[])
    options = {"checks": frozenset(CHECKS) - {"index"}, "keep_ids": keep_ids}

    engine.run(Options(mode="apply", guard=Guard(max_changed_fraction=1.0), **options))

    assert not engine.run(Options(mode="check", **options)).findings
    held = {state.point_id: state for state in index.scroll()}
    assert held[1].payload.get("version_state") == "superseded"
    (listed,) = [s for s in held.values() if s.doc_id == ["kb:b"]]
    assert listed.payload.get("quarantined") is True
    assert listed.payload.get("version_state") == "current"  # (never written as kb:b's)


@pytest.mark.parametrize("keep_ids", [100_000, 1])
def test_a_number_beside_a_row_of_its_spelling_is_never_that_rows_chunk(
    world: tuple[SqlDocumentTable, ChunkIndex], keep_ids: int
) -> None:
    """Regression (a review's): row ``"7"`` and a chunk whose doc_id is the number ``7``. Read
    as its JSON text, the number named the row: the run that superseded row ``"7"`` wrote the
    row's payload onto it, and its quarantine found the row's kept ids and wrote nothing, on
    every run. It is a chunk without a doc_id: quarantined, never the row's; a rollback lifts
    the quarantine and keeps the number."""
    table, index = world
    seven = dataclasses.replace(one_chunk_doc("a"), doc_id="7", source_key="7", doc_family_id="f7")
    newer = dataclasses.replace(seven, doc_id="7b", source_key="7b", doc_version=2, chunk_count=0)
    table.upsert_documents([seven, newer])  # (two current versions: the run supersedes "7")
    payload = chunk_payload(seven, chunk_id="7#0")
    index.upsert_chunks(
        ChunkRecord(n, f"x{n}", "t", (0.5, 0.5), {**payload, "chunk_id": f"x{n}", "doc_id": v})  # type: ignore[arg-type]
        for n, v in [(100, "7"), (101, 7), (102, "8"), (103, 8)]
    )
    engine = Reconciler(table=table, index=index, sources=[])
    options = {"checks": frozenset(CHECKS) - {"index"}, "keep_ids": keep_ids}

    checked = engine.run(Options(mode="check", **options))
    assert _orphans(checked) == {"8": {"chunks": 1}, None: {"chunks": len(ODD) + 2}}
    applied = engine.run(Options(mode="apply", guard=Guard(max_changed_fraction=1.0), **options))

    assert not engine.run(Options(mode="check", **options)).findings
    held = {s.point_id: s for s in index.scroll()}
    assert held[100].payload.get("version_state") == "superseded"
    assert not held[100].payload.get("quarantined")
    for n in (101, 102, 103):
        assert held[n].payload.get("quarantined") is True
        assert held[n].payload.get("version_state") == "current"  # (never written as "7"'s)

    rollback(table=table, index=index, run_id=applied.run_id)

    held = {s.point_id: s for s in index.scroll()}
    assert [(held[n].doc_id, held[n].payload.get("quarantined")) for n in (101, 102, 103)] == [
        (7, False),
        ("8", False),
        (8, False),
    ]
    assert table.verify_audit().ok
