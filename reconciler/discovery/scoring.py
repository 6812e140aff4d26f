"""How alike two profiles are, which one is the newer, and why, in words.

The score is a noisy-or of independent pieces of evidence, each worth at most its weight:
names alike once the version markers are out (the strongest when the names become equal),
bodies alike (MinHash), chunk vectors alike (``vectors``: the index's own vectors, when
``suggest`` reads them), and a body saying one replaces the other (one of the two, or a third
document telling of them: ``claims``). A name likeness counts only
between documents that share a blocking word (``signals.blocking_keys``), so that blocking
(``blocking``) finds every pair that can score: the property the tests hold it to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from rapidfuzz import fuzz

from reconciler.discovery.signals import Marker, Profile, bodies_alike
from reconciler.discovery.vectors import vectors_alike

#: The score a proposal needs by default.
DEFAULT_MIN_SCORE = 0.7
#: Weights of the evidence (each the score it gives alone, at full strength).
SAME_NAME = 0.8  # names equal once the markers are out, and a marker tells them apart
NAMES = 0.6  # names alike, at 1.0
BODIES = 0.8  # bodies alike, at 1.0
REPLACES = 0.85  # one body says it replaces the other
VECTORS = 0.6  # chunk vectors alike (centred cosine), at 1.0: alone, never the default score
#: More documents than this sharing one name make a series (``Python 3.8 Release Schedule``,
#: ``3.9``, ...): documents about different things, whose equal names are only alike.
SERIES = 8
#: Below these, names or bodies give no evidence at all.
NAMES_FLOOR = 0.75
BODIES_FLOOR = 0.3
#: Below this (centred cosine, ``vectors``), chunk vectors give no evidence: unrelated
#: documents are near 0 (on the PEPs, 99 % of pairs are below 0.5 with all-MiniLM-L6-v2).
VECTORS_FLOOR = 0.6


@dataclass(frozen=True, slots=True)
class Scored:
    """One pair scored: the evidence, the score, and which is the newer."""

    a: str
    b: str
    score: float
    titles: float | None
    paths: float | None
    bodies: float | None
    same_name: bool
    #: "a" or "b": which one the other replaces by its own words.
    replacing: str | None
    #: (older, newer) doc ids, or None: no direction (the evidence is split or absent).
    direction: tuple[str, str] | None
    evidence: str
    #: Chunk vectors alike (None: not read, or no evidence: ``vectors.vectors_alike``).
    vectors: float | None = None


def names_alike(a: Profile, b: Profile) -> tuple[float | None, float | None, bool]:
    """(titles alike, paths alike, names equal once the markers are out); a likeness is None
    when the pair shares no blocking word, or when the two names differ only in a number that
    is not a version marker (``X100`` and ``X200``, ``pep-0101`` and ``pep-0411``: two
    things, not two versions of one)."""
    if not (a.keys & b.keys):
        return None, None, False
    titles = _alike(a.title_stem, b.title_stem)
    paths = _alike(a.path_stem, b.path_stem)
    marked = bool(a.markers or b.markers)
    same = (titles == 1.0 and (a.title != b.title or (marked or len(a.keys & b.keys) >= 2))) or (
        marked and paths == 1.0 and a.path != b.path
    )
    return titles, paths, same and max(a.series, b.series) <= SERIES


_NUMBER = re.compile(r"[0-9]+")


def _alike(x: str, y: str) -> float | None:
    if not x or not y:
        return None
    if x != y and _NUMBER.sub("#", x) == _NUMBER.sub("#", y):
        return None
    return fuzz.ratio(x, y) / 100


def _replacing(a: Profile, b: Profile) -> tuple[str | None, str | None]:
    """("a" or "b": the one a body says replaces the other, or None; the id of the third
    document that says so, or None when one of the two says it itself)."""
    a_says, a_heard = _says(a, b)
    b_says, b_heard = _says(b, a)
    if a_says and not b_says:
        return "a", a_heard
    if b_says and not a_says:
        return "b", b_heard
    return None, None


def _says(new: Profile, old: Profile) -> tuple[bool, str | None]:
    """Whether a body says ``new`` replaces ``old``, and who, when only a third body does."""
    heard = []
    if old.reference is not None and old.reference in new.replaces:
        heard.append(dict(new.heard).get(old.reference))
    if new.reference is not None and new.reference in old.replaced_by:
        heard.append(dict(old.heard).get(new.reference))
    if not heard:
        return False, None
    return True, None if None in heard else min(h for h in heard if h is not None)


def score_pair(a: Profile, b: Profile) -> Scored:
    """Score one pair (symmetric in everything but the order of its fields)."""
    titles, paths, same = names_alike(a, b)
    bodies = bodies_alike(a, b)
    # (a series' members are alike in content as in name: neither tells versions apart)
    vectors = vectors_alike(a.vector, b.vector) if max(a.series, b.series) <= SERIES else None
    replacing, heard = _replacing(a, b)
    misses = 1.0
    if same:
        misses *= 1 - SAME_NAME
    else:
        best = max((x for x in (titles, paths) if x is not None), default=0.0)
        if best >= NAMES_FLOOR:
            misses *= 1 - NAMES * ((best - NAMES_FLOOR) / (1 - NAMES_FLOOR)) ** 0.5
    if bodies is not None and bodies >= BODIES_FLOOR:
        misses *= 1 - BODIES * bodies
    if vectors is not None and vectors >= VECTORS_FLOOR:
        misses *= 1 - VECTORS * (vectors - VECTORS_FLOOR) / (1 - VECTORS_FLOOR)
    if replacing is not None:
        misses *= 1 - REPLACES
    score = round(1 - misses, 4)
    direction, why = direct(a, b, replacing, heard)
    return Scored(
        a=a.doc_id,
        b=b.doc_id,
        score=score,
        titles=titles,
        paths=paths,
        bodies=bodies,
        same_name=same,
        replacing=replacing,
        direction=direction,
        evidence=_evidence(a, b, titles, paths, bodies, replacing, direction, why, vectors),
        vectors=vectors,
    )


def _latest_date(p: Profile) -> date | None:
    if p.effective_from is not None:
        return p.effective_from.date()
    return p.name_dates[0] if p.name_dates else None


def _ordinal(p: Profile) -> tuple[int, ...] | None:
    values = [m.value for m in p.markers if m.says == "version" and m.value]
    return max(values) if values else None


def _votes(
    a: Profile, b: Profile, replacing: str | None, heard: str | None = None
) -> list[tuple[int, str]]:
    """Each piece of direction evidence: +1 when it says ``b`` is the newer, -1 for ``a``."""
    votes: list[tuple[int, str]] = []
    if replacing is not None:
        newer, older = (a, b) if replacing == "a" else (b, a)
        who = "a body says" if heard is None else f"{_short_id(heard)} says"
        votes.append(
            (1 if replacing == "b" else -1, f"{who} {_short(newer)} replaces {_short(older)}")
        )
    da, db = _latest_date(a), _latest_date(b)
    if da is not None and db is not None and da != db:
        votes.append((1 if db > da else -1, f"dates {min(da, db)} -> {max(da, db)}"))
    oa, ob = _ordinal(a), _ordinal(b)
    if oa is not None and ob is not None and oa != ob:
        low, high = sorted([oa, ob])
        votes.append((1 if ob > oa else -1, f"versions {_dotted(low)} -> {_dotted(high)}"))
    shared = {m.text for m in a.markers} & {m.text for m in b.markers}
    for p, sign in ((a, 1), (b, -1)):
        for marker in p.markers:
            if marker.text in shared:  # the same word in both names says nothing
                continue
            if marker.says == "older":
                votes.append((sign, f"`{marker.text}` in the older name"))
            elif marker.says == "newer":
                votes.append((-sign, f"`{marker.text}` in the newer name"))
    return votes


def direct(
    a: Profile, b: Profile, replacing: str | None, heard: str | None = None
) -> tuple[tuple[str, str] | None, str]:
    """(older, newer) when the evidence agrees (a body's own words outvote the rest), else
    None, with the evidence in words."""
    votes = _votes(a, b, replacing, heard)
    if not votes:
        return None, "no direction: nothing says which is the newer"
    if replacing is not None:
        total = 1 if replacing == "b" else -1
    else:
        signs = {sign for sign, _ in votes}
        total = signs.pop() if len(signs) == 1 else 0
    words = "; ".join(dict.fromkeys(text for _, text in votes))
    if total == 0:
        return None, f"no direction: the evidence is split ({words})"
    return ((a.doc_id, b.doc_id) if total > 0 else (b.doc_id, a.doc_id)), words


def _evidence(
    a: Profile,
    b: Profile,
    titles: float | None,
    paths: float | None,
    bodies: float | None,
    replacing: str | None,
    direction: tuple[str, str] | None,
    why: str,
    vectors: float | None = None,
) -> str:
    parts = []
    if max(a.series, b.series) > SERIES:
        parts.append(f"one of a series of {max(a.series, b.series)} documents named alike")
    if titles is not None and titles >= NAMES_FLOOR:
        parts.append(f"titles {titles:.2f} alike")
    if paths is not None and paths >= NAMES_FLOOR:
        parts.append(f"paths {paths:.2f} alike")
    if bodies is not None:
        parts.append(f"bodies {bodies:.2f} alike")
    if vectors is not None and vectors >= VECTORS_FLOOR:
        parts.append(f"chunk vectors {vectors:.2f} alike")
    parts.append(why)
    parts += _one_sided(a, b, direction)
    parts += [
        f"claims read from the first {p.claims_capped:,} characters of {_short(p)} only"
        for p in (a, b)
        if p.claims_capped is not None
    ]
    return "; ".join(parts)


def _one_sided(a: Profile, b: Profile, direction: tuple[str, str] | None) -> list[str]:
    """Years, versions and dates one name carries and the other lacks (``-2019`` in
    ``onboarding-2019`` beside ``onboarding``): evidence that they are versions, in words."""
    out = []
    for p, other in ((a, b), (b, a)):
        theirs = {m.text for m in other.markers}
        for m in p.markers:
            if m.says in ("year", "version", "date") and m.text not in theirs and not other.markers:
                side = (
                    "the older" if direction and direction[0] == p.doc_id else
                    "the newer" if direction else "one"
                )  # fmt: skip
                out.append(f"`{m.text}` in {side} name only")
    return out


def _short(p: Profile) -> str:
    return _short_id(p.doc_id)


def _short_id(doc_id: str) -> str:
    return doc_id.partition(":")[2] or doc_id


def _dotted(value: tuple[int, ...]) -> str:
    return ".".join(str(v) for v in value)


def marker_words(markers: tuple[Marker, ...]) -> str:
    """Markers as a person reads them: ``-2025``, ``old``."""
    return ", ".join(f"`{m.text}`" for m in markers)
