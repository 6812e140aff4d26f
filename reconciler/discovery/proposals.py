"""Scored pairs turned into what a person reviews: link proposals (this one replaced that one)
and family proposals (these belong together), each with an id, a score, the evidence in words
and a decision to fill in (``undecided`` until a person writes ``accept`` or ``reject``).

The file ``suggest -o proposals.yaml`` writes is read back by ``reviewed.read_reviewed``, which
checks every field and lists every problem at once, so the decisions a person made can be
recorded.

A proposals file::

    format: reconciler-proposals/1
    min_score: 0.7
    documents: 13
    proposals:
    - id: link-3f9a1c2e
      kind: link
      older: handbook:expenses-last-year
      newer: handbook:expenses
      direction: older -> newer       # or "no direction": older/newer are then only a pair
      score: 0.86
      evidence: titles 1.00 alike; `last year` in the older name; dates 2025-01-01 -> 2026-01-01
      decision: undecided             # accept | reject | undecided
    - id: family-0c1d2e3f
      kind: family
      members: [handbook:expenses-last-year, handbook:expenses]   # oldest first, when known
      links: [link-3f9a1c2e]
      score: 0.86
      evidence: 2 documents joined by 1 link
      decision: undecided
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.discovery.scoring import Scored

FORMAT = "reconciler-proposals/1"
DIRECTED = "older -> newer"
NO_DIRECTION = "no direction"
DECISIONS = ("accept", "reject", "undecided")
KINDS = ("link", "family")


@dataclass(frozen=True)
class Proposal:
    """One proposal to review."""

    id: str
    kind: str
    score: float
    evidence: str
    decision: str = "undecided"
    #: link: the pair (older first when ``direction`` is ``DIRECTED``).
    older: str | None = None
    newer: str | None = None
    direction: str | None = None
    #: family: its members (oldest first when the links say) and the links joining them.
    members: tuple[str, ...] = ()
    links: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The proposal as it is written out (fields of the other kind left out)."""
        data: dict[str, Any] = {"id": self.id, "kind": self.kind}
        if self.kind == "link":
            data |= {"older": self.older, "newer": self.newer, "direction": self.direction}
        else:
            data |= {"members": list(self.members), "links": list(self.links)}
        return data | {"score": self.score, "evidence": self.evidence, "decision": self.decision}


@dataclass(frozen=True)
class Proposals:
    """What ``suggest`` proposes, and what it looked at."""

    proposals: tuple[Proposal, ...]
    min_score: float
    documents: int
    pairs_scored: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def links(self) -> tuple[Proposal, ...]:
        return tuple(p for p in self.proposals if p.kind == "link")

    @property
    def families(self) -> tuple[Proposal, ...]:
        return tuple(p for p in self.proposals if p.kind == "family")

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "min_score": self.min_score,
            "documents": self.documents,
            "pairs_scored": self.pairs_scored,
            "notes": list(self.notes),
            "proposals": [p.as_dict() for p in self.proposals],
        }


def _id(kind: str, *doc_ids: str) -> str:
    digest = hashlib.sha256("\n".join([kind, *doc_ids]).encode()).hexdigest()[:10]
    return f"{kind}-{digest}"


def link_of(scored: Scored) -> Proposal:
    """A scored pair as a link proposal."""
    if scored.direction is not None:
        older, newer = scored.direction
        direction = DIRECTED
    else:
        older, newer = sorted((scored.a, scored.b))
        direction = NO_DIRECTION
    return Proposal(
        id=_id("link", *sorted((scored.a, scored.b))),
        kind="link",
        score=scored.score,
        evidence=scored.evidence,
        older=older,
        newer=newer,
        direction=direction,
    )


def reduce_pairs(pairs: Sequence[Scored]) -> list[Scored]:
    """The pairs without the shortcuts a chain implies: of a triangle ``a - b - c`` the pair
    that skips a member goes, i.e. ``a -> c`` when ``a -> b -> c`` are directed so, else the
    triangle's weakest pair (lowest score, then least alike bodies). Weakest first, so a
    long chain keeps its links from one version to the next."""
    by_pair = {frozenset((s.a, s.b)): s for s in pairs}
    near: dict[str, set[str]] = defaultdict(set)
    for s in pairs:
        near[s.a].add(s.b)
        near[s.b].add(s.a)
    # first the pairs that skip a member by their directions, then the strictly weakest
    for directed in (True, False):
        for s in sorted(pairs, key=_strength):
            if frozenset((s.a, s.b)) in by_pair and _implied(s, by_pair, near, directed):
                del by_pair[frozenset((s.a, s.b))]
                near[s.a].discard(s.b)
                near[s.b].discard(s.a)
    return [s for s in pairs if frozenset((s.a, s.b)) in by_pair]


def _implied(
    s: Scored,
    by_pair: Mapping[frozenset[str], Scored],
    near: Mapping[str, set[str]],
    directed: bool,
) -> bool:
    for c in near[s.a] & near[s.b]:
        ac, bc = by_pair.get(frozenset((s.a, c))), by_pair.get(frozenset((s.b, c)))
        if ac is None or bc is None:
            continue
        if _skips(s, c, ac, bc) if directed else _strength(s) < min(_strength(ac), _strength(bc)):
            return True
    return False


def _strength(s: Scored) -> tuple[float, float]:
    return s.score, s.bodies if s.bodies is not None else 0.0


def _skips(s: Scored, c: str, ac: Scored, bc: Scored) -> bool:
    """Whether ``s`` runs from older to newer across ``c`` (both its pairs directed through it)."""
    if s.direction is None or ac.direction is None or bc.direction is None:
        return False
    older, newer = s.direction
    first = ac if older in (ac.a, ac.b) else bc
    second = bc if first is ac else ac
    return first.direction == (older, c) and second.direction == (c, newer)


def families_of(links: Sequence[Proposal]) -> list[Proposal]:
    """One family proposal per group of documents the links join (union-find)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for link in links:
        assert link.older is not None
        assert link.newer is not None
        parent[root(link.older)] = root(link.newer)
    groups: dict[str, list[Proposal]] = defaultdict(list)
    for link in links:
        assert link.older is not None
        groups[root(link.older)].append(link)
    families = []
    for group in groups.values():
        members = _ordered(group)
        families.append(
            Proposal(
                id=_id("family", *sorted(members)),
                kind="family",
                score=min(link.score for link in group),
                evidence=f"{len(members)} documents joined by {len(group)} link"
                + ("s" if len(group) != 1 else ""),
                members=tuple(members),
                links=tuple(sorted(link.id for link in group)),
            )
        )
    return sorted(families, key=lambda f: f.members)


def _ordered(group: Sequence[Proposal]) -> list[str]:
    """The members oldest first where directed links say (a topological order; ties and
    undirected members by id)."""
    members = sorted({m for link in group for m in (link.older, link.newer) if m})
    before: dict[str, set[str]] = {m: set() for m in members}
    for link in group:
        if link.direction == DIRECTED and link.older and link.newer:
            before[link.newer].add(link.older)
    ordered: list[str] = []
    placed: set[str] = set()
    while len(ordered) < len(members):
        ready = [m for m in members if m not in placed and before[m] <= placed]
        if not ready:  # a cycle: the rest by id
            ready = [m for m in members if m not in placed]
        ordered.append(ready[0])
        placed.add(ready[0])
    return ordered


def build(
    scored: Iterable[Scored], *, min_score: float, documents: int, notes: Sequence[str] = ()
) -> Proposals:
    """The proposals of the pairs at or above ``min_score``: links (reduced), then families."""
    pairs = list(scored)
    kept = reduce_pairs([s for s in pairs if s.score >= min_score])
    links = sorted((link_of(s) for s in kept), key=lambda p: (-p.score, p.id))
    return Proposals(
        proposals=(*links, *families_of(links)),
        min_score=min_score,
        documents=documents,
        pairs_scored=len(pairs),
        notes=tuple(notes),
    )


class ProposalsError(ValueError):
    """A proposals file that can't be read back; ``problems`` lists every one."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))
