"""The check and the repair against their floors in instructions, not seconds:
``python -m bench.instructions [--size 20000] [--measure check,repair,split]``.

Seconds move with the machine: on a shared 2-core machine the same check at 1M chunks took
8.5 to 10.3 s of CPU within one quiet quarter of an hour, its ratio to the reading scroll
1.29x to 1.53x, so a change of a few per cent cannot be seen in them. Instructions retired
do not move: valgrind's callgrind counts them, and the same code, data and environment give
the same count whatever else the machine is doing. This bench gives the ratios the issue's
goals are stated in, counted that way.

It builds the bench's corpus (``python -m bench.phases build``; or measures one given with
``--corpus``, left as it was found), then runs one Python process under
``valgrind --tool=callgrind`` that opens the stores as ``python -m bench.phases`` does and
counts only what runs inside each measured action (each is called inside
``itertools.takewhile``'s C function, which callgrind is told to collect within and to dump
after), with ``PYTHONHASHSEED=0`` so that the run is the same every time:

- **bare scroll**: the payload-only scroll of the whole collection, no payload read
  (``bench.phases._bare_scroll``), after one untimed reading scroll that warms the shard;
- **reading scroll**: the same scroll taking each point's payload: the check's floor;
- **check**: ``Reconciler.run(Options(mode="check"))`` over the same corpus, after one
  uncounted check (the first in a process also imports numpy and fills the engine's memos:
  the bench's seconds keep the best of three runs, which is never the first);
- with ``--repair-docs N`` (0 to leave out): N superseded documents drifted (uncounted, as
  ``bench.phases drift`` does), then ``apply``, of which only ``Applier.apply`` is counted
  (the repair proper: rows, audit, payload writes), then the **floor**: the same payload writes
  replayed with the engine's own calls (``bench.floors.set_payload_floor``; its timed calls
  only). Apply puts the corpus back as it was;
- with ``--measure split`` (Edge only), on a copy of the corpus: ``split --dry-run`` and
  ``split`` in this process (``split_store``, after one uncounted dry run: the first in a
  process imports), then on another copy the floor, the raw copy-and-delete of the same points
  (``bench.split_floor``: its moves, the points read before, as ``bench.split`` times it),
  and apart its two ends, which the split's moves pay too (the archive made before the first
  copy, both shards flushed and closed after the last delete). The split less its dry run is
  the moves' own count, given over the floor's moves and over the floor with its ends.

It prints one table: each action's instructions, in millions, and its ratio to its floor.
Under callgrind a program runs some 50 times slower: 20,000 chunks take about 3 minutes,
most of it the imports; 100,000 about 10. valgrind comes from Debian's package ``valgrind``
(``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import takewhile
from pathlib import Path
from typing import Any

#: The C function each measured action runs inside (callgrind collects only within it).
MARK = "takewhile_next"
#: The actions counted, in the order the child runs them (the repair's two with repair docs).
CHECK_ACTIONS = ("bare scroll", "reading scroll", "check")
REPAIR_ACTIONS = ("repair proper (apply)", "floor: the same set_payload writes")
SPLIT_ACTIONS = ("split --dry-run", "split", "floor: raw copy-and-delete")
#: The floor's two ends, which the command's moves pay too: the archive made before the first
#: copy, both shards flushed and closed after the last delete (``bench.split_floor``).
SPLIT_ENDS = "floor: the archive made, the writes flushed"
#: What ``--measure`` can count.
MEASURES = ("check", "repair", "split")
#: Each action's floor (the ratio's denominator).
FLOORS = {
    "reading scroll": "bare scroll",
    "check": "reading scroll",
    REPAIR_ACTIONS[0]: REPAIR_ACTIONS[1],
    SPLIT_ACTIONS[1]: SPLIT_ACTIONS[2],
}


def valgrind_missing() -> str | None:
    """Why this bench cannot run here (``None`` when it can)."""
    if shutil.which("valgrind") is None:
        return (
            "valgrind is not installed: this bench counts instructions with its callgrind "
            "tool; install it (Debian/Ubuntu, as root: apt-get install valgrind) and run again"
        )
    return None


# -- the parent: build, run the child under callgrind, read its dumps ------------------------


def callgrind_command(out: Path) -> list[str]:
    """valgrind's arguments: count only inside ``MARK``, one dump each time it returns."""
    return [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        f"--toggle-collect={MARK}",
        f"--dump-after={MARK}",
    ]


def dump_totals(out: Path) -> list[int]:
    """The instructions of each dump callgrind wrote to ``out``.N (N = 1, 2, ...), in order."""
    totals: list[int] = []
    number = 1
    while (dump := out.with_name(f"{out.name}.{number}")).is_file():
        totals.append(_totals(dump))
        number += 1
    return totals


def _totals(dump: Path) -> int:
    with dump.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    raise ValueError(f"{dump} has no totals line: not a callgrind dump")


def counted(labels: list[str], totals: list[int]) -> dict[str, int]:
    """Each label's instructions, its dumps summed (a label is counted once per call)."""
    if len(labels) != len(totals):
        raise RuntimeError(
            f"callgrind wrote {len(totals)} dump(s) for {len(labels)} measured call(s): "
            f"something else in the process called {MARK}; the counts cannot be told apart"
        )
    found: dict[str, int] = {}
    for label, total in zip(labels, totals, strict=True):
        found[label] = found.get(label, 0) + total
    return found


def table(found: dict[str, int], *, chunks: int, repaired: int, moved: int = 0) -> str:
    """The printed table: instructions and each action's ratio to its floor."""
    lines = [
        "action | instructions (M) | a chunk or point | floor | x floor",
        "--- | ---: | ---: | --- | ---:",
    ]
    for label, total in found.items():
        per = {
            **dict.fromkeys(REPAIR_ACTIONS, repaired),
            **dict.fromkeys((*SPLIT_ACTIONS, SPLIT_ENDS), moved),
        }
        floor = FLOORS.get(label)
        ratio = f"**{total / found[floor]:.3f}x**" if floor in found else "-"
        lines.append(
            f"{label} | {total / 1e6:,.1f} | {total / max(per.get(label, chunks), 1):,.0f} | "
            f"{floor or '-'} | {ratio}"
        )
    if "check" in found and "bare scroll" in found:
        ratio = found["check"] / found["bare scroll"]
        lines.append(f"check, over the bare scroll | | | bare scroll | {ratio:.3f}x")
    if all(label in found for label in SPLIT_ACTIONS):
        net = found["split"] - found["split --dry-run"]
        lines.append(
            f"split less its dry run (the moves) | {net / 1e6:,.1f} | {net / max(moved, 1):,.0f} "
            f"| {SPLIT_ACTIONS[2]} | **{net / found[SPLIT_ACTIONS[2]]:.3f}x**"
        )
        if SPLIT_ENDS in found:
            whole = found[SPLIT_ACTIONS[2]] + found[SPLIT_ENDS]
            lines.append(
                f"the floor, its ends included | {whole / 1e6:,.1f} | {whole / max(moved, 1):,.0f} "
                "| - | -"
            )
            lines.append(
                f"split less its dry run, over the floor with its ends | {net / 1e6:,.1f} | "
                f"{net / max(moved, 1):,.0f} | the floor, its ends included | "
                f"**{net / whole:.3f}x**"
            )
    return "\n".join(lines)


def build(root: Path, size: int, engine: str, seed: int) -> None:
    """The bench's corpus at ``root`` (``python -m bench.phases build``)."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench.phases", "build", str(root), str(size)),
            *("--engine", engine, "--seed", str(seed)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the corpus failed:\n{done.stderr.strip()[-2000:]}")


def measure(root: Path, args: argparse.Namespace, work: Path) -> tuple[dict[str, int], dict[str, Any]]:  # fmt: skip
    """Run the child under callgrind: each action's instructions, and the child's counts."""
    out = work / "callgrind.out"
    command = [*callgrind_command(out), sys.executable, "-m", "bench.instructions"]
    command += ["--child", str(root), str(args.size), "--work", str(work)]
    command += ["--engine", args.engine, "--seed", str(args.seed), "--measure", args.measure]
    command += ["--repair-docs", str(args.repair_docs), "--batch", str(args.batch)]
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the measured process failed:\n{done.stderr.strip()[-3000:]}")
    child_said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return counted(child_said["labels"], dump_totals(out)), child_said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--size", type=int, default=20000, help="chunks (default 20000)")
    parser.add_argument(
        "--measure",
        default="check,repair",
        help="what to count, comma-separated: check, repair, split (default check,repair)",
    )
    parser.add_argument(
        "--repair-docs", type=int, default=200, help="repair: documents drifted and repaired"
    )
    parser.add_argument("--batch", type=int, default=1000, help="split: points a move batch")
    parser.add_argument("--engine", choices=("edge", "local"), default="edge")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--corpus", type=Path, help="a corpus built at this size: measure it")
    parser.add_argument("--tmpdir", type=Path, help="where to build (default: the system's)")
    parser.add_argument("--child", nargs=2, metavar=("ROOT", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    wanted = set(args.measure.split(","))
    if wanted - set(MEASURES) or not wanted:
        parser.error(
            f"--measure takes {', '.join(MEASURES)} (comma-separated), not {args.measure!r}"
        )
    if "split" in wanted and args.engine != "edge":
        parser.error("--measure split: Qdrant Edge only (its floor is Edge's own calls)")
    if args.child:
        return child(Path(args.child[0]), int(args.child[1]), args)
    missing = valgrind_missing()
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-instructions-", dir=args.tmpdir) as scratch:
        work = Path(scratch)
        root = args.corpus
        if root is None:
            root = work / "corpus"
            build(root, args.size, args.engine, args.seed)
        found, said = measure(root, args, work)
    from bench.corpus import Layout  # noqa: PLC0415 - after the child's imports are counted

    chunks = Layout(root=root, requested=args.size, seed=args.seed).chunks
    print(f"{chunks:,} chunks on {args.engine}; {said['repaired']:,} points repaired; "
          f"{said['moved']:,} moved; valgrind's callgrind, PYTHONHASHSEED=0")  # fmt: skip
    print(table(found, chunks=chunks, repaired=said["repaired"], moved=said["moved"]))
    return 0


# -- the child: the measured process ---------------------------------------------------------

#: Runs an action counted, under a label (``counting``).
Runner = Callable[[str, Callable[[], Any]], Any]


def counting(labels: list[str]) -> Runner:
    """A runner that calls an action inside ``MARK`` (counted), noting its label."""

    def run(label: str, action: Callable[[], Any]) -> Any:
        result: list[Any] = []
        labels.append(label)
        next(takewhile(lambda _: result.append(action()) and False, [0]), None)
        return result[0]

    return run


@contextmanager
def counted_apply(run: Runner) -> Iterator[None]:
    """``Applier.apply`` counted (the rest of the apply run is not)."""
    from reconciler.writing.applying import Applier  # noqa: PLC0415

    original = Applier.apply

    def apply(applier: Applier, *args: Any, **kwargs: Any) -> Any:
        return run(REPAIR_ACTIONS[0], lambda: original(applier, *args, **kwargs))

    Applier.apply = apply  # type: ignore[method-assign]
    try:
        yield
    finally:
        Applier.apply = original  # type: ignore[method-assign]


def child(root: Path, size: int, args: argparse.Namespace) -> int:
    """Run each action asked for, counted; print the labels counted and the points repaired
    and moved."""
    from bench.corpus import Layout  # noqa: PLC0415

    labels: list[str] = []
    run = counting(labels)
    layout = Layout(root=root, requested=size, seed=args.seed)
    wanted = args.measure.split(",")
    said = {"repaired": 0, "moved": 0}
    if "check" in wanted:
        _check(layout, args.engine, run)
    if "repair" in wanted and args.repair_docs > 0:
        said["repaired"] = _repair(layout, args.engine, args.repair_docs, run)
    if "split" in wanted:
        said["moved"] = _split(layout, args.work, args.batch, run)
    print(json.dumps({"labels": labels, **said}))
    return 0


def _check(layout: Any, engine: str, run: Runner) -> None:
    """The bare scroll, the reading scroll and a check, counted."""
    from bench import phases  # noqa: PLC0415

    stores = phases.Stores(layout, engine=engine)
    try:
        phases._bare_scroll(stores.index, read=True)  # (warm: not counted)
        run("bare scroll", lambda: phases._bare_scroll(stores.index))
        run("reading scroll", lambda: phases._bare_scroll(stores.index, read=True))
        phases._run(stores, "check")  # (warm: numpy's import, the engine's memos; not counted)
        report = run("check", lambda: phases._run(stores, "check"))
        if report.findings:
            raise SystemExit(f"the corpus is not clean: {len(report.findings)} finding(s)")
    finally:
        stores.close()


def _repair(layout: Any, engine: str, docs: int, run: Runner) -> int:
    """Drift ``docs`` documents, then apply's repair proper and its floor, counted; the points
    repaired."""
    from bench import floors, phases  # noqa: PLC0415
    from reconciler.pipeline.values import Guard  # noqa: PLC0415

    phases.drift(layout, docs, engine=engine)
    stores = phases.Stores(layout, engine=engine)
    try:
        guard = Guard(max_changed_fraction=1.0)
        with counted_apply(run), floors.WriteRecorder(stores.index, stores.table) as recorded:
            phases._run(stores, "apply", guard)
        original = floors._timed
        floors._timed = lambda *a: run(REPAIR_ACTIONS[1], lambda: original(*a))
        try:
            floors.set_payload_floor(stores.index, recorded)
        finally:
            floors._timed = original
        stores.reopen_index()
        return recorded.points
    finally:
        stores.close()


def _split(layout: Any, work: Path, batch: int, run: Runner) -> int:
    """On copies of the corpus: ``split --dry-run`` and ``split`` in this process, then the raw
    copy-and-delete floor (``bench.split_floor``), counted; the points moved."""
    from bench import split_floor  # noqa: PLC0415
    from bench.corpus import COLLECTION, Layout  # noqa: PLC0415
    from bench.split import config  # noqa: PLC0415
    from reconciler.app.splitting import split_store  # noqa: PLC0415
    from reconciler.settings import load_settings  # noqa: PLC0415

    copy = work / "split"
    shutil.copytree(layout.root, copy)
    settings = load_settings(str(config(Layout(root=copy, requested=layout.requested), batch)))
    split_store(settings, dry_run=True)  # (warm: the first in a process imports; not counted)
    run(SPLIT_ACTIONS[0], lambda: split_store(settings, dry_run=True))
    moved = int(run(SPLIT_ACTIONS[1], lambda: split_store(settings))["moved"])
    shutil.rmtree(copy)
    floor = split_floor.run(
        layout.root / "edge" / COLLECTION, work / "floor", batch,
        around=lambda moves: run(SPLIT_ACTIONS[2], moves),
        around_ends=lambda end: run(SPLIT_ENDS, end),
    )  # fmt: skip
    shutil.rmtree(work / "floor")
    if floor["moved"] != moved:
        raise SystemExit(f"the floor moved {floor['moved']} point(s), the split {moved}")
    return moved


if __name__ == "__main__":
    raise SystemExit(main())
