"""The database engine behind the document table stays behind it: only the stores (the lease
adapters among them, ``stores/sql/lease.py``) and the composition root (``app/wiring.py``, which makes the
``LeaseFactory`` a command is handed) read ``table.engine``. A command that needs a lease
asks the factory for one by name (``reconciler.ports.lease``). Read from the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Modules that may hold a table's SQLAlchemy engine.
MAY_HOLD = ("reconciler/stores/", "reconciler/app/wiring.py")


def engine_reads(source: str) -> list[int]:
    """Lines reading ``<...>table.engine`` (``table.engine``, ``opened.table.engine``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "engine":
            held = node.value
            name = held.id if isinstance(held, ast.Name) else getattr(held, "attr", "")
            if name == "table" or name.endswith("_table"):
                lines.append(node.lineno)
    return lines


def test_the_finder_sees_each_way_of_reaching_the_engine() -> None:
    assert engine_reads("make_lease(table.engine, name)") == [1]
    assert engine_reads("x = opened.table.engine.url") == [1]
    assert engine_reads("self.doc_table.engine") == [1]
    assert engine_reads("settings.index.engine; args.engine; leases(name)") == []


def test_only_the_stores_the_lease_and_the_wiring_read_the_table_s_engine() -> None:
    found = {}
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module.startswith(MAY_HOLD):
            continue
        lines = engine_reads(path.read_text(encoding="utf-8"))
        if lines:
            found[module] = lines
    assert found == {}, "take a lease from the LeaseFactory the wiring hands out"
