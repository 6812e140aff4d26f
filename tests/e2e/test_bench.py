"""The benchmark harness stays alive: a small ``python -m bench`` run, end to end.

It asserts only that the harness runs and that the engine converges (the check after apply
finds nothing); speed and memory are measured by the bench itself, never asserted here. The
re-embedding and LangChain phases are opt-in (they need torch): this run skips them, and the
table says so.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return _python("-m", "bench", "--repeat=1", f"--tmpdir={tmp_path}", *args)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` from the checkout (the harness is not installed)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )


def test_a_small_local_bench_runs_and_converges(tmp_path: Path) -> None:
    done = _bench("--sizes=1500", "--repair-docs=40", "--engine=local", tmp_path=tmp_path)

    assert done.returncode == 0, done.stderr
    table = done.stdout
    for label in (
        "| bare scroll |",
        "| check (no drift) |",
        "| apply |",
        "| check after apply |",
        "| repair --doc (on demand) |",
        "| reconciler repair --family F1 ... (the command) |",
    ):
        assert label in table
    # The command, run as an operator runs it, wrote the drifted documents' points.
    assert "the console command timed from spawn to exit" in table
    assert "; 400 points written," in table
    assert "zero drift ✓" in table
    assert "paired, each check over the bare scrolls just before and after it: median" in table
    assert "repaired 40 docs: 400 points in 40 set_payload operations" in table
    # Every measured row sets its figure beside a floor measured in the same run.
    assert "| floor, same run (CPU s) | CPU vs floor |" in table
    assert "a bare scroll that also takes each point's payload" in table
    assert "floor: the same 400 points' writes replayed raw (client.batch_update_points" in table
    assert "re-ingest floor, the same 400 points upserted whole" in table
    assert "not run (opt-in" in table
    assert list(tmp_path.iterdir()) == []  # the corpora were removed


def test_the_edge_engine_runs_or_says_why_not(tmp_path: Path) -> None:
    done = _bench("--sizes=1500", "--repair-docs=40", "--engine=edge", tmp_path=tmp_path)

    edge = all(importlib.util.find_spec(m) for m in ("qdrant_edge", "reconciler.stores.edge.index"))
    if not edge:
        # Without the Edge adapter or qdrant-edge-py, the flag stops at once and says why.
        assert done.returncode == 2
        assert "Qdrant Edge adapter" in done.stderr
        return
    # With it, the same small run on Edge (bench.phases.Stores opens the Edge shard).
    assert "engine edge" in done.stdout
    assert done.returncode == 0, done.stderr
    assert "zero drift ✓" in done.stdout
    assert "; 400 points written," in done.stdout  # `reconciler repair` on the Edge shard


def test_a_paired_ratio_is_each_check_over_the_scrolls_around_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # the harness is run from the checkout, not installed
    from bench.phases import paired_ratios  # noqa: PLC0415

    assert paired_ratios([3.0, 9.0], [1.0, 2.0, 4.0]) == [2.0, 3.0]
    assert paired_ratios([3.0, 9.0], [0.0, 0.0, 4.0]) == [4.5]  # (no time: no ratio)
    with pytest.raises(ValueError, match="one more scroll"):
        paired_ratios([3.0], [1.0])


def test_a_floor_replays_the_recorded_writes_as_the_engine_s_own_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench.floors``: the writes an adapter received are recorded and replayed raw, the
    same points in the same operations (local mode: one ``batch_update_points`` a call), and
    the replay leaves the payloads as they were; the upsert floor rewrites whole points."""
    monkeypatch.syspath_prepend(str(ROOT))  # the harness is run from the checkout
    from bench.floors import (  # noqa: PLC0415
        WriteRecorder,
        recorded_ids,
        set_payload_floor,
        upsert_floor,
    )
    from reconciler.model import ChunkRecord, PayloadWrite  # noqa: PLC0415
    from reconciler.stores.qdrant.index import QdrantChunkIndex, connect  # noqa: PLC0415

    index = QdrantChunkIndex(connect(path=str(tmp_path / "q")), collection="c")
    try:
        index.ensure_collection(dim=2)
        ids = [f"00000000-0000-0000-0000-{n:012d}" for n in range(1, 6)]
        index.upsert_chunks(
            ChunkRecord(point_id=pid, chunk_id=f"d#{n}", text="t", vector=(1.0, 0.0),
                        payload={"doc_id": "d", "version_state": "current"})
            for n, pid in enumerate(ids)
        )  # fmt: skip
        writes = [
            PayloadWrite(point_ids=tuple(ids[:3]), payload={"version_state": "superseded"}),
            PayloadWrite(point_ids=tuple(ids[3:]), payload={"version_state": "superseded"}),
        ]
        with WriteRecorder(index) as recorded:
            assert index.set_payloads(writes, batch_size=3) == 5
        assert "set_payloads" not in vars(index)  # (the recorder is gone)
        assert recorded.points == 5
        assert recorded_ids(recorded) == ids
        floor = set_payload_floor(index, recorded)
        assert (floor.points, floor.operations, floor.calls) == (5, 2, 2)
        assert {c.payload["version_state"] for c in index.retrieve(ids)} == {"superseded"}
        upserted = upsert_floor(index, ids)
        assert (upserted.points, upserted.calls) == (5, 1)
        assert {c.payload["version_state"] for c in index.retrieve(ids)} == {"superseded"}
    finally:
        index.close()


def test_an_edge_floor_writes_the_repair_s_changes_on_a_shard_loaded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Edge the floor first gives the points back what the repair's intents say they held
    before (untimed), loads the shard again, then replays the recorded writes: the same
    before→after changes, and the payloads end as the repair left them."""
    pytest.importorskip("qdrant_edge")
    monkeypatch.syspath_prepend(str(ROOT))
    from datetime import UTC, datetime  # noqa: PLC0415

    from bench.floors import WriteRecorder, set_payload_floor  # noqa: PLC0415
    from reconciler.model import (  # noqa: PLC0415
        AuditEntry,
        AuditKind,
        ChunkRecord,
        PayloadWrite,
        page_entry,
    )
    from reconciler.stores.edge.index import EdgeChunkIndex  # noqa: PLC0415

    class Table:  # (what the recorder wraps: the applier's append)
        def append_audit(self, entries: list[AuditEntry]) -> str:
            return "head"

    path = tmp_path / "edge" / "c"
    index, table = EdgeChunkIndex(path), Table()
    ids = [f"00000000-0000-0000-0000-{n:012d}" for n in range(1, 6)]
    try:
        index.ensure_collection(dim=2)
        index.upsert_chunks(
            ChunkRecord(point_id=pid, chunk_id=f"d#{n}", text="t", vector=(1.0, 0.0),
                        payload={"doc_id": "d", "version_state": "current"})
            for n, pid in enumerate(ids)
        )  # fmt: skip
        intent = AuditEntry("r", datetime.now(UTC), "a", "x", AuditKind.PAYLOAD, "d",
                            {"points": ids, "payload": {"version_state": "current", "doc_class": "p"}},
                            {"payload": {"version_state": "superseded", "doc_class": "p"}})  # fmt: skip
        write = PayloadWrite(point_ids=tuple(ids), payload={"version_state": "superseded"})
        with WriteRecorder(index, table) as recorded:
            table.append_audit([page_entry([intent])])
            index.set_payloads([write], batch_size=3)
        assert "append_audit" not in vars(table)
        assert recorded.befores() == [
            PayloadWrite(point_ids=tuple(ids), payload={"version_state": "current"})
        ]
        floor = set_payload_floor(index, recorded)
        assert (floor.points, floor.operations) == (5, 2)
        assert not index.exists()  # (closed: the floor loaded the shard itself)
    finally:
        index.close()
    again = EdgeChunkIndex(path)
    try:
        assert {c.payload["version_state"] for c in again.retrieve(ids)} == {"superseded"}
    finally:
        again.close()


def test_the_optimize_phase_leaves_a_shard_the_reconciler_still_repairs(tmp_path: Path) -> None:
    """``bench.phases optimize --on-disk-indexes``: Edge's optimiser makes the corpus one
    indexed, immutable segment (the threshold lowered so that 1,500 chunks are above it), the
    payload indexes become memory-mapped ones, every one the filter needs is still there, and
    drift is still found and repaired."""
    import json  # noqa: PLC0415

    import qdrant_edge as qe  # noqa: PLC0415 - the test extra installs it

    def phase(*args: str) -> dict[str, object]:
        where = (str(tmp_path), "1500", "--engine=edge", "--repair-docs=40")
        done = _python("-m", "bench.phases", *args, *where)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    phase("build")
    shard_path = tmp_path / "edge" / "bench"
    vectors = qe.EdgeVectorParams(size=16, distance=qe.Distance.Cosine)
    lowered = qe.EdgeOptimizersConfig(indexing_threshold=1)  # (KB)
    qe.EdgeShard.load(str(shard_path), qe.EdgeConfig(vectors=vectors, optimizers=lowered)).close()
    optimized = phase("optimize", "--on-disk-indexes")
    assert optimized["optimized"] is True
    assert optimized["on_disk_indexes"] == 6
    # One indexed, immutable segment (beside it Edge keeps an empty appendable one for writes).
    (segment,) = (s for s in (shard_path / "segments").iterdir() if (s / "vector_index").is_dir())
    assert not list(segment.glob("mutable_*"))
    shard = qe.EdgeShard.load(str(shard_path))
    try:
        schema = shard.info().payload_schema
        assert {info.params.on_disk for info in schema.values()} == {True}
    finally:
        shard.close()
    phase("drift")
    repaired = phase("repair-cli")
    assert repaired["points_written"] == 400
    checked = phase("check")
    assert checked["findings"] == 0


def test_the_audit_bench_answers_a_family_of_a_small_log(tmp_path: Path) -> None:
    """``python -m bench.audit``: a small log built, the three commands run on it, the family
    asked about replayed from its own entries (three ingestions, its writes, their
    confirmations), the folder removed."""
    done = _python("-m", "bench.audit", "--entries=3000", f"--tmpdir={tmp_path}")

    assert done.returncode == 0, done.stderr
    [row] = [line.split() for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert int(row[0]) >= 3000
    assert int(row[-1]) == 7
    assert "verify CPU" in done.stdout  # CPU beside wall    assert list(tmp_path.iterdir()) == []
