"""The Edge adapter hands a write the ``uuid.UUID``s its lean scan was given (``IdMemory``,
issue 38 round 9): the same ids as the strings the reconciler holds, the same points written
with the same payloads, and nothing else changed (a string is all the rest of the reconciler
and the audit ever see)."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("qdrant_edge")

from reconciler.model import ChunkRecord, PayloadWrite
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.edge.requests import ID_MEMORY, IdMemory, edge_ids, our_id

_EDGE_IDS = st.one_of(st.uuids().map(lambda u: uuid.UUID(int=u.int)), st.integers(0, 2**64 - 1))


@given(st.lists(_EDGE_IDS, max_size=12), st.integers(0, 8), st.lists(_EDGE_IDS, max_size=6))
def test_a_remembered_id_is_the_uuid_of_the_same_string(
    handed: list[Any], limit: int, others: list[Any]
) -> None:
    """``our_id`` answers what the plain ``our_id`` answers; ``edge_ids`` gives back, for each
    id, either it or a ``uuid.UUID`` whose string it is, never more than ``limit`` held."""
    memory = IdMemory(limit)
    ours = [memory.our_id(point_id) for point_id in handed]
    assert ours == [our_id(point_id) for point_id in handed]
    assert all(
        type(p) is (str if isinstance(h, uuid.UUID) else int)
        for p, h in zip(ours, handed, strict=True)
    )
    assert len(memory) <= limit
    asked = edge_ids([*ours, *(our_id(p) for p in others)])
    given_back = memory.edge_ids(asked)
    assert len(given_back) == len(asked)
    for mine, theirs in zip(asked, given_back, strict=True):
        assert theirs == mine or (type(theirs) is uuid.UUID and str(theirs) == mine)
    held = [p for p in given_back if type(p) is uuid.UUID]
    assert len({str(p) for p in held}) <= limit
    memory.clear()
    assert memory.edge_ids(asked) == asked


def _corpus(path: Path) -> tuple[EdgeChunkIndex, list[str | int]]:
    index = EdgeChunkIndex(path)
    index.ensure_collection(dim=2)
    ids: list[str | int] = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{n}")) for n in range(40)]
    ids += [7, 2**63]
    doc = {"version_state": "superseded", "doc_version": 1}
    records = [
        ChunkRecord(pid, f"d{n % 5}#{n}", "t", (1.0, float(n)), {"doc_id": f"d{n % 5}", **doc})  # type: ignore[arg-type]
        for n, pid in enumerate(ids)
    ]
    index.upsert_chunks(records)
    return index, ids


def _scanned_ids(index: EdgeChunkIndex) -> list[str | int]:
    """Every id the lean scan converts (as the check does for the chunks it keeps)."""
    return [
        page.point_id(at) for page in index.scan_managed(batch_size=7) for at in range(len(page))
    ]


def _stored(index: EdgeChunkIndex) -> dict[Any, Any]:
    return {s.point_id: dict(s.payload) for s in index.scroll(batch_size=9)}


def test_a_write_after_a_scan_sets_what_the_strings_set(tmp_path: Path) -> None:
    """The same writes after a scan, with the scan's UUIDs remembered and without: the same
    points hold the same payloads, and the ids the scan gave are exact strings or ints."""
    results = []
    for limit in (0, 1_000):
        index, ids = _corpus(tmp_path / f"m{limit}")
        try:
            index._ids.limit = limit
            scanned = _scanned_ids(index)
            assert sorted(scanned, key=str) == sorted(ids, key=str)
            assert {type(p) for p in scanned} == {str, int}
            assert len(index._ids) == min(limit, 40)
            writes = [
                PayloadWrite(point_ids=tuple(scanned[:20]), payload={"version_state": "current"}),
                PayloadWrite(point_ids=tuple(scanned[20:25]), payload={"doc_version": None}),
                PayloadWrite(point_ids=tuple(scanned[25:]), payload={"doc_version": 3}),
            ]
            assert index.set_payloads(writes, batch_size=8) == len(ids)
            results.append(_stored(index))
        finally:
            index.close()
    assert results[0] == results[1]
    assert {p["version_state"] for p in results[1].values()} == {"current", "superseded"}


def test_the_memory_is_the_last_scan_s_and_a_closed_index_s_is_empty(tmp_path: Path) -> None:
    index, _ids = _corpus(tmp_path / "c")
    try:
        _scanned_ids(index)
        assert len(index._ids) == 40
        next(iter(index.scan_managed(batch_size=7)))  # (a new scan starts afresh)
        assert len(index._ids) == 0
    finally:
        index.close()
    assert len(index._ids) == 0


def test_a_repair_audits_and_writes_what_it_did_with_strings(tmp_path: Path) -> None:
    """A whole apply (the check's scan, then the writes by the ids it kept) on two copies of
    the same drifted Edge corpus, with the scan's UUIDs handed back and without: the same
    pages of intents (before and after texts) and every point with the same payload."""
    bench_phases = pytest.importorskip("bench.phases")
    from bench.corpus import Layout  # noqa: PLC0415 - the harness, from the checkout
    from reconciler.pipeline.values import Guard  # noqa: PLC0415

    seen = []
    for limit in (0, ID_MEMORY):
        layout = Layout(root=tmp_path / f"c{limit}", requested=600, dim=4, seed=7)
        bench_phases.build(layout, engine="edge")
        bench_phases.drift(layout, 20, engine="edge")
        stores = bench_phases.Stores(layout, engine="edge")
        try:
            stores.index._ids.limit = limit
            report = bench_phases._run(stores, "apply", Guard(max_changed_fraction=1.0))
            assert report.applied is not None
            assert report.applied.points == 200
            assert len(stores.index._ids) == min(limit, 200)
            with sqlite3.connect(layout.root / "reconciler.db") as db:
                pages = db.execute(  # (the texts as stored and hashed)
                    "SELECT target, before, after FROM audit_log"
                    " WHERE target_type = 'payload_page' ORDER BY seq"
                ).fetchall()
            seen.append((pages, _stored(stores.index)))
        finally:
            stores.close()
    assert seen[0][0]
    assert seen[0] == seen[1]
