"""Each method of the document table's port is declared once in the SQL adapter: in the
repository that holds its rows. ``SqlDocumentTable`` inherits them; it re-declares none (a
delegating copy is a second place to change, and to get wrong). Read from the source (no
driver imported)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from reconciler.ports import DocumentTable

ROOT = Path(__file__).resolve().parents[2]
#: The SQL adapter: the table and its repositories.
ADAPTER = sorted((ROOT / "reconciler/stores/sql").glob("*.py"))

#: The port's methods (its Protocols' own, inherited ones included).
PORT_METHODS = frozenset(
    name
    for klass in DocumentTable.__mro__
    if klass.__module__.startswith("reconciler.ports")
    for name, value in vars(klass).items()
    if callable(value) and not name.startswith("_")
)


def declarations() -> dict[str, list[str]]:
    """Port method -> the ``module:Class`` of the adapter that define it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in ADAPTER:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in PORT_METHODS:
                    found[item.name].append(f"{path.relative_to(ROOT).as_posix()}:{node.name}")
    return found


def test_every_port_method_is_declared_once_in_a_repository() -> None:
    assert len(PORT_METHODS) > 30  # the finder sees the port
    found = declarations()
    assert {m: w for m, w in found.items() if len(w) != 1} == {}
    assert sorted(PORT_METHODS - set(found)) == []
    table = [m for m, where in found.items() if where[0].endswith(":SqlDocumentTable")]
    assert table == ["close"]  # (the pool the repositories share is the table's to dispose of)
