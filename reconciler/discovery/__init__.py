"""Discovery for inherited corpora: the versions nobody declared, proposed for a person to
review. Pure: profiles in (``signals.profile``), proposals out; ``reconciler.app.suggesting``
feeds it the table's documents and the sources' bodies, and writes nothing anywhere.

``signals`` reduces a document to a small profile, ``blocking`` finds the pairs worth scoring
without comparing every pair, ``scoring`` scores a pair and tells which is the newer, in words,
``proposals`` turns the scored pairs into link and family proposals, ``reviewed`` reads a
reviewed file of them back (through ``safe_yaml``: a file nobody vouches for).
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.discovery.blocking import prepare, scored_pairs
from reconciler.discovery.proposals import (
    Proposal,
    Proposals,
    ProposalsError,
    build,
)
from reconciler.discovery.reviewed import load_reviewed
from reconciler.discovery.reviewed import read_reviewed as read_proposals
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


def scored(profiles: Sequence[Profile], *, floor: float) -> list[Scored]:
    """Every pair worth proposing at ``floor`` or above, best first."""
    ready = prepare(profiles)
    return sorted(scored_pairs(ready, floor=floor), key=lambda s: (-s.score, s.a, s.b))


def discover(
    profiles: Sequence[Profile], *, min_score: float = DEFAULT_MIN_SCORE, notes: Sequence[str] = ()
) -> Proposals:
    """The proposals among ``profiles`` at ``min_score`` or above."""
    return build(
        scored(profiles, floor=min_score), min_score=min_score, documents=len(profiles), notes=notes
    )
