"""``python -m bench.freshness``: how long a change in a vault takes to reach what retrieval
serves through ``serve``'s watch, and what the watch costs.

Builds a vault of ``--docs`` families (version 1 current, version 2 a draft; ``--sections``
chunks a document: ``2 x docs x sections`` chunks, half of them served) in a temporary folder,
``reconciler init`` and ``ingest`` it (the hashing embedder, the chosen ``--engine``) and
creates its payload indexes (``reconciler run --check index``, what a deployment's first run
does), then starts the watch in this process (real watchdog
events, the real scoped run, the wall clock) and makes changes, one at a time and then in a
burst: a supersession (version 2 made current, version 1 superseded by it: two files) or a
retirement (one file). For each change, the latency is from the newest file's mtime (the
source's date of the change) to the moment the run that reconciled it had committed: what
``reconciler_staleness_seconds`` observes. After each round the served set is read through
``default_filter()`` (or its Edge form) and must be right. CPU is the process's (every
thread) over the changes, and over ``--idle`` seconds of an idle watch.

    .venv/bin/python -m bench.freshness --docs 5000 --sections 10 --engine edge   # 100k chunks
    .venv/bin/python -m bench.freshness --docs 1000 --engine edge --json f.json

The build is ``reconciler ingest`` itself (the corpus is what a deployment's ingestion
writes, through the product's code), about 0.3 ms of CPU a chunk on Edge, a vault or a git
repository alike (100k chunks: a minute of a quiet core; 1M: about 7 minutes; a loaded
machine stretches it by its load). qdrant-client's local mode (``--engine qdrant``, the
default) commits each point in a transaction of its own to the collection's SQLite file,
whatever the size of the upsert: its build is bound by those commits (4 to 20 ms a chunk of
wall time on this machine's disk, as loaded), so it is measured up to 100k chunks; 1M is for
Edge (docs/benchmarks.md, issue 39's fifth part).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FRONT = "---\nid: {id}\nfamily: f{n}\nversion: {v}\nstatus: {status}\neffective_from: {start}\n{extra}---\n"


def _note(root: Path, n: int, v: int, status: str, sections: int, extra: str = "") -> Path:
    path = root / "vault" / f"f{n}-v{v}.md"
    head = FRONT.format(
        id=f"f{n}-v{v}", n=n, v=v, status=status, start="2024-01-01" if v == 1 else "2025-01-01",
        extra=extra,
    )  # fmt: skip
    body = "".join(
        f"## Section {s}\n\nRule {s} of family {n}, version {v}. " + "Words of the rule. " * 40
        + "\n\n"
        for s in range(sections)
    )  # fmt: skip
    path.write_text(head + f"# Family {n} v{v}\n\n" + body, encoding="utf-8")
    return path


def build(root: Path, docs: int, sections: int, engine: str, source: str = "vault") -> None:
    (root / "vault").mkdir(parents=True)
    for n in range(docs):
        _note(root, n, 1, "current", sections)
        _note(root, n, 2, "draft", sections)
    if source == "git":
        _git(root, "init", "-q", "-b", "main")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "the corpus")
    index = 'path = "qdrant"' if engine == "qdrant" else 'path = "shards"'
    (root / "reconciler.toml").write_text(
        f'[table]\nurl = "sqlite:///reconciler.db"\n[index]\nengine = "{engine}"\n{index}\n'
        f'collection = "corpus"\n[[sources]]\nname = "hb"\ntype = "{source}"\npath = "vault"\n'
        "[guard]\nmax_changed_fraction = 1.0\n[ingest]\nmax_chunk_chars = 1200\n"
        '[watch]\nkeep_open = "10m"\n',
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "reconciler.cli", "--config", str(root / "reconciler.toml")]
    # (then the payload indexes, as a deployment's first run creates them: otherwise the first
    # change's run creates them, about 30 s at 100k chunks on a loaded machine, and its latency
    # is that, not the watch's)
    # (the steps run this checkout's code, as the bench does: a relative PYTHONPATH would
    # resolve in the corpus's folder, to whatever ``reconciler`` the interpreter has installed)
    path = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    )
    env = {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}
    for step in (["init"], ["ingest"], ["run", "--check", "index"]):
        subprocess.run([*command, *step], check=True, capture_output=True, cwd=root, env=env)


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.org",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.org"}  # fmt: skip
    subprocess.run(["git", *args], cwd=root / "vault", check=True, capture_output=True, env=env)


def served(settings: Any, doc_ids: list[str]) -> set[str]:
    """Which of ``doc_ids`` retrieval serves now (through the default filter)."""
    from reconciler.app.wiring import open_index  # noqa: PLC0415
    from reconciler.filters import default_edge_filter, default_filter  # noqa: PLC0415

    index = open_index(settings)
    try:
        found: set[str] = set()
        if settings.index.engine == "edge":
            import qdrant_edge as qe  # noqa: PLC0415

            request = qe.ScrollRequest(limit=10_000_000, filter=default_edge_filter(),
                                       with_payload=True, with_vector=False)  # fmt: skip
            points, _ = index.shard.scroll(request)  # type: ignore[attr-defined]
        else:
            points, _ = index.client.scroll(  # type: ignore[attr-defined]
                index.collection, scroll_filter=default_filter(), limit=10_000_000,  # type: ignore[attr-defined]
                with_payload=["doc_id"], with_vectors=False,
            )  # fmt: skip
        wanted = set(doc_ids)
        for point in points:
            doc = (point.payload or {}).get("doc_id")
            if doc in wanted:
                found.add(doc)
        chunks = len(points)
        return found | ({f"__chunks={chunks}"} if not doc_ids else set())
    finally:
        index.close()


class Timing:
    """When each applied run of the watch committed."""

    def __init__(self) -> None:
        self.applied: list[float] = []
        self.event = threading.Event()

    def __call__(self) -> None:
        self.applied.append(time.time())
        self.event.set()


def change(root: Path, n: int, kind: str, sections: int, git: bool = False) -> float:
    """Make one change; the mtime of its newest file (git: the time the commit was made)."""
    if kind == "retire":
        stamp = _note(root, n, 1, "retired", sections).stat().st_mtime
    else:
        _note(root, n, 1, "superseded", sections, extra=f"superseded_by: f{n}-v2\n")
        stamp = _note(root, n, 2, "current", sections).stat().st_mtime
    if git:
        commit(root, f"change {n}")
        return time.time()
    return stamp


def commit(root: Path, message: str) -> None:
    _git(root, "commit", "-q", "-a", "-m", message)


def wait_for(timing: Timing, count: int, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while len(timing.applied) < count and time.monotonic() < deadline:
        timing.event.wait(0.05)
        timing.event.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000, help="families (2 versions each)")
    parser.add_argument("--sections", type=int, default=5, help="chunks per document")
    parser.add_argument("--engine", choices=("qdrant", "edge"), default="qdrant")
    parser.add_argument("--singles", type=int, default=20, help="changes one at a time")
    parser.add_argument("--burst", type=int, default=100, help="changes at once")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measured")
    parser.add_argument("--source", choices=("vault", "git"), default="vault",
                        help="a vault (filesystem events) or a git repository (commits, polled)")  # fmt: skip
    parser.add_argument("--root", type=Path,
                        help="keep the corpus here (built when absent, reused when present)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("BENCH_LOG", "WARNING"))

    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from reconciler.app.watching import Watch  # noqa: PLC0415
    from reconciler.settings import load_settings  # noqa: PLC0415

    root = args.root or Path(tempfile.mkdtemp(prefix="bench-freshness-"))
    git = args.source == "git"
    try:
        started = time.monotonic()
        if not (root / "reconciler.toml").exists():
            root.mkdir(parents=True, exist_ok=True)
            build(root, args.docs, args.sections, args.engine, args.source)
        # (a kept corpus: the families changed by earlier runs are left alone)
        offset_file = root / "bench-next"
        offset = int(offset_file.read_text()) if offset_file.exists() else 0
        if offset + args.singles + args.burst > args.docs:
            raise SystemExit(f"{root} has {args.docs - offset} unchanged families left")
        offset_file.write_text(str(offset + args.singles + args.burst))
        os.chdir(root)
        settings = load_settings(root / "reconciler.toml")
        chunks = int(next(iter(served(settings, []))).split("=")[1])
        print(f"built {args.docs * 2} documents, {chunks} served chunks of "
              f"{args.docs * 2 * args.sections} in {time.monotonic() - started:.0f}s", flush=True)  # fmt: skip
        timing = Timing()
        watch = Watch(settings, CollectorRegistry())
        watch.after_run = timing
        watch.start()
        # the start's rescan of the vault (a walk of every file), then a quiet moment
        deadline = time.monotonic() + 300
        while getattr(watch.sources[0], "_rescan", False) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)
        cpu0, wall0 = time.process_time(), time.monotonic()
        time.sleep(args.idle)
        idle = (time.process_time() - cpu0) / (time.monotonic() - wall0)
        results: dict[str, Any] = {"docs": args.docs * 2, "chunks": chunks, "engine": args.engine,
                                   "source": args.source, "idle_cpu_fraction": idle}  # fmt: skip
        latencies: list[float] = []
        cpu0 = time.process_time()
        for i in range(args.singles):
            kind = "retire" if i % 2 else "supersede"
            stamp = change(root, offset + i, kind, args.sections, git)
            wait_for(timing, len(timing.applied) + 1)
            latencies.append(timing.applied[-1] - stamp)
            time.sleep(0.5)  # (the next change is a change of its own)
        results["single_cpu_s_per_change"] = (time.process_time() - cpu0) / max(args.singles, 1)
        results["single_p50_s"] = statistics.median(latencies)
        results["single_p99_s"] = _p99(latencies)
        results["single_max_s"] = max(latencies)
        results["single_latencies_s"] = [round(x, 3) for x in latencies]
        first = offset + args.singles
        cpu0 = time.process_time()
        before = len(timing.applied)
        stamps = [change(root, first + i, "retire", args.sections) for i in range(args.burst)]
        if git:  # (the burst is one commit of them all)
            commit(root, "a burst")
            stamps = [time.time()]
        last = max(stamps)
        # every burst change reconciled: the watch's batches applied, the last after the last file
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            wait_for(timing, len(timing.applied) + 1, 5)
            if (
                timing.applied[before:]
                and timing.applied[-1] > last
                and not watch.sources[0].batch.paths
            ):
                break
        results["burst_changes"] = args.burst
        results["burst_runs"] = len(timing.applied) - before
        results["burst_all_in_s"] = timing.applied[-1] - min(stamps)
        results["burst_cpu_s_per_change"] = (time.process_time() - cpu0) / max(args.burst, 1)
        watch.stop()
        singles = range(offset, first)
        retired = [f"hb:f{i}-v1" for i in range(offset, first + args.burst)
                   if (i - offset) % 2 or i >= first]  # fmt: skip
        superseded = [f"hb:f{i}-v1" for i in singles if not (i - offset) % 2]
        successors = [f"hb:f{i}-v2" for i in singles if not (i - offset) % 2]
        now = served(settings, retired + superseded + successors)
        results["served_right"] = now == set(successors)
        print(json.dumps(results, indent=2))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")
        return 0 if results["served_right"] else 1
    finally:
        os.chdir("/")
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


if __name__ == "__main__":
    raise SystemExit(main())
