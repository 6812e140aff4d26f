"""Discovery for inherited corpora: the versions nobody declared, proposed for a person to
review. Pure: profiles in (``signals.profile``), proposals out; ``reconciler.app.suggesting``
feeds it the table's documents and the sources' bodies, and writes nothing anywhere.

``signals`` reduces a document to a small profile, ``blocking`` finds the pairs worth scoring
without comparing every pair, ``scoring`` scores a pair and tells which is the newer, in words,
``proposals`` turns the scored pairs into link and family proposals, ``reviewed`` reads a
reviewed file of them back (through ``safe_yaml``: a file nobody vouches for).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reconciler.discovery.proposals import (
    Proposal,
    Proposals,
    ProposalsError,
    build,
)
from reconciler.discovery.reviewed import load_reviewed
from reconciler.discovery.reviewed import read_reviewed as read_proposals

if TYPE_CHECKING:
    from reconciler.discovery.scoring import DEFAULT_MIN_SCORE, Scored, score_pair
    from reconciler.discovery.signals import Profile, profile

__all__ = [
    "DEFAULT_MIN_SCORE",
    "Profile",
    "Proposal",
    "Proposals",
    "ProposalsError",
    "Scored",
    "discover",
    "load_reviewed",
    "profile",
    "read_proposals",
    "score_pair",
    "scored",
]

#: Names loaded when first asked for: reading a reviewed file (``declare``) needs none of the
#: profiling and scoring, nor numpy, rapidfuzz and datasketch, which they load (0.5-1 s).
_LAZY = {
    "DEFAULT_MIN_SCORE": "scoring",
    "Scored": "scoring",
    "score_pair": "scoring",
    "Profile": "signals",
    "profile": "signals",
}


def __getattr__(name: str) -> Any:
    """``_LAZY``'s names, from their modules (PEP 562)."""
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def scored(profiles: Sequence[Profile], *, floor: float) -> list[Scored]:
    """Every pair worth proposing at ``floor`` or above, best first."""
    from reconciler.discovery.blocking import prepare, scored_pairs  # noqa: PLC0415

    ready = prepare(profiles)
    return sorted(scored_pairs(ready, floor=floor), key=lambda s: (-s.score, s.a, s.b))


def discover(
    profiles: Sequence[Profile], *, min_score: float | None = None, notes: Sequence[str] = ()
) -> Proposals:
    """The proposals among ``profiles`` at ``min_score`` or above (default
    ``DEFAULT_MIN_SCORE``)."""
    from reconciler.discovery.scoring import DEFAULT_MIN_SCORE  # noqa: PLC0415

    floor = DEFAULT_MIN_SCORE if min_score is None else min_score
    return build(
        scored(profiles, floor=floor), min_score=floor, documents=len(profiles), notes=notes
    )
