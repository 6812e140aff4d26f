"""A split store on Qdrant Edge, timed: ``python -m bench.split [--sizes 100000,1000000]``.

For each size N it builds the bench's synthetic corpus on Edge (``python -m bench.phases build
ROOT N --engine edge``: families of 3 versions, versions 1 and 2 superseded, 10 chunks a
document, the six payload indexes), configures it as a split store (``[index]
archive_collection``), then runs the console command itself, each in a fresh process timed
from spawn to exit (wall; CPU and peak RSS of that process alone, from ``wait4``):

- ``check`` before the split (every superseded chunk is ``payload/misplaced``);
- ``split --dry-run`` (what would move; nothing written);
- ``split`` (the moves: two thirds of the points, whole, a batch of ``--batch`` ids at a time,
  audited: intent, copy, read back, delete);
- ``check`` after it (nothing found), and ``split`` again (nothing to move);
- ``split --merge`` (every archived point back into the main collection: the same moves the
  other way) under ``tracemalloc``, for the peak of Python objects held at once (the rest of
  the process's peak RSS is the Edge shards' own memory, which grows with the shards).

Beside ``split``, its floor: the raw copy-and-delete of the same points with no reconciler
code, on a scratch pair of shards (a copy of the corpus's shard taken before the split, and
an archive shard), in a process of its own: the points are read whole (``retrieve`` with
vectors and payload) before the clock starts, then, a batch of ``--batch`` ids at a time,
made into Edge points, upserted into the archive (``UPSERT_BATCH`` a call, as a move copies)
and deleted from the main shard. Its two ends, which the command's moves pay as well, are
timed apart and printed beside: the archive made (its configuration and payload indexes)
before the first copy, and both shards flushed and closed after the last delete. The floor runs
twice, before the commands and right after ``split`` (each on a copy of the shard as the split
met it), and the ``split`` row gives the command's CPU time a move over the mean of the two:
the floor moved from 95 to 128 µs a move between runs of the same size with the machine's
load, not with warm-up (within one run, its first third of moves costs no more than the rest),
so two runs bracketing the command make the ratio steadier than one before it.

It checks what the split left (``status``: the archive holds exactly the superseded
versions' chunks, the two collections together every point) and prints one table; moves/s
is points moved over the command's wall time. Temporary folders are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.corpus import CHUNKS_PER_DOC, COLLECTION, Layout

ARCHIVE = f"{COLLECTION}_archive"
#: (label, command arguments) of each timed run, in order.
RUNS = (
    ("check (one collection's layout)", ["check"]),
    ("split --dry-run", ["split", "--dry-run"]),
    ("split", ["split"]),
    ("check (split)", ["check"]),
    ("split (again: nothing to move)", ["split"]),
)


def timed(command: list[str], timeout: float) -> dict[str, Any]:
    """Run a command; its wall seconds, CPU seconds and peak RSS (MiB), and its stdout."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = started + timeout
    out = b""
    err = b""
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            process.kill()
            raise TimeoutError(f"{' '.join(command)} took longer than {timeout:.0f} s")
        # (drain the pipes so a large JSON report cannot block the child)
        assert process.stdout is not None
        assert process.stderr is not None
        time.sleep(0.05)
        out += _read(process.stdout)
        err += _read(process.stderr)
    seconds = time.perf_counter() - started
    assert process.stdout is not None
    assert process.stderr is not None
    out += process.stdout.read()
    err += process.stderr.read()
    process.returncode = os.waitstatus_to_exitcode(status)
    return {
        "seconds": seconds,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak": usage.ru_maxrss / 1024,
        "code": process.returncode,
        "stdout": out.decode(),
        "stderr": err.decode()[-2000:],
    }


def _read(pipe: Any) -> bytes:
    os.set_blocking(pipe.fileno(), False)
    try:
        return pipe.read() or b""
    finally:
        os.set_blocking(pipe.fileno(), True)


def config(layout: Layout, batch: int) -> Path:
    """The split store's config: the corpus's table, its Edge shard and an archive beside."""
    path = layout.root / "split.toml"
    path.write_text(
        f"[table]\nurl = {json.dumps(layout.table_url)}\n\n"
        f'[index]\nengine = "edge"\npath = {json.dumps(str(layout.root / "edge"))}\n'
        f"collection = {json.dumps(COLLECTION)}\narchive_collection = {json.dumps(ARCHIVE)}\n"
        f"scroll_batch = {batch}\n",
        encoding="utf-8",
    )
    return path


def one_size(size: int, folder: Path, *, dim: int, seed: int, batch: int) -> list[list[str]]:
    layout = Layout(root=folder / f"split-{size}", requested=size, dim=dim, seed=seed)
    timeout = 600 + 0.05 * size
    build = timed(
        [
            *(sys.executable, "-m", "bench.phases", "build", str(layout.root), str(size)),
            *("--engine", "edge", "--dim", str(dim), "--seed", str(seed)),
        ],
        timeout,
    )
    if build["code"] != 0:
        raise RuntimeError(f"build failed:\n{build['stderr']}")
    rows = [[f"{layout.chunks:,}", "build (setup)", *_cells(build), "-", "-"]]
    cli = [sys.executable, "-m", "reconciler.cli", "--config", str(config(layout, batch))]
    moved = layout.superseded * CHUNKS_PER_DOC
    # (the shard as the split meets it, kept for the floor's second run, after the split)
    before = folder / f"before-{size}"
    shutil.copytree(layout.root / "edge" / COLLECTION, before)
    floors = [_floor(before, folder / f"floor-{size}", batch, timeout, moved)]
    rows.append(_floor_row(layout, floors[0], moved, "before the commands"))
    for label, arguments in RUNS:
        done = timed([*cli, "--format", "json", *arguments], timeout)
        data = json.loads(done["stdout"]) if done["stdout"].strip() else {}
        if done["code"] not in (0, 2):
            raise RuntimeError(f"{label} exited {done['code']}:\n{done['stderr']}")
        points = data.get("moved") if arguments[0] == "split" else None
        note = "-"
        if label == "split --dry-run":
            points = data["to_archive"]["points"]
            assert points == moved, (points, moved)
            note = f"{points:,} to move"
        elif arguments[0] == "check":
            note = f"{len(data['findings']):,} finding(s)"
        elif label == "split":
            floors.append(_floor(before, folder / f"floor-{size}", batch, timeout, moved))
            shutil.rmtree(before, ignore_errors=True)
            floor_move = sum(f["cpu"] for f in floors) / len(floors) / moved
            note = (
                f"{points:,} moved; {done['cpu'] / moved * 1e6:.0f} µs CPU a move, "
                f"**{done['cpu'] / moved / floor_move:.2f}x** the floor (the mean of its runs "
                "before and after; process start, scan and audit included)"
            )
        elif points is not None:
            note = f"{points:,} moved"
        rate = f"{points / done['seconds']:,.0f}" if points and label == "split" else "-"
        rows.append([f"{layout.chunks:,}", label, *_cells(done), note, rate])
        if label == "split":
            rows.append(_floor_row(layout, floors[1], moved, "right after `split`"))
    status = timed([*cli, "--format", "json", "status"], timeout)
    index = json.loads(status["stdout"])["index"]
    assert index["chunks"] == layout.chunks, index
    assert index["archive"]["chunks"] == moved, index
    merged = timed([sys.executable, "-c", HEAP, str(layout.root / "split.toml")], timeout)
    if merged["code"] != 0:
        raise RuntimeError(f"split --merge failed:\n{merged['stderr']}")
    heap = json.loads(merged["stdout"].strip().splitlines()[-1])
    note = f"{heap['moved']:,} moved; Python heap peak {heap['heap']:.1f} MiB"
    rate = f"{heap['moved'] / merged['seconds']:,.0f}"
    rows.append([f"{layout.chunks:,}", "split --merge (tracemalloc)", *_cells(merged), note, rate])
    return rows


def _floor(shard: Path, scratch: Path, batch: int, timeout: float, moved: int) -> dict[str, Any]:
    """One run of the floor (``bench.split_floor``) on a copy of ``shard``: its JSON line."""
    command = [sys.executable, "-m", "bench.split_floor", str(shard), str(scratch), str(batch)]
    try:
        floored = timed(command, timeout)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if floored["code"] != 0:
        raise RuntimeError(f"the copy-and-delete floor failed:\n{floored['stderr']}")
    floor: dict[str, Any] = json.loads(floored["stdout"].strip().splitlines()[-1])
    assert floor["moved"] == moved, (floor["moved"], moved)
    return floor


def _floor_row(layout: Layout, floor: dict[str, Any], moved: int, when: str) -> list[str]:
    return [
        f"{layout.chunks:,}",
        f"floor: raw copy-and-delete (Edge, scratch shards), {when}",
        f"{floor['seconds']:.2f}",
        f"{floor['cpu']:.2f}",
        "-",
        f"{moved:,} moved; {floor['cpu'] / moved * 1e6:.0f} µs CPU a move (read before the "
        f"clock: {floor['read_cpu']:.2f} s CPU; its ends, the archive made and the writes "
        f"flushed: {floor['ends_cpu']:.2f} s CPU)",
        f"{moved / floor['seconds']:,.0f}",
    ]


#: ``split --merge`` in this process under tracemalloc; prints the points moved and the peak.
HEAP = """
import json, sys, tracemalloc
import reconciler.stores.sql  # (loaded when the table opens: before the trace, not in the peak)
from reconciler.app.splitting import split_store
from reconciler.settings import load_settings
settings = load_settings(sys.argv[1])
tracemalloc.start()
data = split_store(settings, merge=True)
peak = tracemalloc.get_traced_memory()[1] / 2**20
print(json.dumps({"moved": data["moved"], "heap": peak}))
"""


def _cells(done: dict[str, Any]) -> list[str]:
    return [f"{done['seconds']:.2f}", f"{done['cpu']:.2f}", f"{done['peak']:,.0f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.split", description=__doc__)
    parser.add_argument("--sizes", default="100000", help="comma-separated chunk counts")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--batch", type=int, default=1000, help="[index] scroll_batch: points a move batch"
    )
    parser.add_argument("--tmpdir", type=Path, default=None)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench-split-", dir=args.tmpdir))
    header = ["chunks", "command", "wall s", "CPU s", "peak RSS MiB", "", "moves/s"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            for row in one_size(size, folder, dim=args.dim, seed=args.seed, batch=args.batch):
                print(" | ".join(row), flush=True)
            shutil.rmtree(folder / f"split-{size}", ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; batch {args.batch}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
