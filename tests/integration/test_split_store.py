"""A split store (``[index] archive_collection``) on a real SQLite table and on two
collections of the in-memory fake or two real Qdrant Edge shards: the engine keeps the
servable versions' chunks in the main collection and moves every other one to the archive,
whole (vectors byte for byte), through audited intents; a move stopped between any two of its
steps is finished by the next runner; a rollback moves the points back; a retrieval path that
forgets ``default_filter()`` on the main collection finds no superseded chunk."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import migrated_table

from reconciler.checks import CHECKS
from reconciler.model import (
    OPEN_END,
    AuditKind,
    ChunkRecord,
    Document,
    RunStatus,
    SourceDocument,
    SourceSnapshot,
    VersionState,
)
from reconciler.payload import chunk_payload, payload_for
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options, Report
from reconciler.planning import MoveTarget
from reconciler.ports import ChunkIndex
from reconciler.ports.index import StoredPoint
from reconciler.rules.time_rule import kept_in_main
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.split import SplitChunkIndex
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.moving import Mover
from reconciler.writing.recovery import resolve_interrupted
from reconciler.writing.rollback import rollback

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)
FAMILIES = 4
VERSIONS = 3
CHUNKS = 3
DIM = 4


class Source:
    """The system of record: ``FAMILIES`` chains of ``VERSIONS`` versions."""

    name = "kb"

    def __init__(self, documents: list[SourceDocument]) -> None:
        self.documents = documents

    def scan(self) -> SourceSnapshot:
        return SourceSnapshot(self.name, tuple(self.documents), scanned_at=NOW)

    def read_body(self, source_key: str) -> str:
        return source_key


def declared() -> list[SourceDocument]:
    docs = []
    for f in range(FAMILIES):
        for v in range(1, VERSIONS + 1):
            last = v == VERSIONS
            docs.append(
                SourceDocument(
                    source="kb",
                    source_key=f"f{f}v{v}",
                    doc_id=f"kb:f{f}v{v}",
                    content_hash=f"sha256:f{f}v{v}",
                    family=f"f{f}",
                    version=v,
                    state=VersionState.CURRENT if last else VersionState.SUPERSEDED,
                    effective_from=NOW - (VERSIONS - v + 1) * 100 * DAY,
                    superseded_by=None if last else f"kb:f{f}v{v + 1}",
                )
            )
    return docs


def row(doc: SourceDocument, successor: SourceDocument | None) -> Document:
    return Document(
        doc_id=doc.doc_id,
        source="kb",
        source_key=doc.source_key,
        doc_family_id=f"kb:{doc.family}",
        doc_version=doc.version or 1,
        version_state=doc.state or VersionState.UNKNOWN,
        effective_from=doc.effective_from,
        effective_to=successor.effective_from
        if successor and successor.effective_from
        else OPEN_END,
        superseded_by=doc.superseded_by,
        source_hash=doc.content_hash,
        chunk_count=CHUNKS,
        ingested_at=NOW - 400 * DAY,
        updated_at=NOW - 400 * DAY,
    )


@dataclasses.dataclass
class World:
    table: SqlDocumentTable
    split: SplitChunkIndex
    source: Source
    #: point id -> the whole point as ingested (vector and payload).
    before: dict[str, StoredPoint]

    def run(self, mode: str, **options: Any) -> Report:
        engine = Reconciler(table=self.table, index=self.split, sources=[self.source])
        guard = Guard(max_changed_fraction=1.0, max_moved_fraction=1.0)
        checks = frozenset(CHECKS) - {"index"}  # (payload indexes: not this test's business)
        return engine.run(
            Options(mode=mode, now=NOW, guard=guard, actor="test", checks=checks, **options)
        )

    def where(self) -> dict[str, str]:
        """point id -> the collection that holds it ("main", "archive", or "both")."""
        found: dict[str, str] = {}
        for name, part in (("main", self.split.main), ("archive", self.split.archive)):
            if not part.exists():
                continue
            for state in part.scroll():
                key = str(state.point_id)
                found[key] = "both" if key in found else name
        return found

    def assert_placed(self) -> None:
        """Every point in exactly one collection, the one its row's state puts it in, with
        the vector it was ingested with, byte for byte."""
        rows = {r.doc_id: r for r in self.table.iter_documents()}
        where = self.where()
        assert sorted(where) == sorted(self.before)
        for pid, place in where.items():
            doc_id = self.before[pid].payload["doc_id"]
            expected = "main" if kept_in_main(rows[doc_id].version_state) else "archive"
            assert place == expected, (pid, doc_id, place)
        ids = [p.point_id for p in self.before.values()]
        now = {str(p.point_id): p for p in self.split.read_points(ids)}
        for pid, point in self.before.items():
            assert f32(now[pid].vector) == f32(point.vector), pid


def f32(vector: Any) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def one_collection(engine: str, folder: Path, name: str) -> ChunkIndex:
    if engine == "memory":
        return InMemoryChunkIndex(collection=name)
    return EdgeChunkIndex(folder / name)


@pytest.fixture(params=["memory", "edge"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """Every version registered and ingested into the main collection, none moved yet."""
    table = migrated_table(tmp_path / "t.db")
    docs = declared()
    by_id = {d.doc_id: d for d in docs}
    rows = [row(d, by_id.get(d.superseded_by or "")) for d in docs]
    table.upsert_documents(rows)
    main = one_collection(request.param, tmp_path, "corpus")
    archive = one_collection(request.param, tmp_path, "corpus_archive")
    main.ensure_collection(dim=DIM)
    records = [
        ChunkRecord(
            point_id=str(1000 * n + c),  # (replaced below by integer ids)
            chunk_id=f"{r.doc_id}#{c}",
            text=f"text of {r.doc_id} {c}",
            vector=(0.1 * (n + 1), 0.37 * (c + 1), 0.73, 1.0 / (n + c + 3)),
            payload=chunk_payload(r, chunk_id=f"{r.doc_id}#{c}"),
        )
        for n, r in enumerate(rows)
        for c in range(CHUNKS)
    ]
    main.upsert_chunks(dataclasses.replace(r, point_id=int(r.point_id)) for r in records)  # type: ignore[arg-type]
    split = SplitChunkIndex(main, archive)
    before = {str(p.point_id): p for p in main.read_points([int(r.point_id) for r in records])}
    try:
        yield World(table, split, Source(docs), before)
    finally:
        split.close()
        table.close()


def test_apply_moves_every_version_that_is_not_servable_and_a_second_moves_nothing(
    world: World,
) -> None:
    first = world.run("apply")

    assert {(f.check, f.kind) for f in first.findings} == {("payload", "misplaced")}
    moved = FAMILIES * (VERSIONS - 1) * CHUNKS
    assert first.writes() == {
        "payload": 0,
        "table": 0,
        "reingest": 0,
        "points": 0,
        "index": 0,
        "moves": moved,
    }
    assert first.guard["moving_chunks"] == moved
    world.assert_placed()
    # a retrieval path that forgets default_filter() on the main collection: nothing
    # superseded comes back
    assert {s.payload["version_state"] for s in world.split.main.scroll()} == {"current"}
    check = world.run("check")
    assert (check.findings, check.writes()["moves"]) == ((), 0)
    second = world.run("apply")
    assert second.writes()["moves"] == 0
    entries, _hashes = world.table.run_entries_with_hashes(first.run_id)
    kinds = [e.target_type for e in entries]
    assert kinds.count(AuditKind.MOVE) == FAMILIES * (VERSIONS - 1)  # one intent a document
    assert AuditKind.MOVE_COPIED in kinds
    assert kinds[-1] == AuditKind.MOVE_DONE
    assert world.table.verify_audit().ok


def test_a_supersession_moves_the_old_version_and_a_rollback_moves_it_back(
    world: World,
) -> None:
    world.run("apply")
    # the source retires f0's current version and brings v2 back: both move
    world.source.documents = [
        dataclasses.replace(d, state=VersionState.RETIRED, superseded_by=None)
        if d.doc_id == "kb:f0v3"
        else d
        for d in world.source.documents
    ]
    report = world.run("apply")
    moves = {(m.doc_id, m.to_archive) for m in report.plan.moves}
    assert moves == {("kb:f0v3", True), ("kb:f0v2", False)}
    world.assert_placed()
    rows = world.table.get_documents(["kb:f0v2", "kb:f0v3"])
    assert rows["kb:f0v2"].version_state is VersionState.CURRENT

    undone = rollback(table=world.table, index=world.split, run_id=report.run_id)

    assert undone.moves == 2 * CHUNKS
    world.assert_placed()  # placed as the restored rows say
    rows = world.table.get_documents(["kb:f0v2", "kb:f0v3"])
    assert rows["kb:f0v3"].version_state is VersionState.CURRENT
    assert {s.doc_id for s in world.split.main.scroll()} >= {"kb:f0v3"}
    assert "kb:f0v2" not in {s.doc_id for s in world.split.main.scroll()}
    assert world.table.verify_audit().ok


def test_a_cascade_a_document_a_page_moves_back_what_its_dry_run_said(world: World) -> None:
    """Issue 35: pages of one document split both runs (a supersession's two moves, one each
    way, on pages of their own): the dry run says what a page of any size says, and what the
    rollback then moves and writes; every point ends where it was before the runs."""
    unmoved = world.where()
    first = world.run("apply")
    world.source.documents = [
        dataclasses.replace(d, state=VersionState.RETIRED, superseded_by=None)
        if d.doc_id == "kb:f0v3"
        else d
        for d in world.source.documents
    ]
    world.run("apply")
    where = world.where()

    def undo(**options: Any) -> dict[str, Any]:
        done = rollback(
            table=world.table, index=world.split, run_id=first.run_id, cascade=True, **options
        )
        return without_ids(done.to_json())

    dry = undo(dry_run=True, page_documents=1)
    assert dry == undo(dry_run=True)
    assert world.where() == where
    assert undo(page_documents=1) == dry
    assert dry["moves"] == FAMILIES * (VERSIONS - 1) * CHUNKS
    assert world.where() == unmoved
    assert world.table.verify_audit().ok


def test_a_rollback_a_page_at_a_time_stops_serving_before_it_serves_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that retired each family's current version and reinstated the one before moved
    points both ways; its rollback, one document a page (the pages alternate: f0v2 back into
    the archive, f0v3 out of it, f1v2 in, ...), moves every point into the archive before any
    out of it, so no family ever has two versions served (pages interleaved would)."""
    world.run("apply")
    back = {f"kb:f{f}v{VERSIONS - 1}" for f in range(FAMILIES)}
    retired = {f"kb:f{f}v{VERSIONS}" for f in range(FAMILIES)}
    world.source.documents = [
        dataclasses.replace(d, state=VersionState.CURRENT, superseded_by=None)
        if d.doc_id in back
        else dataclasses.replace(d, state=VersionState.RETIRED, superseded_by=None)
        if d.doc_id in retired
        else d
        for d in world.source.documents
    ]
    second = world.run("apply")
    directions: list[bool] = []
    batch = Mover._batch

    def spy(self: Mover, pairs: list[Any], to_archive: bool, *args: Any) -> None:
        directions.append(to_archive)
        batch(self, pairs, to_archive, *args)

    monkeypatch.setattr(Mover, "_batch", spy)
    done = rollback(table=world.table, index=world.split, run_id=second.run_id, page_documents=1)
    assert done.moves == 2 * FAMILIES * CHUNKS
    assert directions == sorted(directions, reverse=True)
    assert directions.count(True) == directions.count(False) == FAMILIES
    assert world.table.verify_audit().ok


def without_ids(data: dict[str, Any]) -> dict[str, Any]:
    """A rollback's output without the run ids it ran as, or whether it was dry."""
    return {
        **{k: v for k, v in data.items() if k not in ("run_id", "dry_run", "cascaded")},
        "cascaded": [without_ids(c) for c in data["cascaded"]],
    }


def test_a_dry_rollback_moves_nothing_and_says_what_it_would_move(world: World) -> None:
    report = world.run("apply")
    where = world.where()

    dry = rollback(table=world.table, index=world.split, run_id=report.run_id, dry_run=True)

    assert dry.moves == FAMILIES * (VERSIONS - 1) * CHUNKS
    assert world.where() == where


class Killed(BaseException):
    """What a SIGKILL is to the code it stops: nothing after it runs."""


class Faulty:
    """A part (or the table) that stops the process at the ``at``-th call of ``method``,
    after doing ``done`` of the call's items (``None``: the whole call)."""

    def __init__(self, inner: Any, method: str, at: int, done: float | None = 0.0) -> None:
        self.inner, self.method, self.at, self.done = inner, method, at, done
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name != self.method:
            return attribute

        def call(items: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls < self.at:
                return attribute(items, *args, **kwargs)
            if self.done is None:
                attribute(items, *args, **kwargs)
            elif self.done:
                attribute(items[: int(len(items) * self.done)], *args, **kwargs)
            raise Killed(f"{self.method} #{self.calls}")

        return call


class FaultyAudit(Faulty):
    """The table, stopping the process before it commits the ``at``-th entry list holding
    an entry of ``kind``."""

    def __init__(self, inner: Any, kind: str, at: int) -> None:
        super().__init__(inner, "append_audit", at)
        self.kind = kind

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name != "append_audit":
            return attribute

        def call(entries: Any) -> Any:
            if any(e.target_type == self.kind for e in entries):
                self.calls += 1
                if self.calls >= self.at:
                    raise Killed(f"before {self.kind} #{self.calls}")
            return attribute(entries)

        return call


#: Where a move of batches of 4 points stops, in its second batch: the part or table that
#: stops, its method (or the entry it does not commit), how much of the call it did, and how
#: many points of the batch in doubt the collection they leave still holds (the rest are in
#: the other). Stopped before the second batch's intent, the batch in doubt is the first:
#: its ``move_done`` goes with that intent; before the second ``move_done``, the second.
STOPS = {
    "before the intent": ("table", AuditKind.MOVE, None, 0),
    "before the copy": ("dest", "copy_points", 0.0, 4),
    "halfway through the copy": ("dest", "copy_points", 0.5, 4),
    "before the copy is read back": ("dest", "read_back", None, 4),
    "before the copy is confirmed": ("table", AuditKind.MOVE_COPIED, None, 4),
    "before the delete": ("source", "delete_stored", 0.0, 4),
    "halfway through the delete": ("source", "delete_stored", 0.5, 2),
    "before move_done": ("table", AuditKind.MOVE_DONE, None, 0),
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_move_stopped_between_any_two_steps_is_finished_by_the_next_runner(
    world: World, stop: str
) -> None:
    where, what, done, left = STOPS[stop]
    run_id = world.table.start_run(mode="split", actor="test", shard="0/1")
    table: Any = world.table
    source, dest = world.split.main, world.split.archive
    if where == "table":
        table = FaultyAudit(world.table, what, at=2)
    elif where == "dest":
        dest = Faulty(dest, what, at=2, done=done)  # type: ignore[assignment]
    else:
        source = Faulty(source, what, at=2, done=done)  # type: ignore[assignment]
    faulty = SplitChunkIndex(source, dest)
    mover = Mover(table=table, split=faulty, run_id=run_id, actor="test", batch_points=4)
    rows = world.table.iter_documents()
    targets = [_target(r) for r in rows if not kept_in_main(r.version_state)]
    with pytest.raises(Killed):
        mover.move_targets(targets, to_archive=True)  # (it stops in the 2nd batch)

    resolved = resolve_interrupted(table=world.table, index=world.split, shard="0/1")

    assert [r.run_id for r in resolved] == [run_id]
    assert world.table.get_run(run_id).status == RunStatus.INTERRUPTED  # type: ignore[union-attr]
    # the move finished: every point in one collection, where its row puts it, as it was
    Mover(table=world.table, split=world.split, run_id=run_id, actor="test").move_targets(
        targets, to_archive=True
    )  # (the batches the killed run never reached)
    world.assert_placed()
    entries, _ = world.table.run_entries_with_hashes(run_id)
    (resolve,) = [e for e in entries if e.target_type == AuditKind.MOVE_RESOLVE]
    assert resolve.after == {"finished": left, "moved": 4 - left, "missing": 0}
    assert world.table.verify_audit().ok


def _target(r: Document) -> MoveTarget:
    return MoveTarget(r.doc_id, r.doc_family_id, True, CHUNKS, ("test",))


def test_a_new_chunk_of_a_superseded_version_is_ingested_into_the_archive(world: World) -> None:
    world.run("apply")
    old = world.table.get_documents(["kb:f1v1"])["kb:f1v1"]
    world.split.delete_document_chunks(old.doc_id)
    record = ChunkRecord(
        point_id=99_999,  # type: ignore[arg-type]
        chunk_id=f"{old.doc_id}#0",
        text="again",
        vector=(0.5, 0.5, 0.5, 0.5),
        payload=chunk_payload(old, chunk_id=f"{old.doc_id}#0"),
    )

    world.split.upsert_chunks([record])

    assert [s.doc_id for s in world.split.archive.scroll(doc_ids=[old.doc_id])] == [old.doc_id]
    assert not list(world.split.main.scroll(doc_ids=[old.doc_id]))
    assert payload_for(old)["version_state"] == "superseded"
