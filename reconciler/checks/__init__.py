"""The checks: pure functions over per-family views, one module each, findings out.

Each compares two of the three stores (docs/engine.md). They import no driver; they are tested
with plain values.

``REGISTRY`` is the one list of checks: a check is its module here and one line there. A
family check ``reconciler/checks/<name>.py`` defines ``check_<name>(view, ctx) -> findings``;
the CLI's ``--check``, the options' validation, the run and its report all take their names
from this list (``tests/integration/test_check_registry.py`` adds one to a copy of the code).
The names are read without importing the check modules: those load when a run first asks for
them (``family_checks``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from reconciler.check_inputs import CheckContext, FamilyView
    from reconciler.model import Finding


@dataclass(frozen=True)
class Registered:
    """One check of the registry.

    ``reads_sources``: it needs the systems of record read (a run of only other checks reads
    none). ``per_family``: a family check, run on every family by the pipeline
    (``check_<name>`` of its module); the one other kind, ``index``, checks the collection
    once and is run by the assessment itself.
    """

    name: str
    reads_sources: bool = False
    per_family: bool = True


#: Every check, in the order they run and report.
REGISTRY: tuple[Registered, ...] = (
    Registered("family", reads_sources=True),
    Registered("hash", reads_sources=True),
    Registered("siblings"),
    Registered("ttl"),
    Registered("payload"),
    Registered("dates"),
    Registered("index", per_family=False),
)

#: Every check's name, in the order they run and report.
CHECKS: tuple[str, ...] = tuple(check.name for check in REGISTRY)
#: Checks that need the systems of record read.
SOURCE_CHECKS = frozenset(check.name for check in REGISTRY if check.reads_sources)

FamilyCheck = Callable[["FamilyView", "CheckContext"], "list[Finding]"]


@cache
def family_checks() -> Mapping[str, FamilyCheck]:
    """The family checks by name, in the registry's order (their modules imported now)."""
    found: dict[str, FamilyCheck] = {}
    for check in REGISTRY:
        if not check.per_family:
            continue
        module = importlib.import_module(f"{__name__}.{check.name}")
        function = getattr(module, f"check_{check.name}", None)
        if not callable(function):
            raise ImportError(
                f"the check {check.name!r} is registered but {module.__name__} defines no "
                f"function check_{check.name}(view, ctx)"
            )
        found[check.name] = cast(FamilyCheck, function)
    return MappingProxyType(found)


__all__ = ["CHECKS", "REGISTRY", "SOURCE_CHECKS", "FamilyCheck", "Registered", "family_checks"]
