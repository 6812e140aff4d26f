"""``python -m bench.declare_same A B``: whether two runs of ``reconciler declare FILE`` on
copies of the same corpus did the same thing, for a change meant to make ``declare`` faster
and nothing else (``docs/benchmarks.md``, issue 36).

``A`` and ``B`` are the runs' folders (a copy of a corpus ``bench.declare.build`` made, after
``declare reviewed.yaml --format json > out.json`` ran in it). Compared, with run ids,
declaration ids and the run's own instants masked: the command's JSON (``out.json``); the
table's audit entries (actor, reason, target, before and after, in ``seq`` order), findings,
declarations and document rows. Each run is also held to one run id throughout: the run the
runs table records is the report's, each declaration's and each audit entry's.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

_MASKS = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "RUN"),
    (re.compile(r"d-[0-9a-f]{12}"), "DECL"),
    # (the run's instants: the corpus's own dates are in 2020-2021)
    (re.compile(r"20(2[3-9]|[3-9][0-9])-\d\d-\d\d[T ][\d:.]+(Z|\+00:00)?"), "NOW"),
)
#: table -> (columns compared, their order: a declaration's id is random, so by what it says)
_TABLES = {
    "audit_log": ("actor, reason, target_type, target, before, after", "seq"),
    "findings": (
        '"check", kind, severity, family, doc_id, expected, actual, action, outstanding',
        "id",
    ),
    "declarations": (
        "kind, doc_id, target, declared_by, reason, evidence, score, proposal",
        "doc_id, kind, target",
    ),
    "documents": (
        "doc_id, doc_family_id, doc_version, version_state, effective_from, effective_to, "
        "superseded_by, source_hash",
        "doc_id",
    ),
}


def masked(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    for pattern, mask in _MASKS:
        value = pattern.sub(mask, value)
    return value


def tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(db) as conn:
        return {
            name: [
                tuple(masked(v) for v in row)
                for row in conn.execute(f"SELECT {columns} FROM {name} ORDER BY {order}")
            ]
            for name, (columns, order) in _TABLES.items()
        }


def one_run(folder: Path) -> list[str]:
    """Problems with the run ids of one run (none when it is one run throughout)."""
    out = json.loads((folder / "out.json").read_text())
    with sqlite3.connect(folder / "reconciler.db") as conn:
        runs = [r[0] for r in conn.execute("SELECT run_id FROM runs")]
        held = {
            "declarations": {r[0] for r in conn.execute("SELECT run_id FROM declarations")},
            "audit_log": {r[0] for r in conn.execute("SELECT DISTINCT run_id FROM audit_log")},
        }
    held["the JSON's declarations"] = {d.get("run_id") for d in out.get("declarations", [])}
    held["the JSON's run"] = {out.get("run_id")}
    if len(runs) != 1:
        return [f"{folder}: {len(runs)} runs recorded, not one"]
    return [f"{folder}: {what} name {ids}" for what, ids in held.items() if ids != {runs[0]}]


def main(a: Path, b: Path) -> int:
    problems = one_run(a) + one_run(b)
    text = [masked((folder / "out.json").read_text()) for folder in (a, b)]
    print("out.json", len(text[0]), len(text[1]), "same" if text[0] == text[1] else "DIFFERENT")
    if text[0] != text[1]:
        problems.append("the JSON differs")
    ta, tb = tables(a / "reconciler.db"), tables(b / "reconciler.db")
    for name in _TABLES:
        same = ta[name] == tb[name]
        print(name, len(ta[name]), len(tb[name]), "same" if same else "DIFFERENT")
        if not same:
            problems.append(f"{name} differs")
    print("\n".join(problems) or "the same")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
