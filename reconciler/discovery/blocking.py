"""Which pairs of documents are worth scoring, found without comparing every pair.

Three generators, each exact for the evidence it stands for:

- **blocks of words**: documents that share a blocking word of their stems (a word held by
  more than ``max_block`` documents blocks nothing, and then gives no name likeness either:
  ``restrict_keys`` takes it out of the profiles before anything is scored);
- **body bands** (MinHash LSH, ``BANDS`` x ``ROWS``): two bodies whose MinHashes agree on more
  than ``1 - BANDS / NUM_PERM`` of their values share a band, so every pair whose bodies alone
  could reach a score of 0.6 is a candidate. The bands are sorted in numpy arrays (8 bytes a
  document and band, for the time of the sort) rather than kept in datasketch's
  ``MinHashLSH``, whose dictionaries hold about 4.5 KB a document;
- **references**: a body that says it replaces ``PEP 241`` meets the document known by it, and
  a replacement a body tells of between two others (``PEP 409 (superseded by PEP 415)``) is
  handed to those two by ``prepare`` before anything is scored.

Each document is then scored against its candidates as it is reached, and only pairs at or
above ``floor`` are kept: memory holds the profiles and the kept pairs, never the candidates.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np

from reconciler.discovery.claims import Ref
from reconciler.discovery.scoring import Scored, score_pair
from reconciler.discovery.signals import NUM_PERM, Profile

#: LSH bands and rows per band (BANDS * ROWS == NUM_PERM).
BANDS, ROWS = 16, 4
#: A word shared by more documents than this blocks nothing.
MAX_BLOCK = 32


def prepare(profiles: Sequence[Profile], *, max_block: int = MAX_BLOCK) -> list[Profile]:
    """The profiles ready to compare (``restrict_keys``), each also holding the replacements
    other bodies tell of it (``Profile.heard``)."""
    ready = restrict_keys(profiles, max_block=max_block)
    told: dict[tuple[Ref, Ref], str] = {}
    for p in ready:
        for pair in p.between:
            told[pair] = min(told.get(pair, p.doc_id), p.doc_id)
    if not told:
        return ready
    replaces: dict[Ref, dict[Ref, str]] = defaultdict(dict)
    replaced_by: dict[Ref, dict[Ref, str]] = defaultdict(dict)
    for (older, newer), speaker in told.items():
        replaced_by[older][newer] = speaker
        replaces[newer][older] = speaker
    return [_hear(p, replaces, replaced_by) if p.reference is not None else p for p in ready]


def _hear(
    p: Profile, replaces: dict[Ref, dict[Ref, str]], replaced_by: dict[Ref, dict[Ref, str]]
) -> Profile:
    assert p.reference is not None
    more = {ref: s for ref, s in replaces.get(p.reference, {}).items() if ref not in p.replaces}
    less = {
        ref: s for ref, s in replaced_by.get(p.reference, {}).items() if ref not in p.replaced_by
    }
    if not more and not less:
        return p
    return replace(
        p,
        replaces=p.replaces | frozenset(more),
        replaced_by=p.replaced_by | frozenset(less),
        heard=p.heard | frozenset(more.items()) | frozenset(less.items()),
    )


def restrict_keys(profiles: Sequence[Profile], *, max_block: int = MAX_BLOCK) -> list[Profile]:
    """The profiles ready to compare: the words held by more than ``max_block`` of them taken
    out of their keys (such a word says little about which two belong together), and each
    one's ``series``, the number of profiles sharing its title stem."""
    held = Counter(word for p in profiles for word in p.keys)
    common = {word for word, n in held.items() if n > max_block}
    stems = Counter(p.title_stem for p in profiles if p.title_stem)
    return [
        replace(p, keys=p.keys - common, series=stems[p.title_stem] if p.title_stem else 1)
        if p.keys & common or stems[p.title_stem] > 1
        else p
        for p in profiles
    ]


def candidate_pairs(profiles: Sequence[Profile]) -> Iterator[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, each once, of the documents worth scoring."""
    blocks: dict[str, list[int]] = defaultdict(list)
    known_by: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, p in enumerate(profiles):
        for word in p.keys:
            blocks[word].append(i)
        if p.reference is not None:
            known_by[p.reference].append(i)
    banded = band_neighbours(profiles)
    referred: set[tuple[int, int]] = set()
    for i, p in enumerate(profiles):
        near: set[int] = set()
        for word in p.keys:
            near.update(blocks[word])
        near.update(banded.get(i, ()))
        for j in sorted(near):
            if j > i:
                yield i, j
        # a reference is one-way: the pair is met from the side that makes it
        for ref in p.replaces | p.replaced_by:
            for j in known_by.get(ref, ()):
                pair = (min(i, j), max(i, j))
                if j != i and j not in near and pair not in referred:
                    referred.add(pair)
                    yield pair


def band_neighbours(profiles: Sequence[Profile]) -> dict[int, list[int]]:
    """For each document whose body shares a band with another's, those others: each band's
    ``ROWS`` values sorted (``np.lexsort``), equal runs read off. Exact: no hash of a band, so
    no pair is missed and none is made up."""
    with_body = [i for i, p in enumerate(profiles) if p.body is not None]
    near: dict[int, list[int]] = defaultdict(list)
    if len(with_body) < 2:
        return near
    ids = np.asarray(with_body)
    values = np.frombuffer(
        b"".join(profiles[i].body or b"" for i in with_body), dtype=np.uint32
    ).reshape(len(with_body), NUM_PERM)
    for band in range(BANDS):
        rows = values[:, band * ROWS : (band + 1) * ROWS]
        order = np.lexsort(rows.T[::-1])
        ranked = rows[order]
        starts = np.flatnonzero(np.any(ranked[1:] != ranked[:-1], axis=1)) + 1
        for run in np.split(order, starts):
            if len(run) < 2:
                continue
            members = ids[run].tolist()
            for i in members:
                near[i].extend(j for j in members if j != i)
    return near


def scored_pairs(
    profiles: Sequence[Profile], *, floor: float, skip_known: bool = True
) -> Iterator[Scored]:
    """Every candidate pair scoring at least ``floor``; pairs already in one family of the
    table, or already linked by ``superseded_by``, are left out when ``skip_known``."""
    for i, j in candidate_pairs(profiles):
        a, b = profiles[i], profiles[j]
        if skip_known and _known(a, b):
            continue
        scored = score_pair(a, b)
        if scored.score >= floor:
            yield scored


def _known(a: Profile, b: Profile) -> bool:
    return (
        (a.source == b.source and a.family == b.family)
        or a.superseded_by == b.doc_id
        or b.superseded_by == a.doc_id
    )


def brute_force(profiles: Sequence[Profile], *, floor: float) -> Iterator[Scored]:
    """Every pair scored (quadratic: for tests and small corpora)."""
    for i, a in enumerate(profiles):
        for b in profiles[i + 1 :]:
            if _known(a, b):
                continue
            scored = score_pair(a, b)
            if scored.score >= floor:
                yield scored
