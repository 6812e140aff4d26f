"""``python -m bench``: engine throughput beside a bare payload-only scroll, and peak RSS.

For each size N: build a synthetic corpus (SQLite table + qdrant-client local mode) in a
temporary folder, then run each phase in a fresh subprocess and stream one table row as it
completes: the bare scroll, ``check`` with no drift, ``apply`` repairing superseded documents
whose chunks were reset to ``current``, and a ``check`` afterwards that must find nothing.
The temporary folders are removed at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.corpus import CHUNKS_PER_DOC, VERSIONS, Layout

#: No phase may take longer than this (seconds), plus ``PHASE_TIMEOUT_PER_CHUNK`` a chunk of
#: the corpus (building 1M chunks in local mode takes hours); the run stops with an error.
PHASE_TIMEOUT = 600
PHASE_TIMEOUT_PER_CHUNK = 0.02

COLUMNS = (
    "N (chunks)",
    "phase",
    "chunks scanned",
    "wall (s)",
    "CPU (s)",
    "chunks/s (wall)",
    "docs/s (wall)",
    "CPU time vs bare scroll",
    "floor, same run (CPU s)",
    "CPU vs floor",
    "result",
    "peak RSS (MiB)",
    "Δ peak over imports (MiB)",
    "of which store open (MiB)",
    "phase Δ over open (MiB)",
    "Python heap peak of one run (MiB)",
)


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 0
    total = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "cpus": str(cores),
        "memory": total,
        "python": platform.python_version(),
        "qdrant-client": metadata.version("qdrant-client"),
        "sqlalchemy": metadata.version("sqlalchemy"),
        "platform": platform.platform(),
        "load average": load(),
    }


def load() -> str:
    """The 1/5/15-minute load average (other processes compete for the same cores)."""
    try:
        return "/".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "?"


def phase(name: str, layout: Layout, args: argparse.Namespace) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; return its JSON result."""
    command = [
        sys.executable,
        "-m",
        "bench.phases",
        name,
        str(layout.root),
        str(layout.requested),
        f"--dim={layout.dim}",
        f"--seed={layout.seed}",
        f"--repair-docs={args.repair_docs}",
        f"--repeat={args.repeat}",
        f"--engine={args.engine}",
        f"--sample={args.sample}",
        f"--lc-docs={args.lc_docs}",
        f"--lc-changed={args.lc_changed}",
    ]
    if args.profile:
        command.append("--profile")
    env = dict(os.environ, PYTHONHASHSEED="0", HF_HUB_OFFLINE="1")
    launched = time.perf_counter()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=PHASE_TIMEOUT + PHASE_TIMEOUT_PER_CHUNK * layout.chunks,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"phase {name} (N={layout.requested}) failed with exit code {done.returncode}:\n"
            f"{done.stderr.strip()}"
        )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    #: The whole phase as a command costs it: process start, imports, opening the stores.
    result["process_wall"] = time.perf_counter() - launched
    return result


def _int(value: float) -> str:
    return f"{value:,.0f}"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def row(
    layout: Layout,
    name: str,
    result: Mapping[str, Any],
    scroll: Mapping[str, Any] | None,
    drift: Mapping[str, Any] | None = None,
    *,
    engine: str = "local",
    family_run: Mapping[str, Any] | None = None,
) -> list[str]:
    """One table row; ``scroll`` and ``drift`` are the results of those phases at this size,
    ``family_run`` the ``repair-all`` phase's (the command's row takes its floor).

    ``floor`` is the raw engine work the row's figure is set beside, measured in the same
    run: the bare scroll for itself; the scroll that also reads each payload for a check; the
    engine's own ``set_payload`` of the same points in the same operations for a repair
    (whose figure is the repair proper's CPU)."""
    seconds = float(result["seconds"])
    cpu = float(result["cpu_seconds"])
    scanned = int(result.get("chunks", result.get("points", 0)))
    docs_per_s = versus = "-"
    floor_cpu, floor_of = None, cpu  # (the floor's CPU seconds, and the figure set beside it)
    if name == "build":
        label = "build (setup)"
        text = f"{result['rows']:,} rows, {result['points']:,} points written"
    elif name == "drift":
        label = "drift (setup)"
        text = f"{result['docs']:,} superseded docs / {result['points']:,} points reset to current"
        floor_cpu = cpu
    elif name == "scroll":
        label = "bare scroll"
        text = f"best of {result['runs']}; floor: itself"
        versus = "1.00x"
        floor_cpu = cpu
    elif name == "repair":
        label = "repair --doc (on demand)"
        docs = int(result["repaired_docs"])
        docs_per_s = _int(docs / seconds) if seconds else "-"
        proper = float(result["repair_seconds"])
        text = (
            f"{docs} documents, one `repair --doc` run each (sample): "
            f"{seconds / max(docs, 1) * 1e3:.0f} ms wall a document; {result['points_written']:,} "
            f"points; repair proper {proper:.2f} s wall, {result['repair_cpu_seconds']:.2f} s CPU"
        )
        floor_cpu, floor_of = result.get("floor_cpu_seconds"), float(result["repair_cpu_seconds"])
        text += _set_payload_floor(result, engine)
    elif name == "repair-all":
        label = "repair --family F1 --family F2 ... (one run)"
        docs = int(result["repaired_docs"])
        process = float(result["process_wall"])
        docs_per_s = _int(docs / process) if process else "-"
        proper = float(result["repair_seconds"])
        text = (
            f"{docs:,} documents of {result['families']:,} families in one scoped run: "
            f"{process:.2f} s end to end with process start ({seconds:.2f} s the run, "
            f"repair proper {proper:.2f} s wall); {result['points_written']:,} points, "
            f"{process / max(int(result['points_written']), 1) * 1e6:,.0f} µs a chunk end to end"
        )
        floor_cpu, floor_of = result.get("floor_cpu_seconds"), float(result["repair_cpu_seconds"])
        text += _set_payload_floor(result, engine)
    elif name == "repair-cli":
        label = "reconciler repair --family F1 ... (the command)"
        points = int(result["points_written"])
        docs_per_s = "-"
        text = (
            f"{result['families']:,} families, the console command timed from spawn to exit: "
            f"{seconds:.2f} s wall, {cpu:.2f} s CPU; {points:,} points written, "
            f"{seconds / max(points, 1) * 1e6:,.0f} µs a chunk end to end; peak RSS the command's"
        )
        if family_run is not None and family_run.get("floor_cpu_seconds") is not None:
            floor_cpu = float(family_run["floor_cpu_seconds"])
            text += (
                "; floor: the raw set_payload of the same points measured by the "
                "'repair --family ... (one run)' row (the command is a process of its own)"
            )
    elif name == "embed":
        label = "re-embed (all-MiniLM-L6-v2, CPU)"
        chunks = int(result["chunks"])
        text = (
            f"{chunks:,} chunks of ~{result['chars_per_chunk']} chars timed: "
            f"{seconds / chunks * 1e3:.1f} ms wall, {cpu / chunks * 1e3:.1f} ms CPU a chunk "
            f"({result['threads']} torch threads)"
        )
        if drift is not None:
            n = int(drift["points"])
            text += f"; extrapolated to the {n:,} repaired chunks: {seconds / chunks * n:,.0f} s"
    elif name == "langchain":
        label = "LangChain index() re-run"
        changed = int(result["changed_docs"])
        docs_per_s = _int(changed / seconds) if seconds else "-"
        text = (
            f"{result['docs']:,} docs, metadata changed on {changed}: "
            f"{seconds / max(changed, 1) * 1e3:.0f} ms wall a changed document; "
            f"second run {result['second']}"
        )
    elif name == "apply":
        label = "apply"
        docs = int(result["repaired_docs"])
        docs_per_s = _int(docs / seconds) if seconds else "-"
        text = (
            f"{'REFUSED ' if result['refused'] else ''}repaired {docs:,} docs: "
            f"{result['points_written']:,} points in {result['payload_operations']:,} "
            f"set_payload operations, {result['rows_written']:,} rows; "
            f"{result['findings']:,} findings"
        )
        proper = float(result["repair_seconds"])
        points = max(int(result["points_written"]), 1)
        text += (
            f"; repair proper (table, audit, payload writes) {proper:.2f} s wall, "
            f"{result['repair_cpu_seconds']:.2f} s CPU, {proper / points * 1e6:.0f} µs wall "
            "a chunk"
        )
        floor_cpu, floor_of = result.get("floor_cpu_seconds"), float(result["repair_cpu_seconds"])
        text += _set_payload_floor(result, engine)
        if result.get("upsert_cpu_seconds") is not None:
            upserted = max(int(result["upsert_points"]), 1)
            upsert_cpu = float(result["upsert_cpu_seconds"])
            text += (
                f"; re-ingest floor, the same {upserted:,} points upserted whole (vector and "
                f"payload; the embedding not included): {result['upsert_seconds']:.2f} s wall, "
                f"{upsert_cpu:.2f} s CPU = {upsert_cpu / upserted * 1e6:.0f} µs CPU a point, "
                f"{upsert_cpu / max(float(result['repair_cpu_seconds']), 1e-9):.2f}x the repair "
                "proper's CPU"
            )
        if scroll is not None:
            versus = f"{cpu / scroll['cpu_seconds']:.2f}x"
    else:
        label = "check (no drift)" if name == "check" else "check after apply"
        findings = int(result["findings"])
        text = f"{findings:,} findings"
        if name == "verify":
            text += " (zero drift ✓)" if findings == 0 else " ✗ DRIFT LEFT"
        versus = f"{cpu / result['scroll_cpu_seconds']:.2f}x"
        floor_cpu = result.get("read_scroll_cpu_seconds")
        overhead = (cpu - result["scroll_cpu_seconds"]) / max(scanned, 1) * 1e6
        text += f"; engine overhead {overhead:.1f} µs CPU/chunk"
        if result.get("read_scroll_cpu_seconds"):
            text += (
                f"; {cpu / result['read_scroll_cpu_seconds']:.2f}x CPU (wall "
                f"{seconds / result['read_scroll_seconds']:.2f}x) a bare scroll that also takes "
                f"each point's payload ({result['read_scroll_cpu_seconds']:.2f} s CPU)"
            )
        paired = result.get("paired_cpu_ratios")
        if paired:
            shown = ", ".join(f"{ratio:.2f}" for ratio in paired)
            text += (
                f"; paired, each check over the bare scrolls just before and after it: median "
                f"{statistics.median(paired):.2f}x CPU ({shown})"
            )
        if result.get("scroll_heap_peak") is not None and result.get("heap_peak") is not None:
            own = (result["heap_peak"] - result["scroll_heap_peak"]) * 1024 * 1024
            text += (
                f"; engine heap peak {own / 1024 / 1024:.1f} MiB over the scroll's = "
                f"{own / max(int(result['documents']), 1):.0f} B/document"
            )
        text += (
            f"; best of {result['runs']}, each after a bare scroll "
            f"({result['scroll_cpu_seconds']:.2f} s CPU; wall ratio "
            f"{seconds / result['scroll_seconds']:.2f}x)"
        )
    opened = result.get("rss_opened")
    store = None if opened is None else opened - result["rss_imports"]
    own = None
    if opened is not None and result.get("peak_reset"):
        own = result["peak_phase"] - opened
    return [
        _int(layout.chunks),
        label,
        _int(scanned),
        f"{seconds:.2f}",
        f"{cpu:.2f}",
        _int(scanned / seconds) if seconds else "-",
        docs_per_s,
        versus,
        "-" if floor_cpu is None else f"{floor_cpu:.3f}",
        "-" if not floor_cpu else f"{floor_of / floor_cpu:.2f}x",
        text,
        _mib(result["peak"]),
        "-" if result.get("command") else _mib(result["peak"] - result["rss_imports"]),
        _mib(store),
        _mib(own),
        "-" if result.get("heap_peak") is None else f"{result['heap_peak']:.1f}",
    ]


def _set_payload_floor(result: Mapping[str, Any], engine: str) -> str:
    """The text of a repair row's floor: its writes replayed with the engine's own calls."""
    if result.get("floor_cpu_seconds") is None:
        return ""
    points = max(int(result["floor_points"]), 1)
    floor_cpu = float(result["floor_cpu_seconds"])
    proper = float(result["repair_cpu_seconds"])
    call = "shard.update(set_payload)" if engine == "edge" else "client.batch_update_points"
    # (Edge: replayed on the points given back their values before, the shard loaded again)
    fresh = ", the same changes on the shard loaded again" if engine == "edge" else ""
    return (
        f"; floor: the same {points:,} points' writes replayed raw ({call}, "
        f"{result['floor_operations']:,} operations in {result['floor_calls']:,} calls, as the "
        f"repair sent them{fresh}): {result['floor_seconds']:.2f} s wall, {floor_cpu:.2f} s CPU = "
        f"{floor_cpu / points * 1e6:.0f} µs CPU a chunk against the repair proper's "
        f"{proper / points * 1e6:.0f} µs{_built(result, points)}"
    )


def _built(result: Mapping[str, Any], points: int) -> str:
    """What making Edge's operations cost, which the floor leaves off its clock."""
    built = result.get("floor_build_cpu_seconds")
    if not built:
        return ""
    return (
        f" (making those operations from the ids and payloads, {built / points * 1e6:.1f} µs a "
        "chunk, is off the floor's clock: the repair pays it inside its writes)"
    )


def emit(cells: list[str]) -> None:
    """Print one markdown table row now (rows stream as phases complete)."""
    print("| " + " | ".join(cells) + " |", flush=True)


def parse_sizes(text: str) -> list[int]:
    """``10000,20000`` -> [10000, 20000]."""
    sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--sizes takes positive integers, got {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    """Build, measure, print, clean up."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Throughput and peak RSS of the reconciliation engine beside a bare "
        "payload-only scroll (qdrant-client local mode, SQLite, no system of record).",
    )
    parser.add_argument(
        "--sizes", type=parse_sizes, default=[10_000], help="chunk counts (default 10000)"
    )
    parser.add_argument(
        "--repair-docs",
        type=int,
        default=1000,
        help="superseded documents to drift and repair (capped at how many exist)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="runs of the scroll and of each check (interleaved); best time kept",
    )
    parser.add_argument("--dim", type=int, default=16, help="vector size of the points")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--profile", action="store_true", help="print a cProfile of scroll and check afterwards"
    )
    parser.add_argument(
        "--engine",
        choices=("local", "edge"),
        default="local",
        help='index engine: qdrant-client local mode, or Qdrant Edge ([index] engine = "edge")',
    )
    parser.add_argument(
        "--embed",
        action="store_true",
        help="also time re-embedding with all-MiniLM-L6-v2 on the CPU (needs the bench extra)",
    )
    parser.add_argument("--sample", type=int, default=2000, help="chunks the --embed phase times")
    parser.add_argument(
        "--langchain",
        action="store_true",
        help="also time LangChain index() after the metadata change (needs the bench extra)",
    )
    parser.add_argument("--lc-docs", type=int, default=300, help="documents for --langchain")
    parser.add_argument(
        "--lc-changed", type=int, default=100, help="documents whose metadata --langchain changes"
    )
    parser.add_argument("--json", type=Path, help="also write the raw results to this file")
    parser.add_argument(
        "--tmpdir", type=Path, help="where to build the corpora (default: the system temp dir)"
    )
    args = parser.parse_args(argv)
    if args.engine == "edge":
        from bench.phases import edge_missing  # noqa: PLC0415

        missing = edge_missing()
        if missing is not None:
            print(f"python -m bench: {missing}", file=sys.stderr)
            return 2

    info = machine()
    print("corpus-reconciler benchmark: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    print(
        f"corpus: {CHUNKS_PER_DOC} chunks per document, {VERSIONS} versions per family "
        f"(1-2 superseded, 3 current), SQLite table + engine {args.engine} "
        "(local: qdrant-client local mode), "
        f"vectors dim {args.dim}\n",
        flush=True,
    )
    emit(list(COLUMNS))
    emit(["---"] * len(COLUMNS))
    started = time.perf_counter()
    results: list[dict[str, Any]] = []
    profiles: list[tuple[int, str, str]] = []
    loads: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="reconciler-bench-", dir=args.tmpdir))
    try:
        for size in args.sizes:
            layout = Layout(root=workdir / f"n{size}", requested=size, dim=args.dim, seed=args.seed)
            seen: dict[str, dict[str, Any]] = {}
            names = ["build", "scroll", "check", "drift", "apply", "verify", "drift", "repair"]
            names += ["drift", "repair-all", "drift", "repair-cli"]
            names += ["embed"] if args.embed else []
            names += ["langchain"] if args.langchain else []
            for name in names:
                result = phase(name, layout, args)
                result["size"] = layout.chunks
                results.append(result)
                if result.get("profile"):
                    profiles.append((layout.chunks, name, result.pop("profile")))
                first_drift = seen.get("drift")
                seen[name] = result
                if name == "drift" and first_drift is not None:
                    seen["drift"] = first_drift  # the re-drift before repair is setup only
                    continue
                emit(
                    row(
                        layout,
                        name,
                        result,
                        seen.get("scroll"),
                        seen.get("drift"),
                        engine=args.engine,
                        family_run=seen.get("repair-all"),
                    )
                )
            shutil.rmtree(layout.root, ignore_errors=True)
            loads.append(f"after N={layout.chunks:,}: {load()}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    skipped = [
        flag
        for flag, wanted in (
            ("--embed (re-embedding)", args.embed),
            ("--langchain", args.langchain),
        )
        if not wanted
    ]
    notes = [
        *(
            [f"not run (opt-in, need the bench extra and torch): {', '.join(skipped)}"]
            if skipped
            else []
        ),
        f"{len(args.sizes)} size(s) in {time.perf_counter() - started:.0f} s; load average "
        + "; ".join(loads),
        "no system of record is configured, so the engine ran only the checks that need no "
        "source: payload, siblings, dates, ttl, index (ttl has no source to time out; index "
        "reports nothing in local mode, which keeps no payload indexes)",
        "times are the best of the runs; 'CPU time vs bare scroll' compares process CPU "
        "seconds (other processes on the same cores stretch wall time, not CPU time): check "
        "rows against a bare scroll interleaved with them in the same process, apply against "
        "the 'bare scroll' row; the check rows also give each run's CPU time over the mean of "
        "the bare scrolls just before and after it ('paired'), which a machine whose speed "
        "drifts over minutes moves less than the best-of ratio",
        "'floor' is raw engine work measured in the same run and 'CPU vs floor' the row's CPU "
        "over it: a check against the bare scroll that also reads each point's payload (the "
        "yardstick); apply, repair --doc and repair --family against the engine's own "
        "set_payload of the same points in the same operations (the repair's writes recorded, "
        "turned into the engine's requests untimed, replayed: Edge's shard.update, on the "
        "points given back their values before and the shard loaded again and scrolled, as "
        "the repair found them; local mode's batch_update_points), the figure being the repair proper's CPU; the command "
        "row against the repair --family row's floor, its figure the whole command's CPU; "
        "apply also states the re-ingest floor: the same points upserted whole",
        "apply repairs min(--repair-docs, superseded docs) documents; it scans the collection "
        "once (the check) and writes by the point ids that scan kept; 'repair proper' is the "
        "applier alone (row, audit and payload writes); local mode persists every point in its "
        "own SQLite commit: the 'drift (setup)' row is the raw client set_payload of the same "
        "points, the floor for apply",
        f"repair --doc: the same documents drifted again, then the first {20} repaired one "
        "scoped run each (each selects its family's points through the doc_id filter: a "
        "payload-index lookup on a server, a pass over every point in local mode)",
        "every phase ran in a fresh process; 'Δ peak over imports' is its peak RSS minus its "
        "RSS after imports; 'store open' is what opening the stores added (local mode loads "
        "the whole collection into memory); 'phase Δ over open' is the peak of the phase "
        "proper above that (VmHWM reset after opening); 'Python heap peak' is tracemalloc's "
        "peak over one more untimed run of the phase (objects it allocated and held at once)",
    ]
    print("\nNotes:\n" + "\n".join(f"- {note}." for note in notes))
    for size, name, text in profiles:
        print(f"\n## cProfile of {name} at N={size:,}\n\n```\n{text.rstrip()}\n```")
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": info, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
