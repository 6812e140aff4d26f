"""``plan_rollback`` as a pure function, over random histories built as values (no store): one
run, or one and a later run over some of the same documents (a cascade), each writing fresh
values to rows and to some or all of their points, a row changed by hand since or gone, a
declaration made, a split store's moves.

- Applied once, a plan is applied: folded again over the overlay it leaves, it writes nothing.
- It undoes the run: rows not changed since get their values from before the first rolled-back
  run; each point of a document with a row carries that row's payload.
- It is a value: the same inputs give the same plan, and the inputs are left as they were.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from rollback_kit import document

from reconciler.check_inputs import normalize
from reconciler.errors import RollbackRefused
from reconciler.model import (
    AuditEntry,
    AuditKind,
    Document,
    RunStatus,
)
from reconciler.payload import payload_for
from reconciler.writing.differs import managed
from reconciler.writing.rollback_inputs import Overlay, Point, RollbackInputs, RunHistory
from reconciler.writing.rollback_plan import fold, plan_rollback

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)
MAIN, ARCHIVE = "corpus", "corpus_archive"


#: One document of the history: its points, and per run whether the run changed it and which
#: of its points the run wrote (the others: killed first); changed by hand since, gone since.
DOC = st.fixed_dictionaries(
    {
        "points": st.integers(1, 3),
        "runs": st.lists(
            st.tuples(st.booleans(), st.lists(st.booleans(), min_size=3, max_size=3)),
            min_size=2,
            max_size=2,
        ),
        "by_hand": st.booleans(),
        "gone": st.booleans(),
        "moved_back_since": st.booleans(),
    }
)


@dataclass
class World:
    """A history folded by hand, into what ``read_history`` would read."""

    rows: dict[str, Document] = field(default_factory=dict)
    points: dict[str, Point] = field(default_factory=dict)
    entries: dict[str, list[AuditEntry]] = field(default_factory=dict)
    untouched: set[str] = field(default_factory=set)  # changed by hand since, or gone


def build(docs: list[dict[str, Any]], runs: int, split: bool) -> World:
    world = World()
    fresh = (f"v{n}" for n in range(10_000))
    for n, doc in enumerate(docs):
        doc_id = f"h:d{n}"
        world.rows[doc_id] = document(doc_id, "c0")
        for p in range(doc["points"]):
            point = Point(payload_for(world.rows[doc_id]), MAIN if split else None)
            world.points[f"d{n}p{p}"] = point
    for r, run_id in enumerate(("A", "B")[:runs]):
        world.entries[run_id] = []
        for n, doc in enumerate(docs):
            if doc["runs"][r][0]:
                write(world, run_id, n, doc, r, next(fresh), split=split and run_id == "A")
    world.entries["A"].append(
        AuditEntry("A", AT, "cli", "t", AuditKind.DECLARATION, "dec1", None, {"revoked_at": None})
    )
    for n, doc in enumerate(docs):
        since(world, n, doc, runs, next(fresh), split=split)
    return world


def write(
    world: World, run_id: str, n: int, doc: dict[str, Any], r: int, value: str, *, split: bool
) -> None:
    """Run ``run_id`` changes document ``n``'s class to ``value``, writes some of its points
    (and, ``split``, moves them all into the archive), each audited as a run does."""
    doc_id, row = f"h:d{n}", world.rows[f"h:d{n}"]
    after = document(doc_id, value)
    ids = [f"d{n}p{p}" for p in range(doc["points"])]
    world.entries[run_id] += [
        AuditEntry(
            run_id,
            AT,
            "cli",
            "t",
            AuditKind.ROW,
            doc_id,
            {"doc_class": row.doc_class},
            {"doc_class": value},
        ),
        AuditEntry(
            run_id,
            AT,
            "cli",
            "t",
            AuditKind.PAYLOAD,
            doc_id,
            {"points": ids, "payload": payload_for(row)},
            {"payload": payload_for(after)},
        ),
    ]
    world.rows[doc_id] = after
    for pid, wrote in zip(ids, doc["runs"][r][1], strict=False):
        if wrote:
            world.points[pid] = Point(payload_for(after), world.points[pid].where)
    if split:
        world.entries[run_id].append(
            AuditEntry(
                run_id,
                AT,
                "cli",
                "t",
                AuditKind.MOVE,
                doc_id,
                {"points": ids, "from": MAIN},
                {"to": ARCHIVE},
            )
        )
        for pid in ids:
            world.points[pid] = Point(world.points[pid].payload, ARCHIVE)


def since(world: World, n: int, doc: dict[str, Any], runs: int, value: str, *, split: bool) -> None:
    """What happened to document ``n`` after the runs: its row changed by hand or gone (not
    for a document B changed: see the docstring), its points moved back by another run."""
    doc_id = f"h:d{n}"
    if doc["gone"] and not (runs > 1 and doc["runs"][1][0]):
        del world.rows[doc_id]
        world.untouched.add(doc_id)
    elif doc["by_hand"]:
        world.rows[doc_id] = document(doc_id, "hand-" + value)
        world.untouched.add(doc_id)
    for p in range(doc["points"]) if split and doc["moved_back_since"] else ():
        pid = f"d{n}p{p}"
        world.points[pid] = Point(world.points[pid].payload, MAIN)


def inputs_of(world: World, *, cascade: bool, split: bool) -> RollbackInputs:
    touched = {e.target for e in world.entries["A"] if e.target_type != AuditKind.DECLARATION}
    b_touches = any(e.target in touched for e in world.entries.get("B", []))
    runs = {
        "A": RunHistory(
            "A", RunStatus.SUCCEEDED, tuple(world.entries["A"]), ("B",) if b_touches else ()
        ),
    }
    if "B" in world.entries:
        runs["B"] = RunHistory("B", RunStatus.INTERRUPTED, tuple(world.entries["B"]))
    return RollbackInputs(
        run_id="A",
        runs=MappingProxyType(runs),
        rows=MappingProxyType(dict(world.rows)),
        points=MappingProxyType(dict(world.points)),
        declarations=MappingProxyType({"dec1": True}),
        collections=(MAIN, ARCHIVE) if split else None,
        cascade=cascade,
    )


HISTORY = {
    "docs": st.lists(DOC, min_size=1, max_size=3),
    "runs": st.integers(1, 2),
    "split": st.booleans(),
}
ONE_DOC = {"points": 2, "by_hand": False, "gone": False, "moved_back_since": False}


@settings(max_examples=examples(25))
@given(**HISTORY)
@example(
    docs=[{**ONE_DOC, "runs": [(True, [True, False, True]), (True, [True, True, True])]}],
    runs=2,
    split=True,
)
def test_a_plan_applied_once_is_applied_and_undoes_the_run(
    docs: list[dict[str, Any]], runs: int, split: bool
) -> None:
    world = build(docs, runs, split)
    inputs = inputs_of(world, cascade=True, split=split)
    plan, after = fold(inputs, Overlay())
    again, _after = fold(inputs, after)
    assert again.writes_nothing, again
    undone = [s.rolled_back for s in reversed(plan.steps())]  # (oldest first)
    for doc_id, row in inputs.rows.items():
        firsts = [
            e.before["doc_class"]
            for run_id in undone
            for e in inputs.runs[run_id].entries
            if e.target_type == AuditKind.ROW and e.target == doc_id
        ]
        if doc_id not in world.untouched:  # back to before the first undone run that wrote it
            assert after.row(inputs, doc_id) == replace(
                row, doc_class=(firsts or [row.doc_class])[0]
            )
    written = {e.target for run_id in undone for e in inputs.runs[run_id].entries}
    for pid in inputs.points:
        doc_id = "h:" + pid.split("p")[0]
        row = after.row(inputs, doc_id)
        now = after.point(inputs, pid)
        assert now is not None
        if row is not None and doc_id in written:
            assert normalize(managed(now.payload)) == normalize(payload_for(row)), pid
        if split:
            assert now.where == MAIN  # every move back made, or none needed
    assert [s.rolled_back for s in plan.steps()] == [*(["B"] if plan.cascaded else []), "A"]


@settings(max_examples=examples(15))
@given(**HISTORY)
def test_planning_is_a_value(docs: list[dict[str, Any]], runs: int, split: bool) -> None:
    world = build(docs, runs, split)
    inputs = inputs_of(world, cascade=True, split=split)
    kept = copy.deepcopy((dict(inputs.rows), dict(inputs.points), dict(inputs.runs)))
    first = plan_rollback(inputs)
    assert plan_rollback(inputs) == first
    assert (dict(inputs.rows), dict(inputs.points), dict(inputs.runs)) == kept


def test_a_later_run_refuses_the_plan_without_cascade() -> None:
    docs = [{**ONE_DOC, "runs": [(True, [True] * 3), (True, [True] * 3)]}]
    inputs = inputs_of(build(docs, 2, False), cascade=False, split=False)
    with pytest.raises(RollbackRefused, match="B"):
        plan_rollback(inputs)
