"""The registry names every part of every check, and the pipeline names no check: each
registered part is a function of its check's module, each planner one of ``planning``, and no
module of ``reconciler/pipeline/`` spells a check's name (it runs what the registry says)."""

from __future__ import annotations

import ast
from pathlib import Path

from reconciler import planning
from reconciler.checks import CHECKS, MOVING_CHECKS, REGISTRY, SOURCE_CHECKS, parts

PIPELINE = Path(__file__).resolve().parents[2] / "reconciler" / "pipeline"


def test_every_registered_part_resolves_to_a_function() -> None:
    found = parts()
    assert list(found) == list(CHECKS)
    for check in REGISTRY:
        part = found[check.name]
        assert (part.family is not None) == (check.per_family or bool(check.consequence))
        assert (part.truth is not None) == check.declares
        assert (part.collection is not None) == check.over_collection
        assert (part.sources is not None) == check.over_sources
        if check.plans is not None:
            assert callable(getattr(planning, check.plans)), check.plans


def test_the_kinds_of_each_check_today() -> None:
    """What the run does differently for a check, it reads here."""
    assert {"family", "hash"} == SOURCE_CHECKS
    assert {"family"} == MOVING_CHECKS
    wide = {c.name: (c.over_collection, c.over_sources, c.plans) for c in REGISTRY}
    assert wide["payload"] == (True, False, "plan_orphans")
    assert wide["index"] == (True, False, "plan_indexes")
    assert wide["family"] == (False, True, None)  # source_yield and unregistered problems
    assert wide["hash"] == (False, True, None)
    consequence = sorted((c.consequence, c.name) for c in REGISTRY if c.consequence)
    assert consequence == [(1, "dates"), (2, "siblings")]


def _compared(tree: ast.AST) -> list[ast.Constant]:
    """The string constants a module compares with or looks up by (``name in checks``,
    ``x == name``, ``summary[name]``): where a stage would branch on a check."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Subscript):
            operands = [node.slice]
        else:
            continue
        for operand in operands:
            found += [c for c in ast.walk(operand) if isinstance(c, ast.Constant)]
    return found


def test_the_pipeline_names_no_check() -> None:
    named: list[str] = []
    for path in sorted(PIPELINE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named += [
            f"{path.name}:{node.lineno}: {node.value!r}"
            for node in _compared(tree)
            if node.value in CHECKS
        ]
        named += [
            f"{path.name}: imports {node.module}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module is not None
            and node.module.startswith("reconciler.checks.")
        ]
    assert named == []


def test_the_pipeline_test_sees_a_branch_on_a_check() -> None:
    """(the test above would fail on the branches the pipeline had)"""
    branching = 'if "family" in options.checks:\n    pass\nsummary["index"]["checked"] = 6\n'
    assert sorted(c.value for c in _compared(ast.parse(branching))) == [
        "checked",
        "family",
        "index",
    ]
