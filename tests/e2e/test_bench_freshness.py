"""``python -m bench.freshness`` runs end to end at a tiny size and finds the served set right
(its numbers are for docs/benchmarks.md, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_freshness_bench_runs_and_the_served_set_is_right(tmp_path: Path) -> None:
    out = tmp_path / "freshness.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.freshness", "--docs", "12", "--sections", "2",
         "--singles", "2", "--burst", "4", "--idle", "0.5", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["served_right"] is True
    assert results["docs"] == 24
    assert results["burst_changes"] == 4
    assert {"single_p50_s", "single_p99_s", "idle_cpu_fraction"} <= results.keys()
