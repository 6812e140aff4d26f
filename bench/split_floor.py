"""The raw copy-and-delete floor of ``reconciler split`` on Qdrant Edge, no reconciler code in
the moves: ``python -m bench.split_floor SHARD SCRATCH BATCH`` (``bench.split`` runs it).

On a copy of ``SHARD`` (the corpus's main shard) in ``SCRATCH``, beside an archive shard not
yet made, the points ``split`` moves (every chunk whose
``version_state`` is not ``current``) are read whole (``retrieve`` with vectors and payload)
before the clock starts; then, ``BATCH`` ids at a time, made into Edge points, upserted into
the archive (``UPSERT_BATCH`` a call, as a move copies) and deleted from the main shard. It
prints one JSON line: points moved, wall and CPU seconds of the moves, CPU of the read, and
CPU of the two ends a move pays as the command does (``ends_cpu``): the archive made ready
before the first copy (``ready``: created with the main shard's configuration and payload
indexes, as ``split``'s first batch makes it) and both shards flushed and closed after the
last delete (``flushed``: the writes made durable, as ``split`` closes its shards before it
returns). ``bench.instructions --split`` counts the same moves (``moves``) and ends.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def prepared(source: Path, scratch: Path) -> tuple[Any, Any, list[Any]]:
    """The scratch pair (main: a copy of ``source``; archive: not yet made, ``ready`` makes
    it) and the Edge ids of the points ``split`` moves."""
    from reconciler.stores.edge.index import EdgeChunkIndex  # noqa: PLC0415 - the edge extra
    from reconciler.stores.edge.requests import edge_id  # noqa: PLC0415

    shutil.copytree(source, scratch / "main")
    main, archive = EdgeChunkIndex(scratch / "main"), EdgeChunkIndex(scratch / "archive")
    ids = [
        edge_id(c.point_id) for c in main.scroll() if c.payload.get("version_state") != "current"
    ]
    return main, archive, ids


def ready(main: Any, archive: Any) -> int:
    """Make the archive as ``split``'s first batch does: the main shard's configuration and
    payload indexes."""
    archive.ensure_layout(main.vector_layout(), indexes=main.payload_indexes())
    return 0


def flushed(main: Any, archive: Any) -> int:
    """Flush and close both shards (the moves' writes made durable), as ``split`` does."""
    main.close()
    archive.close()
    return 0


def read(main: Any, ids: list[Any], batch: int) -> list[list[Any]]:
    """The points, read whole, ``batch`` records a list."""
    return [main.shard.retrieve(ids[at : at + batch], True, True) for at in range(0, len(ids), batch)]  # fmt: skip


def moves(main: Any, archive: Any, batches: list[list[Any]]) -> int:
    """Copy each batch of records into ``archive`` and delete them from ``main``: the moves."""
    import qdrant_edge as qe  # noqa: PLC0415 - the edge extra

    from reconciler.stores.edge.index import UPSERT_BATCH  # noqa: PLC0415

    moved = 0
    for records in batches:
        points = [qe.Point(r.id, r.vector, r.payload) for r in records]
        for at in range(0, len(points), UPSERT_BATCH):
            archive.shard.update(qe.UpdateOperation.upsert_points(points[at : at + UPSERT_BATCH]))
        main.shard.update(qe.UpdateOperation.delete_points([r.id for r in records]))
        moved += len(records)
    return moved


def run(
    source: Path,
    scratch: Path,
    batch: int,
    around: Callable[[Callable[[], int]], int] | None = None,
    around_ends: Callable[[Callable[[], int]], int] | None = None,
) -> dict[str, Any]:
    """The floor on a scratch pair; ``around`` runs the moves (e.g. counted) when given,
    ``around_ends`` each of the two ends (``ready``, ``flushed``)."""
    main, archive, ids = prepared(source, scratch)
    plain: Callable[[Callable[[], int]], int] = lambda act: act()  # noqa: E731
    try:
        started = time.process_time()
        batches = read(main, ids, batch)
        read_cpu = time.process_time() - started
        ends = time.process_time()
        (around_ends or plain)(lambda: ready(main, archive))
        ends = time.process_time() - ends
        wall, cpu = time.perf_counter(), time.process_time()
        moved = (around or plain)(lambda: moves(main, archive, batches))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        started = time.process_time()
        (around_ends or plain)(lambda: flushed(main, archive))
        ends += time.process_time() - started
    finally:
        main.close()
        archive.close()
    return {"moved": moved, "seconds": wall, "cpu": cpu, "read_cpu": read_cpu, "ends_cpu": ends}


def main(argv: list[str] | None = None) -> int:
    source, scratch, batch = (argv or sys.argv[1:])[:3]
    print(json.dumps(run(Path(source), Path(scratch), int(batch))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
