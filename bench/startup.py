"""``python -m bench.startup``: how long a ``reconciler`` command takes, process start included.

Every cron run and every ``--help`` pays the start-up (importing the program), so it is
measured as a person or a cron job meets it: the console script in a fresh process, wall
clock from spawn to exit. Runs ``reconciler --help``, ``reconciler --version``, and
``reconciler check``, ``audit verify`` and ``rollback`` of a run that does not exist on a demo
deployment (built once by ``reconciler demo`` in a temporary folder, removed at the end; the
last two never open the chunk index), each ``--runs`` times after one warm-up run, and prints
best and median wall and CPU time beside ``python -c pass`` and the targets of issue 13. On a shared
machine wall time follows the load (printed too); CPU time (user + system of the process)
does not.

    .venv/bin/python -m bench.startup              # 10 runs each
    .venv/bin/python -m bench.startup --runs 20 --json startup.json

To compare with another checkout, run it with ``PYTHONPATH=/path/to/that/tree`` (the console
script then imports that tree's ``reconciler``).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def timed(argv: list[str], *, cwd: Path, expect: tuple[int, ...]) -> tuple[float, float]:
    """(wall, CPU) seconds from spawn to exit of one run, which must exit with one of
    ``expect``. CPU (user + system) is what the command costs whatever else the machine
    runs; wall is what a person waits."""
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
    return elapsed, cpu


def measure(
    argv: list[str], *, cwd: Path, runs: int, expect: tuple[int, ...]
) -> list[tuple[float, float]]:
    """One warm-up run (page cache, .pyc files), then ``runs`` timed runs."""
    timed(argv, cwd=cwd, expect=expect)
    return [timed(argv, cwd=cwd, expect=expect) for _ in range(runs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command (10)")
    parser.add_argument("--json", type=Path, help="also write the raw timings to this file")
    args = parser.parse_args(argv)
    command = reconciler_command()
    root = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        timed([*command, "demo", "--dir", str(root / "demo")], cwd=root, expect=(0,))
        config = str(root / "demo" / "reconciler.toml")
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
        ]
        results: dict[str, dict[str, list[float]]] = {}
        header = (
            f"{'command':<16} {'runs':>4} {'best (s)':>9} {'median (s)':>11} "
            f"{'best CPU (s)':>13} {'median CPU (s)':>15} {'target (best)':>15}"
        )
        print(f"reconciler start-up, process start included ({' '.join(command)})")
        print(f"load average at start: {Path('/proc/loadavg').read_text().split()[0]}")
        print(header)
        print("-" * len(header))
        for name, argv_, expect in cases:
            runs_ = measure(argv_, cwd=root, runs=args.runs, expect=expect)
            wall = [w for w, _ in runs_]
            cpu = [c for _, c in runs_]
            results[name] = {"wall": wall, "cpu": cpu}
            target = TARGETS.get(name)
            verdict = ""
            if target is not None:
                verdict = f"< {target:g}" + (" ok" if min(wall) < target else " MISSED")
            print(
                f"{name:<16} {len(wall):>4} {min(wall):>9.3f} {statistics.median(wall):>11.3f} "
                f"{min(cpu):>13.3f} {statistics.median(cpu):>15.3f} {verdict:>15}",
                flush=True,
            )
        if args.json is not None:
            args.json.write_text(json.dumps({"command": command, "seconds": results}, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
