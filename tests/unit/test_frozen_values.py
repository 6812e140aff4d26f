"""Frozen values stay frozen all the way down: a field of a ``@dataclass(frozen=True)`` holds a
tuple, a frozenset or a read-only ``Mapping`` (mypy refuses a write through it), never a
list, dict or set that its holder could change behind the value. Read from the source, so
every module counts, the stores' included, without importing a driver."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTABLE = re.compile(r"\b(list|dict|set|List|Dict|Set|defaultdict|Counter|MutableMapping)\b")

#: (module, class, field) -> why it may hold a mutable container.
EXEMPT = {
    (
        "reconciler/check_inputs.py",
        "FamilyView",
        "memo",
    ): "a cache of what the checks derive from the "
    "view (no init, compare, repr or hash); its values are read, never changed",
}


def frozen_fields() -> list[tuple[str, str, str, str]]:
    """(module, class, field, annotation) of every field of every frozen dataclass."""
    found = []
    for path in sorted(
        [*(ROOT / "reconciler").rglob("*.py"), *(ROOT / "connectors").rglob("*.py")]
    ):
        module = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or not any(
                isinstance(d, ast.Call)
                and getattr(d.func, "id", getattr(d.func, "attr", None)) == "dataclass"
                and any(
                    k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in d.keywords
                )
                for d in node.decorator_list
            ):
                continue
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    annotation = ast.unparse(item.annotation)
                    if not annotation.startswith("ClassVar"):
                        found.append((module, node.name, item.target.id, annotation))
    return found


def test_there_are_frozen_values_to_check() -> None:
    classes = {(module, cls) for module, cls, _field, _annotation in frozen_fields()}
    assert ("reconciler/planning.py", "Plan") in classes
    assert ("reconciler/pipeline/values.py", "Report") in classes


def test_frozen_values_hold_no_mutable_container() -> None:
    mutable = [
        f"{module} {cls}.{name}: {annotation}"
        for module, cls, name, annotation in frozen_fields()
        if MUTABLE.search(annotation) and (module, cls, name) not in EXEMPT
    ]
    assert mutable == []
