"""``python -m bench.instructions`` counts what it says it counts: under a real callgrind, each
measured action's instructions apart, nothing of what runs between them, each call its own
dump; and the bench itself runs end to end on a small corpus and prints its ratios.

Counts are asserted only relative to each other (the same action twice, an action ten times
another's work), never as figures: the bench measures, the tests hold the instrument true.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.instructions import callgrind_command, counted, dump_totals, table

ROOT = Path(__file__).resolve().parents[2]

#: A measured process of its own: two actions counted, ten times their work between them not.
PROGRAM = """
import json
from bench.instructions import counting
labels = []
run = counting(labels)
def work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total
assert run("small", lambda: work(20_000)) == sum(i * i for i in range(20_000))
run("large", lambda: work(200_000))
work(2_000_000)  # (between the actions: not counted)
run("small", lambda: work(20_000))
print(json.dumps(labels))
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")


def test_callgrind_counts_each_action_apart_and_nothing_between(tmp_path: Path) -> None:
    out = tmp_path / "callgrind.out"
    done = subprocess.run(
        [*callgrind_command(out), sys.executable, "-c", PROGRAM],
        capture_output=True, text=True, env=_env(), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    labels = json.loads(done.stdout.strip().splitlines()[-1])
    totals = dump_totals(out)

    assert labels == ["small", "large", "small"]
    assert len(totals) == 3
    first, large, second = totals
    # The same work twice counts the same, though ten times the large action ran between.
    assert abs(first - second) <= 0.02 * first
    # Ten times the loop, about ten times the instructions (the call around it is small).
    assert 7 * first <= large <= 13 * first
    found = counted(labels, totals)
    assert found == {"small": first + second, "large": large}


def test_a_dump_that_is_not_one_call_of_the_bench_is_refused() -> None:
    with pytest.raises(RuntimeError, match="2 dump\\(s\\) for 1 measured call"):
        counted(["check"], [10, 20])


def test_the_bench_runs_on_a_small_corpus_and_prints_its_ratios(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--size", "600", "--repair-docs", "4",
         "--measure", "check,repair,split", "--batch", "64", "--tmpdir", str(tmp_path)],
        capture_output=True, text=True, env=_env(), timeout=900, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    # (600 chunks: 20 families of 3 versions, 10 chunks each; two versions of 3 move)
    assert lines[0].startswith("600 chunks on edge; 40 points repaired; 400 moved")
    rows = {line.split(" | ")[0]: line.split(" | ") for line in lines[3:]}
    assert rows["bare scroll"][-1] == "-"
    assert rows["split --dry-run"][-1] == "-"
    for label in (
        "reading scroll",
        "check",
        "check, over the bare scroll",
        "repair proper (apply)",
        "split",
        "split less its dry run (the moves)",
    ):
        ratio = rows[label][-1].strip("*x")
        assert float(ratio) > 1.0, rows[label]  # (every action does more than its floor)
    for floor in ("floor: the same set_payload writes", "floor: raw copy-and-delete"):
        assert rows[floor][-1] == "-"
    assert list(tmp_path.iterdir()) == []  # (its corpus, copies and dumps removed)


def test_without_valgrind_it_says_what_to_install(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--size", "300"],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        env=dict(_env(), PATH=str(tmp_path)),
    )  # fmt: skip
    assert done.returncode == 2
    assert "apt-get install valgrind" in done.stderr


def test_the_table_sets_each_action_over_its_floor() -> None:
    found = {"bare scroll": 100, "reading scroll": 125, "check": 150}
    printed = table(found, chunks=10, repaired=0)

    assert "reading scroll | 0.0 | 12 | bare scroll | **1.250x**" in printed
    assert "check | 0.0 | 15 | reading scroll | **1.200x**" in printed
    assert printed.endswith("check, over the bare scroll | | | bare scroll | 1.500x")
