"""The raw copy-and-delete floor of ``reconciler split`` on Qdrant Edge, no reconciler code in
the moves: ``python -m bench.split_floor SHARD SCRATCH BATCH`` (``bench.split`` runs it).

On a copy of ``SHARD`` (the corpus's main shard) in ``SCRATCH``, beside an empty archive shard
with its configuration and payload indexes, the points ``split`` moves (every chunk whose
``version_state`` is not ``current``) are read whole (``retrieve`` with vectors and payload)
before the clock starts; then, ``BATCH`` ids at a time, made into Edge points, upserted into
the archive (``UPSERT_BATCH`` a call, as a move copies) and deleted from the main shard. It
prints one JSON line: points moved, wall and CPU seconds of the moves, CPU of the read.
``bench.instructions --split`` counts the same moves (``moves``) in instructions.
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
    """The scratch pair (main: a copy of ``source``; archive: empty, made ready) and the Edge
    ids of the points ``split`` moves."""
    from reconciler.stores.edge.index import EdgeChunkIndex  # noqa: PLC0415 - the edge extra
    from reconciler.stores.edge.requests import edge_id  # noqa: PLC0415

    shutil.copytree(source, scratch / "main")
    main, archive = EdgeChunkIndex(scratch / "main"), EdgeChunkIndex(scratch / "archive")
    archive.ensure_layout(main.vector_layout(), indexes=main.payload_indexes())
    ids = [
        edge_id(c.point_id) for c in main.scroll() if c.payload.get("version_state") != "current"
    ]
    return main, archive, ids


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
) -> dict[str, Any]:
    """The floor on a scratch pair; ``around`` runs the moves (e.g. counted) when given."""
    main, archive, ids = prepared(source, scratch)
    try:
        started = time.process_time()
        batches = read(main, ids, batch)
        read_cpu = time.process_time() - started
        wall, cpu = time.perf_counter(), time.process_time()
        moved = (around or (lambda act: act()))(lambda: moves(main, archive, batches))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        main.close()
        archive.close()
    return {"moved": moved, "seconds": wall, "cpu": cpu, "read_cpu": read_cpu}


def main(argv: list[str] | None = None) -> int:
    source, scratch, batch = (argv or sys.argv[1:])[:3]
    print(json.dumps(run(Path(source), Path(scratch), int(batch))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
