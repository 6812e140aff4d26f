"""What is particular to the Qdrant Edge adapter, beyond the shared contract suite: the default
filter means the same on Edge as on qdrant-client, the shard's lock, point ids, and errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import qdrant_edge as qe
from qdrant_client import QdrantClient, models
from test_default_filter import DOCUMENTS, FUTURE, NOW, chunk_records

from reconciler.checks.index import REQUIRED_INDEXES
from reconciler.errors import ConfigError, IndexUnavailable, IndexWriteError
from reconciler.filters import default_edge_filter, default_filter, filter_terms
from reconciler.model import ChunkRecord, PayloadWrite
from reconciler.payload import KeyMap
from reconciler.ports.index import StoredPoint
from reconciler.stores.edge import files as edge_files
from reconciler.stores.edge.index import EdgeChunkIndex, available_memory
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.split import SplitChunkIndex
from reconciler.writing.moving import copy_into, same_point

LAYOUTS = {
    "default": (KeyMap(), "text"),
    "langchain": (KeyMap(prefix="metadata."), "page_content"),
    "renamed": (KeyMap(prefix="a.b.", renames={"version_state": "status"}), "body"),
}

#: (as_of, include_historical): now, past instants, both sides of a pending version's start,
#: an instant with microseconds and another offset, and the historical route with and without
#: an instant.
ROUTES = [
    (None, False),
    (datetime(2024, 3, 1, tzinfo=UTC), False),
    (datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC), False),
    (datetime(2025, 1, 1, tzinfo=UTC), False),
    (FUTURE - timedelta(seconds=1), False),
    (FUTURE, False),
    (FUTURE + timedelta(days=1, microseconds=250), False),
    (NOW.astimezone(timezone(timedelta(hours=-5))), False),
    (None, True),
    (datetime(2024, 3, 1, tzinfo=UTC), True),
    (datetime(2025, 6, 1, tzinfo=UTC), True),
]


class TwoEngines:
    """The same chunks, written by each adapter's ``upsert_chunks``, in local mode and Edge."""

    def __init__(self, root: Path, keys: KeyMap, text_key: str) -> None:
        self.keys = keys
        self.client = QdrantClient(path=str(root / "qdrant"))
        self.local = QdrantChunkIndex(self.client, collection="c", keys=keys, text_key=text_key)
        self.edge = EdgeChunkIndex(root / "edge" / "c", keys=keys, text_key=text_key)
        records = [r for d in DOCUMENTS for r in chunk_records(d)]
        for index in (self.local, self.edge):
            index.ensure_collection(dim=4)
            assert index.upsert_chunks(records) == len(records)

    def local_points(self, as_of: datetime | None, historical: bool) -> set[str]:
        query = default_filter(as_of, historical, keys=self.keys)
        found, offset = self.client.scroll("c", scroll_filter=query, limit=1000)
        assert offset is None
        assert self.local.count(query_filter=query) == len(found)
        return {str(p.id) for p in found}

    def edge_points(self, as_of: datetime | None, historical: bool) -> set[str]:
        query = default_edge_filter(as_of, historical, keys=self.keys)
        found, offset = self.edge.shard.scroll(qe.ScrollRequest(limit=1000, filter=query))
        assert offset is None
        assert self.edge.count(query_filter=query) == len(found)
        return {str(p.id) for p in found}

    def close(self) -> None:
        self.edge.close()
        self.client.close()


@pytest.fixture(params=list(LAYOUTS), ids=list(LAYOUTS))
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TwoEngines]:
    keys, text_key = LAYOUTS[request.param]
    both = TwoEngines(tmp_path, keys, text_key)
    try:
        yield both
    finally:
        both.close()


@pytest.mark.parametrize("indexed", [False, True], ids=["scan", "payload-indexes"])
def test_the_default_filter_selects_the_same_points_on_edge(
    engines: TwoEngines, indexed: bool
) -> None:
    if indexed:  # Edge then filters through its payload indexes, not by reading payloads
        for key, schema in REQUIRED_INDEXES.items():
            engines.edge.create_payload_index(key=key, schema=schema)
    seen: list[set[str]] = []
    for as_of, historical in ROUTES:
        local = engines.local_points(as_of, historical)
        assert engines.edge_points(as_of, historical) == local, (as_of, historical)
        seen.append(local)
    # the routes are not all alike: the comparison says something
    assert len({frozenset(s) for s in seen}) >= 5
    assert seen[0]
    assert all(len(s) < len(DOCUMENTS) * 2 for s in seen)


def test_both_renderings_come_from_one_description() -> None:
    keys = KeyMap(prefix="metadata.", renames={"quarantined": "hidden"})
    at = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
    terms = filter_terms(at, keys=keys)
    local = default_filter(at, keys=keys)
    edge = default_edge_filter(at, keys=keys)

    assert terms.instant == at
    assert terms.quarantined_path == "metadata.hidden"
    assert [c.key for c in local.must or []] == [  # type: ignore[union-attr]
        terms.state_path,
        terms.from_path,
        terms.to_path,
    ]
    assert [c.key for c in edge.must or []] == [  # type: ignore[union-attr]
        terms.state_path,
        terms.from_path,
        terms.to_path,
    ]
    assert [c.key for c in edge.must_not or []] == [terms.quarantined_path]  # type: ignore[union-attr]
    assert filter_terms(include_historical=True).instant is None
    assert isinstance(local, models.Filter)
    assert isinstance(edge, qe.Filter)


# -- the lock ---------------------------------------------------------------------------------


def _shard(root: Path) -> Path:
    path = root / "edge" / "corpus"
    index = EdgeChunkIndex(path)
    index.ensure_collection(dim=4)
    index.close()
    return path


def test_a_second_open_in_this_process_is_index_unavailable(tmp_path: Path) -> None:
    path = _shard(tmp_path)
    first = EdgeChunkIndex(path)
    try:
        with pytest.raises(IndexUnavailable, match="open in another process") as caught:
            EdgeChunkIndex(path)
        assert "retry" in str(caught.value)
    finally:
        first.close()
    again = EdgeChunkIndex(path)  # closing released the lock
    assert again.count() == 0
    again.close()


def test_a_shard_held_by_another_process_is_index_unavailable(tmp_path: Path) -> None:
    path = _shard(tmp_path)
    script = textwrap.dedent(
        f"""
        import sys
        import qdrant_edge
        shard = qdrant_edge.EdgeShard.load({str(path)!r})
        print("held", flush=True)
        sys.stdin.readline()
        shard.close()
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(IndexUnavailable, match="Edge allows one open shard at a time"):
                EdgeChunkIndex(path)
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
        assert holder.wait(timeout=60) == 0
    reopened = EdgeChunkIndex(path)  # the other process is gone: the shard opens
    assert reopened.exists()
    reopened.close()


def test_a_missing_or_closed_shard_is_index_unavailable(tmp_path: Path) -> None:
    index = EdgeChunkIndex(tmp_path / "nothing" / "here")
    assert index.exists() is False
    with pytest.raises(IndexUnavailable, match="run `reconciler ingest` first"):
        index.count()
    index.ensure_collection(dim=2)
    index.close()
    with pytest.raises(IndexUnavailable, match="was closed"):
        list(index.scroll())


def test_a_shard_created_by_another_open_is_found_and_its_dimension_checked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edge" / "corpus"
    early = EdgeChunkIndex(path)  # opened before ingestion created the shard
    assert early.exists() is False
    _shard(tmp_path)
    assert early.exists() is True
    assert early.count() == 0
    with pytest.raises(ConfigError, match="3 differs from the vector size 4"):
        early.ensure_collection(dim=3)
    early.ensure_collection(dim=4)
    early.close()


# -- point ids --------------------------------------------------------------------------------


def test_integer_and_uuid_ids_round_trip_exactly(tmp_path: Path) -> None:
    index = EdgeChunkIndex(tmp_path / "ids")
    index.ensure_collection(dim=2)
    ids: list[str | int] = [
        0,
        7,
        2**63,
        str(uuid.uuid5(uuid.NAMESPACE_URL, "x")),
        str(uuid.UUID(int=1)),
    ]
    try:
        index.upsert_chunks(
            ChunkRecord(
                point_id=pid,  # type: ignore[arg-type]  # integer ids, as Qdrant allows
                chunk_id=f"d#{n}",
                text="t",
                vector=(1.0, float(n)),
                payload={"doc_id": "d", "version_state": "current"},
            )
            for n, pid in enumerate(ids)
        )
        scanned = [s.point_id for s in index.scroll(batch_size=2)]
        assert sorted(scanned, key=str) == sorted(ids, key=str)
        assert scanned[:3] == [0, 7, 2**63]  # integers first, as qdrant-client scrolls
        assert {type(p) for p in scanned[3:]} == {str}
        assert {s.point_id for s in index.retrieve(ids)} == set(ids)
        assert index.set_payloads([PayloadWrite(point_ids=tuple(ids), payload={"doc_version": 2})])
        assert {s.payload["doc_version"] for s in index.scroll()} == {2}
        with pytest.raises(ValueError, match="unsigned integers or UUIDs"):
            index.retrieve(["not-a-uuid"])
        with pytest.raises(ValueError, match="unsigned integers or UUIDs"):
            index.retrieve([f"{ids[3]}x"])  # canonical, then more: not an id
        # Another spelling of a UUID is taken too, and names the same point.
        assert [s.point_id for s in index.retrieve([str(ids[3]).upper()])] == [ids[3]]
        with pytest.raises(ValueError, match="unsigned integers or UUIDs"):
            index.retrieve([-1])
    finally:
        index.close()


def test_a_failed_write_says_how_far_it_got(tmp_path: Path) -> None:
    index = EdgeChunkIndex(tmp_path / "w")
    index.ensure_collection(dim=2)
    try:
        index.upsert_chunks(
            ChunkRecord(
                point_id=n,  # type: ignore[arg-type]
                chunk_id=f"d#{n}",
                text="t",
                vector=(1.0, float(n)),
                payload={"doc_id": "d"},
            )
            for n in range(1, 4)
        )
        with pytest.raises(IndexWriteError, match="point 99 does not exist") as caught:
            index.set_payloads(
                [PayloadWrite(point_ids=(1, 2, 3, 99), payload={"quarantined": True})],
                batch_size=2,
            )
        assert caught.value.points_written == 2
        with pytest.raises(IndexWriteError, match="dimension"):
            index.upsert_chunks(
                [ChunkRecord(point_id=5, chunk_id="d#5", text="t", vector=(1.0,), payload={})]  # type: ignore[arg-type]
            )
    finally:
        index.close()


# -- reading ahead -----------------------------------------------------------------------------


def test_a_scroll_of_many_documents_reads_the_shard_files_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole scroll, and one selecting at least a document per ``read_ahead_bytes_per_doc``
    of the shard's files (bytes on disk), first reads those files through, once an open,
    never the vectors' (payload-only work does not read them), unless they would fill half the
    memory available; fewer documents, files too large, a file that cannot be read or is not
    a regular file: the same scroll. The check's lean scan reads ahead as the scroll does."""
    import os  # noqa: PLC0415

    index = EdgeChunkIndex(tmp_path / "ahead")
    index.ensure_collection(dim=2)
    index.upsert_chunks(
        ChunkRecord(
            point_id=n,  # type: ignore[arg-type]
            chunk_id=f"d{n % 4}#{n}",
            text="t" * 200,
            vector=(1.0, float(n)),
            payload={"doc_id": f"d{n % 4}", "version_state": "current"},
        )
        for n in range(1, 41)
    )
    index.shard.flush()
    read: list[str] = []
    real = edge_files.read_through

    def spy(path: str, chunk: bytearray) -> int:
        read.append(path)
        return real(path, chunk)

    monkeypatch.setattr(edge_files, "read_through", spy)
    monkeypatch.setattr(edge_files, "available_memory", lambda: 1 << 40)
    segments = tmp_path / "ahead" / "segments"
    assert any(d.name.startswith("vector_") for d in segments.rglob("*") if d.is_dir())
    files = {
        f
        for f in segments.rglob("*")
        if f.is_file() and not any(p.startswith("vector_") for p in f.relative_to(segments).parts)
    }
    assert files
    assert any("payload_storage" in f.parts for f in files)
    size = sum(f.stat().st_size for f in files)  # (what reading them reads)
    on_disk = sum(min(f.stat().st_size, f.stat().st_blocks * 512) for f in files)
    # A FIFO and a dangling link among them: neither read nor in the way.
    os.mkfifo(segments / "a-fifo")
    (segments / "a-dangling-link").symlink_to(tmp_path / "nowhere")

    def again() -> None:  # (as a new open would)
        index._read_ahead_done = False
        read.clear()

    # Three documents are enough to read the files ahead, two are not.
    index.read_ahead_bytes_per_doc = on_disk // 3 + 1
    try:

        def selected(docs: list[str]) -> list[int]:
            return sorted(int(s.point_id) for s in index.scroll(batch_size=7, doc_ids=docs))

        def whole() -> list[int]:
            return sorted(int(s.point_id) for s in index.scroll(batch_size=7))

        two = selected(["d0", "d1"])
        assert two == [n for n in range(1, 41) if n % 4 in (0, 1)]
        assert read == []  # too few documents: no reading ahead
        three = selected(["d0", "d1", "d2"])
        assert three == [n for n in range(1, 41) if n % 4 != 3]
        assert {Path(p) for p in read} == files
        assert len(read) == len(files)
        read.clear()
        assert whole() == list(range(1, 41))
        assert read == []  # once an open
        again()
        assert whole() == list(range(1, 41))
        assert {Path(p) for p in read} == files  # the whole shard, whatever the threshold
        again()
        assert sum(len(page.rows) for page in index.scan_managed(batch_size=7)) == 40
        assert {Path(p) for p in read} == files  # the check's scan
        again()
        assert index._read_ahead(None) == size

        # At the threshold exactly: one document per byte on disk.
        index.read_ahead_bytes_per_doc = 1
        again()
        assert index._read_ahead(on_disk - 1) == 0
        assert index._read_ahead(on_disk) == size
        index.read_ahead_bytes_per_doc = on_disk // 3 + 1

        # Files that would fill half the memory available, or no figure: not read ahead.
        for room in (2 * on_disk - 1, None):
            monkeypatch.setattr(edge_files, "available_memory", lambda room=room: room)
            again()
            assert selected(["d0", "d1", "d2"]) == three
            assert whole() == list(range(1, 41))
            assert read == []
        monkeypatch.setattr(edge_files, "available_memory", lambda: 2 * on_disk)
        again()
        assert index._read_ahead(3) == size

        # A file that cannot be read is skipped, and the scroll is the same.
        unreadable = sorted(files)[0]
        monkeypatch.setattr(
            edge_files,
            "read_through",
            lambda path, chunk: 0 if Path(path) == unreadable else real(path, chunk),
        )
        again()
        assert index._read_ahead(None) == size - unreadable.stat().st_size
        assert whole() == list(range(1, 41))
    finally:
        index.close()
    assert real(str(tmp_path / "no such file"), bytearray(8)) == 0
    with pytest.raises(IndexUnavailable, match="was closed"):
        index._read_ahead(None)  # a closed index reads nothing


def test_the_memory_available_is_linux_s_figure_within_a_container_s_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MemAvailable`` (KiB) in bytes; the free pages when it is missing; no more than a
    cgroup v2 limit leaves (none when the limit is ``max``); ``None`` when nothing is known."""
    import os  # noqa: PLC0415

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 900 kB\nMemFree: 300 kB\nMemAvailable: 500 kB\n")
    limit, used = tmp_path / "memory.max", tmp_path / "memory.current"
    monkeypatch.setattr(edge_files, "MEMINFO", str(meminfo))
    monkeypatch.setattr(edge_files, "CGROUP_MEMORY", (str(limit), str(used)))
    assert available_memory() == 500 * 1024  # (no cgroup files: no limit)
    limit.write_text("max\n")
    used.write_text("100\n")
    assert available_memory() == 500 * 1024
    limit.write_text(f"{300 * 1024}\n")
    assert available_memory() == 300 * 1024 - 100
    limit.write_text(f"{900 * 1024}\n")
    assert available_memory() == 500 * 1024
    used.write_text(f"{2000 * 1024}\n")
    assert available_memory() == 0  # (over its limit: no room)
    limit.unlink()
    meminfo.write_text("MemTotal: 900 kB\nMemFree: 300 kB\n")
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert abs(available_memory() - free) <= 64 << 20  # type: ignore[operator]
    monkeypatch.setattr(os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert available_memory() is None
    monkeypatch.undo()
    room = available_memory()  # this machine's own figure
    assert room is not None
    assert 0 < room <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_a_copy_of_integer_and_uuid_ids_together_reads_back_and_is_confirmed(
    tmp_path: Path,
) -> None:
    """The confirm of a move matches Edge's records by id when the ids asked are not Edge's
    own objects (a batch mixing integer and UUID ids, an id twice): an integer id is found."""
    main, archive = EdgeChunkIndex(tmp_path / "main"), EdgeChunkIndex(tmp_path / "archive")
    main.ensure_collection(dim=2)
    ids: list[str | int] = [7, str(uuid.UUID(int=1)), 2**63]
    try:
        main.copy_points(
            [StoredPoint(pid, [1.0, float(n)], {"doc_id": "d"}) for n, pid in enumerate(ids)]
        )
        read = main.read_points(ids)
        split = SplitChunkIndex(main, archive)
        copy_into(split, archive, read)  # (no IndexWriteError: each is there as read)

        for asked in (read, [read[0], read[0]], read[::-1]):
            back = archive.read_back(asked)
            assert all(same_point(p, c) for p, c in zip(asked, back, strict=True))
    finally:
        main.close()
        archive.close()
