"""A split store's moves read each point once, whole, in the pass that finds it
(``ChunkReader.scan_points``), and cut the pages into batches of ``batch_points``: whatever
the page size, the batch size and the documents chosen, exactly the chosen documents' points
move, as they were, each in one ``move`` intent of its document, and nothing else moves. On
two in-memory collections (no driver)."""

from __future__ import annotations

from typing import Any

import hypothesis_kit
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import AuditEntry, AuditKind
from reconciler.planning import MoveTarget
from reconciler.stores.split import SplitChunkIndex
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.moving import Mover


class Trail:
    """The audit as a list (what ``append_audit`` was handed, in order)."""

    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []

    def append_audit(self, entries: list[AuditEntry]) -> str:
        self.entries += entries
        return f"head-{len(self.entries)}"


def _store(chunks: list[int]) -> SplitChunkIndex:
    main = InMemoryChunkIndex(collection="main")
    main.ensure_collection(dim=2)
    for doc, count in enumerate(chunks):
        for chunk in range(count):
            main.put_point(
                doc * 100 + chunk,
                vector=[float(doc), float(chunk) + 0.5],
                payload={"doc_id": f"d{doc}", "chunk_id": f"d{doc}#{chunk}", "text": "t" * chunk},
            )
    return SplitChunkIndex(main, InMemoryChunkIndex(collection="archive"))


@settings(max_examples=hypothesis_kit.examples(60))
@given(
    chunks=st.lists(st.integers(0, 5), min_size=1, max_size=8),
    chosen=st.sets(st.integers(0, 7)),
    page=st.integers(1, 7),
    batch=st.integers(1, 7),
)
def test_moves_take_the_chosen_documents_points_whole_each_read_once(
    chunks: list[int], chosen: set[int], page: int, batch: int
) -> None:
    split = _store(chunks)
    before = {p.point_id: p for p in split.main.read_points(list(range(800)))}
    reads: list[Any] = []
    scan = split.main.scan_points

    def counted(**kwargs: Any) -> Any:
        for found in scan(**kwargs):
            reads.extend(p.point_id for p in found.points)
            yield found

    split.main.scan_points = counted  # type: ignore[method-assign]
    trail = Trail()
    mover = Mover(
        table=trail, split=split, run_id="r", actor="t", batch_points=batch, scroll_batch=page
    )
    targets = [MoveTarget(f"d{d}", "f", True, 0, ("test",)) for d in sorted(chosen)]

    moved = mover.move_targets(targets, to_archive=True)
    mover.finish()

    wanted = {pid for pid, p in before.items() if int(p.payload["doc_id"][1:]) in chosen}
    assert moved == len(wanted)
    assert sorted(reads) == sorted(wanted)  # each point read once from the collection it leaves
    archived = split.archive.read_points(sorted(wanted)) if split.archive.exists() else []
    assert {p.point_id: p for p in archived} == {pid: before[pid] for pid in wanted}
    assert {p.point_id for p in split.main.read_points(list(before))} == set(before) - wanted
    intents = [e for e in trail.entries if e.target_type == AuditKind.MOVE]
    named = [pid for e in intents for pid in e.before["points"]]
    assert sorted(named) == sorted(wanted)
    assert all(
        before[pid].payload["doc_id"] == e.target for e in intents for pid in e.before["points"]
    )
