"""``python -m bench.startup``: how long a ``reconciler`` command takes, process start included.

Every cron run and every ``--help`` pays the start-up (importing the program), so it is
measured as a person or a cron job meets it: the console script in a fresh process, wall
clock from spawn to exit. Runs ``reconciler --help``, ``reconciler --version``, and
``reconciler check``, ``audit verify`` and ``rollback`` of a run that does not exist on a demo
deployment (built once by ``reconciler demo`` in a temporary folder, removed at the end; the
last two never open the chunk index) and ``repair --doc`` of one of its documents (through
``bench.first_store``, which also reports the CPU it spent before it first opened a store;
``--repair CONFIG DOC`` adds the same on another deployment, a bench corpus), each
``--runs`` times after one warm-up run, and prints best and median wall and CPU time beside
``python -c pass`` and the targets of issue 13. On a shared machine wall time follows the
load (printed too); CPU time (user + system of the process) does not.

    .venv/bin/python -m bench.startup              # 10 runs each
    .venv/bin/python -m bench.startup --runs 20 --json startup.json
    .venv/bin/python -m bench.startup --repair /tmp/corpus/cli.toml bench:fam000000/v1

To compare with another checkout, run it with ``PYTHONPATH=/path/to/that/tree`` (the console
script then imports that tree's ``reconciler``).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.first_store import MARK

#: The targets (seconds, best of N) from issue 13.
TARGETS = {"--help": 0.3, "check (demo)": 1.5}
#: No single command may take longer than this (seconds).
TIMEOUT = 120


def reconciler_command() -> list[str]:
    """The console script beside this interpreter, else ``python -m reconciler.cli``."""
    script = Path(sys.executable).with_name("reconciler")
    return [str(script)] if script.exists() else [sys.executable, "-m", "reconciler.cli"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(
    argv: list[str], *, cwd: Path, expect: tuple[int, ...]
) -> tuple[float, float, float | None]:
    """(wall, CPU, CPU before the first store) seconds from spawn to exit of one run, which
    must exit with one of ``expect``. CPU (user + system) is what the command costs whatever
    else the machine runs; wall is what a person waits. The third is read from a command run
    through ``bench.first_store`` (else ``None``)."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=TIMEOUT, check=False)
    elapsed = time.perf_counter() - started
    cpu = _children_cpu() - cpu
    if done.returncode not in expect:
        raise SystemExit(
            f"{' '.join(argv)} exited {done.returncode} (expected {expect}):\n"
            + done.stderr.decode(errors="replace")[-2000:]
        )
    before = None
    for line in done.stderr.decode(errors="replace").splitlines():
        if line.startswith(MARK):
            before = float(line[len(MARK) :].split()[0])
    return elapsed, cpu, before


def measure(
    argv: list[str], *, cwd: Path, runs: int, expect: tuple[int, ...]
) -> list[tuple[float, float, float | None]]:
    """One warm-up run (page cache, .pyc files), then ``runs`` timed runs."""
    timed(argv, cwd=cwd, expect=expect)
    return [timed(argv, cwd=cwd, expect=expect) for _ in range(runs)]


def first_doc(config: Path) -> str:
    """A document id of the deployment whose SQLite table is ``reconciler.db`` beside
    ``config`` (the demo's)."""
    with sqlite3.connect(config.parent / "reconciler.db") as db:
        row = db.execute("SELECT doc_id FROM documents ORDER BY doc_id LIMIT 1").fetchone()
    if row is None:
        raise SystemExit(f"no document in the table beside {config}")
    return str(row[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command (10)")
    parser.add_argument("--json", type=Path, help="also write the raw timings to this file")
    parser.add_argument(
        "--repair",
        nargs=2,
        metavar=("CONFIG", "DOC"),
        help="also time `repair --doc DOC` on the deployment of CONFIG (e.g. a bench corpus)",
    )
    args = parser.parse_args(argv)
    command = reconciler_command()
    root = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        timed([*command, "demo", "--dir", str(root / "demo")], cwd=root, expect=(0,))
        config = str(root / "demo" / "reconciler.toml")
        # (the file itself: the commands run outside the checkout, where ``bench`` is not found)
        probe = [sys.executable, str(Path(__file__).with_name("first_store.py"))]
        cases = [
            ("python -c pass", [sys.executable, "-c", "pass"], (0,)),
            ("--help", [*command, "--help"], (0,)),
            ("--version", [*command, "--version"], (0,)),
            # after the demo's apply there is no drift: 0 (2 would still be a fair timing)
            ("check (demo)", [*command, "--config", config, "check"], (0, 2)),
            # the document table alone: the chunk index (qdrant-client) is never opened
            ("audit verify", [*command, "--config", config, "audit", "verify"], (0,)),
            # refused (exit 1) before the index is opened
            ("rollback ?", [*command, "--config", config, "rollback", "feedface"], (1,)),
            # one document repaired (nothing to write after the demo's apply), through
            # bench.first_store: also the CPU it spent before it first opened a store
            (
                "repair --doc",
                [*probe, "--config", config, "repair", "--doc", first_doc(Path(config))],
                (0,),
            ),
        ]
        if args.repair is not None:
            where, doc = args.repair
            cases.append(
                ("repair --doc *", [*probe, "--config", where, "repair", "--doc", doc], (0,))
            )
        results: dict[str, dict[str, list[float]]] = {}
        header = (
            f"{'command':<16} {'runs':>4} {'best (s)':>9} {'median (s)':>11} "
            f"{'best CPU (s)':>13} {'median CPU (s)':>15} {'target (best)':>15} "
            f"{'CPU before 1st store: best, median (s)':>40}"
        )
        print(f"reconciler start-up, process start included ({' '.join(command)})")
        print(f"load average at start: {Path('/proc/loadavg').read_text().split()[0]}")
        print(header)
        print("-" * len(header))
        for name, argv_, expect in cases:
            runs_ = measure(argv_, cwd=root, runs=args.runs, expect=expect)
            wall = [w for w, _, _ in runs_]
            cpu = [c for _, c, _ in runs_]
            before = [b for _, _, b in runs_ if b is not None]
            results[name] = {"wall": wall, "cpu": cpu, "cpu_before_first_store": before}
            first = f"{min(before):.3f}, {statistics.median(before):.3f}" if before else "-"
            target = TARGETS.get(name)
            verdict = ""
            if target is not None:
                verdict = f"< {target:g}" + (" ok" if min(wall) < target else " MISSED")
            print(
                f"{name:<16} {len(wall):>4} {min(wall):>9.3f} {statistics.median(wall):>11.3f} "
                f"{min(cpu):>13.3f} {statistics.median(cpu):>15.3f} {verdict:>15} {first:>40}",
                flush=True,
            )
        if args.json is not None:
            args.json.write_text(json.dumps({"command": command, "seconds": results}, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
