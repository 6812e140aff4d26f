"""The checks: pure functions over per-family views, one module each, findings out.

Each compares two of the three stores (docs/engine.md). They import no driver; they are tested
with plain values.

``REGISTRY`` is the one list of checks: a check is its module here and one line there, the line
naming its parts. A check ``reconciler/checks/<name>.py`` defines, for each part it registers:

- per family (the default): ``check_<name>(view, ctx) -> findings``, run on every family;
- ``consequence``: the same function, run again on a family as its plan leaves it (a repair
  can leave an older version live beside the one it sets back to current);
- ``declares``: ``truth_<name>(view, ctx) -> rows``, the family's rows as declared, which its
  plan writes towards; documents move between families as the sources place them;
- ``over_collection``: ``collection_<name>(CollectionView) -> Wide``, once a run;
- ``over_sources``: ``sources_<name>(SourcesView) -> Wide``, once a run of the whole shard;
- ``plans``: the function of ``reconciler.planning`` that plans the repair of what its
  collection or sources part found (``(findings, CollectionView) -> Plan``).

The CLI's ``--check``, the options' validation, the run and its report all take their names
from this list, and the pipeline runs the parts it names (``tests/integration/
test_check_registry.py`` adds a check of each kind to a copy of the code). The names are read
without importing the check modules: those load when a run first asks for them (``parts``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.check_inputs import (
        CheckContext,
        CollectionView,
        FamilyView,
        SourcesView,
        Wide,
    )
    from reconciler.model import Document, Finding


@dataclass(frozen=True)
class Registered:
    """One check of the registry, and the parts it has (the module docstring says what each
    part is and the function that is it).

    ``reads_sources``: it needs the systems of record read (a run of only other checks reads
    none). ``consequence``: its place in the round that checks a family again as its plan
    leaves it (``0``: not in that round; dates before siblings: the time rule settles dates).
    """

    name: str
    reads_sources: bool = False
    per_family: bool = True
    consequence: int = 0
    declares: bool = False
    over_collection: bool = False
    over_sources: bool = False
    plans: str | None = None


#: Every check, in the order they run and report.
REGISTRY: tuple[Registered, ...] = (
    Registered("family", reads_sources=True, declares=True, over_sources=True),
    Registered("hash", reads_sources=True, over_sources=True),
    Registered("siblings", consequence=2),
    Registered("ttl"),
    Registered("payload", over_collection=True, plans="plan_orphans"),
    Registered("dates", consequence=1),
    Registered("index", per_family=False, over_collection=True, plans="plan_indexes"),
)

#: Every check's name, in the order they run and report.
CHECKS: tuple[str, ...] = tuple(check.name for check in REGISTRY)
#: Checks that need the systems of record read.
SOURCE_CHECKS = frozenset(check.name for check in REGISTRY if check.reads_sources)
#: Checks that place documents in the families the sources give them (a run with one of them
#: checks a document that moved in its new family, and its old one with it).
MOVING_CHECKS = frozenset(check.name for check in REGISTRY if check.declares)

FamilyCheck = Callable[["FamilyView", "CheckContext"], "list[Finding]"]
Truth = Callable[["FamilyView", "CheckContext"], "Mapping[str, Document]"]
CollectionCheck = Callable[["CollectionView"], "Wide"]
SourcesCheck = Callable[["SourcesView"], "Wide"]


@dataclass(frozen=True)
class Parts:
    """One registered check with the functions of its parts (``None``: a part it lacks)."""

    check: Registered
    family: FamilyCheck | None = None
    truth: Truth | None = None
    collection: CollectionCheck | None = None
    sources: SourcesCheck | None = None

    @property
    def name(self) -> str:
        return self.check.name


def _part(module: Any, function: str, check: str, signature: str) -> Any:
    found = getattr(module, function, None)
    if not callable(found):
        raise ImportError(
            f"the check {check!r} is registered with a part its module {module.__name__} "
            f"does not define: {function}{signature}"
        )
    return found


@cache
def parts() -> Mapping[str, Parts]:
    """Every check's parts by name, in the registry's order (their modules imported now)."""
    found: dict[str, Parts] = {}
    for check in REGISTRY:
        module = importlib.import_module(f"{__name__}.{check.name}")
        name = check.name
        found[name] = Parts(
            check=check,
            family=(
                _part(module, f"check_{name}", name, "(view, ctx)")
                if check.per_family or check.consequence
                else None
            ),
            truth=_part(module, f"truth_{name}", name, "(view, ctx)") if check.declares else None,
            collection=(
                _part(module, f"collection_{name}", name, "(view)")
                if check.over_collection
                else None
            ),
            sources=(
                _part(module, f"sources_{name}", name, "(view)") if check.over_sources else None
            ),
        )
    return MappingProxyType(found)


__all__ = [
    "CHECKS",
    "MOVING_CHECKS",
    "REGISTRY",
    "SOURCE_CHECKS",
    "CollectionCheck",
    "FamilyCheck",
    "Parts",
    "Registered",
    "SourcesCheck",
    "Truth",
    "parts",
]
