"""The engine's old address, kept so that code written against it still imports: one run now
lives in ``reconciler.pipeline`` (``Reconciler`` in ``pipeline.running``, its values in
``pipeline.values``)."""

from reconciler.pipeline.checking import check_family, family_view
from reconciler.pipeline.guarding import decide
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import (
    ENGINE_MODES,
    WRITING_MODES,
    Assessment,
    FamilyOutcome,
    Guard,
    GuardDecision,
    Options,
    Report,
    Scan,
    SourcesRead,
    Totals,
)

__all__ = [
    "ENGINE_MODES",
    "WRITING_MODES",
    "Assessment",
    "FamilyOutcome",
    "Guard",
    "GuardDecision",
    "Options",
    "Reconciler",
    "Report",
    "Scan",
    "SourcesRead",
    "Totals",
    "check_family",
    "decide",
    "family_view",
]
