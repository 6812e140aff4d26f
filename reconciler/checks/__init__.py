"""The checks: pure functions over per-family views, one module each, findings out.

Each compares two of the three stores (docs/engine.md). They import no driver; they are tested
with plain values.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.check_inputs import CheckContext, FamilyView
from reconciler.checks.dates import check_dates
from reconciler.checks.family import check_family
from reconciler.checks.hash import check_hash
from reconciler.checks.payload import check_payload
from reconciler.checks.siblings import check_siblings
from reconciler.checks.ttl import check_ttl
from reconciler.model import CHECK_NAMES, Finding

#: Every check, in the order they run and report.
CHECKS: tuple[str, ...] = CHECK_NAMES
#: Checks that need the systems of record read.
SOURCE_CHECKS = frozenset({"family", "hash"})

FamilyCheck = Callable[[FamilyView, CheckContext], list[Finding]]
FAMILY_CHECKS: dict[str, FamilyCheck] = {
    "family": check_family,
    "hash": check_hash,
    "siblings": check_siblings,
    "ttl": check_ttl,
    "payload": check_payload,
    "dates": check_dates,
}

__all__ = ["CHECKS", "FAMILY_CHECKS", "SOURCE_CHECKS"]
