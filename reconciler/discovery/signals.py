"""What one document says about its own version, read from its name, its dates and its body:
the signals discovery compares, pair by pair, without an embedding.

A document is reduced once (``profile``) to a ``Profile``: its name with the version markers
taken out (``-2025``, ``-v2``, ``_old``, ``archive/``, ``(superseded)``, ``1.2``), the markers
themselves, its dates, the words that block it with others, a MinHash of its body, and what
its body says replaces what (``claims``). The body is dropped after that: a profile is small
and of bounded size whatever the document's length.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np

from reconciler.errors import ExtraMissing

try:  # the [discovery] extra: datasketch brings scipy, too heavy for every install
    from datasketch import MinHash
except ImportError:
    raise ExtraMissing("discovery", "datasketch", "suggest") from None

from reconciler.discovery.claims import NOTHING, Ref, read_claims
from reconciler.discovery.vectors import DocVector

#: MinHash permutations of a body (LSH bands x rows: see ``blocking``).
NUM_PERM = 64
#: Words of a body shingled together.
SHINGLE = 3
#: Bodies are read up to this many characters (a longer body is still one document).
BODY_LIMIT = 50_000

#: Words that say "this is the old one" or "this is the new one".
OLDER_WORDS = frozenset(
    {"old", "older", "previous", "prev", "legacy", "deprecated", "superseded", "obsolete",
     "archive", "archived", "outdated", "retired", "bak", "backup", "former"}
)  # fmt: skip
NEWER_WORDS = frozenset({"new", "newer", "latest", "current", "updated", "revised", "final"})
#: Phrases of two words that mark an older version.
OLDER_PHRASES = ("last year", "last-year", "last_year")
#: Words too common to block on (they would put everything in one block).
STOPWORDS = frozenset(
    {"a", "an", "and", "the", "of", "for", "to", "in", "on", "with", "by", "at", "or", "is",
     "md", "rst", "txt", "html", "doc", "docs", "readme", "index"}
)  # fmt: skip

_YEAR = r"(?:19[7-9][0-9]|20[0-9][0-9])"
_DATE = re.compile(rf"\b({_YEAR})[-_./]([01]?[0-9])(?:[-_./]([0-3]?[0-9]))?\b")
_YEAR_TOKEN = re.compile(rf"(?<![0-9a-z.]){_YEAR}(?![0-9a-z.])")
_VERSION = re.compile(
    r"(?<![0-9a-z])(?:v|ver|version|rev|r)[ ._-]?([0-9]+(?:\.[0-9]+)*)(?![0-9a-z])"
)
_DOTTED = re.compile(r"(?<![0-9a-z.])([0-9]+(?:\.[0-9]+)+)(?![0-9a-z.])")
_WORD = re.compile(r"[0-9a-z]+")
_NUMBERED_OLD = re.compile(r"(?:old|bak|backup|archive)[0-9]{1,2}")


@dataclass(frozen=True, slots=True)
class Marker:
    """A version marker found in a name: its text and what it says (older, newer, an ordinal)."""

    text: str
    #: "older" or "newer" (words), "year", "version" (an ordinal), "date".
    says: str
    #: The ordinal it carries (a year, a version as a tuple), for direction.
    value: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Profile:
    """One document as discovery sees it (no body kept)."""

    doc_id: str
    source: str
    family: str
    doc_class: str | None
    title: str
    path: str
    #: Title and path with the markers out, lower case, words joined by one space.
    title_stem: str
    path_stem: str
    markers: tuple[Marker, ...]
    effective_from: datetime | None
    #: Dates found in the title or path (the latest first).
    name_dates: tuple[date, ...]
    #: Words that put this document in a block with others.
    keys: frozenset[str]
    #: MinHash of the body's word shingles, ``NUM_PERM`` uint32 values as bytes (None: no
    #: body was read).
    body: bytes | None
    #: (word, number) references of the documents this one replaces: by its own body ("This
    #: PEP supersedes PEP 241"), or by another's (see ``heard``).
    replaces: frozenset[Ref]
    #: (word, number) references of the documents that replace this one ("superseded by PEP
    #: 426", ``.. superseded:: 292``).
    replaced_by: frozenset[Ref]
    #: (word, number) the document is known by ("pep-0345" -> ("pep", 345)), if any.
    reference: Ref | None
    superseded_by: str | None = None
    #: How many documents of the corpus share this title stem (set by ``blocking.prepare``).
    series: int = 1
    #: Replacements this body tells of between two other documents, as (older, newer).
    between: frozenset[tuple[Ref, Ref]] = frozenset()
    #: References in ``replaces`` or ``replaced_by`` that only another document's body gives,
    #: with that document's id (set by ``blocking.prepare``).
    heard: frozenset[tuple[Ref, str]] = frozenset()
    #: Its chunks' vectors as read from the index, reduced (``vectors``; None: not read).
    vector: DocVector | None = None
    #: How many characters of its body were read for claims, when it was longer (else None).
    claims_capped: int | None = None


def fold(text: str) -> str:
    """Lower case, accents off, separators as spaces."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKD", text).translate(_combining()).lower()


@functools.cache
def _combining() -> dict[int, None]:
    """Every combining character, to delete (made once: ``str.translate`` is then one pass in
    C, where testing each character in Python took most of the time of a long body)."""
    return dict.fromkeys(c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c)))


def markers_of(
    text: str, *, subjects: bool = True
) -> tuple[str, tuple[Marker, ...], tuple[date, ...]]:
    """A name with its version markers out, the markers, and the dates it names.

    With ``subjects``, a bare year, dotted number or date that more of the name's words follow
    stays in the name: it says what the document is about (``2024 Term Steering Council
    election``, ``Python 3.9 Release Schedule``), not which edition it is, as one at the end
    does (``Travel policy 2025``). ``v2``, ``version 3`` and ``rev 4`` say so wherever they
    stand, and so do a number in parentheses and one that only edition words follow
    (``Handbook 2024 edition``)."""
    low = fold(text)
    found: list[Marker] = []
    dates: list[date] = []
    if "(superseded)" in low or "[superseded]" in low:
        found.append(Marker("(superseded)", "older"))
    for phrase in OLDER_PHRASES:
        if phrase in low:
            found.append(Marker(phrase, "older"))
            low = low.replace(phrase, " " * len(phrase))
    kept = _subject_numbers(low) if subjects else ()
    for match in _DATE.finditer(low):
        year, month, day = int(match[1]), int(match[2]), int(match[3] or 1)
        if _within(match, kept) or not (1 <= month <= 12 and 1 <= day <= 31):
            continue
        try:
            dates.append(date(year, month, day))
        except ValueError:
            continue
        found.append(Marker(match[0], "date", (year, month, day)))
    low = _blank(_DATE, low, kept)
    for match in _VERSION.finditer(low):
        if not _within(match, kept):
            found.append(Marker(match[0].strip(), "version", _ordinal(match[1])))
    low = _blank(_VERSION, low, kept)
    for match in _YEAR_TOKEN.finditer(low):
        if not _within(match, kept):
            found.append(Marker(match[0], "year", (int(match[0]),)))
            dates.append(date(int(match[0]), 1, 1))
    low = _blank(_YEAR_TOKEN, low, kept)
    for match in _DOTTED.finditer(low):
        if not _within(match, kept):
            found.append(Marker(match[0], "version", _ordinal(match[1])))
    low = _blank(_DOTTED, low, kept)
    words = []
    for word in _WORD.findall(low):
        if word in OLDER_WORDS or _NUMBERED_OLD.fullmatch(word):
            if not (word == "superseded" and found and found[0].text == "(superseded)"):
                found.append(Marker(word, "older"))
        elif word in NEWER_WORDS:
            found.append(Marker(word, "newer"))
        else:
            words.append(word)
    return " ".join(words), tuple(found), tuple(sorted(set(dates), reverse=True))


_VERSION_WORD = re.compile(r"(?:v|ver|version|rev|r)[0-9]*")
#: Words after a number that say it numbers an edition (``Handbook 2024 edition``).
EDITION_WORDS = frozenset({"edition", "draft", "revision", "update", "issue"})


def _subject_numbers(low: str) -> tuple[tuple[int, int], ...]:
    """The spans of the bare years, dotted numbers and dates that words of the name follow
    (one in parentheses is an aside: ``Deploy runbook (2023) for ops``)."""
    spans = []
    scratch = low
    for pattern in (_DATE, _VERSION, _YEAR_TOKEN, _DOTTED):
        if pattern is not _VERSION:
            spans += [
                (m.start(), m.end())
                for m in pattern.finditer(scratch)
                if _named_after(low, m.end()) and not _in_brackets(low, m)
            ]
        scratch = _blank(pattern, scratch, ())
    return tuple(spans)


def _in_brackets(low: str, match: re.Match[str]) -> bool:
    return low[: match.start()].rstrip().endswith(("(", "[")) and low[
        match.end() :
    ].lstrip().startswith((")", "]"))


def _named_after(low: str, end: int) -> bool:
    """Whether a word of the name (not a marker, not a number) comes after ``end``."""
    return any(
        not word.isdigit()
        and word not in OLDER_WORDS
        and word not in NEWER_WORDS
        and not _NUMBERED_OLD.fullmatch(word)
        and not _VERSION_WORD.fullmatch(word)
        and word not in EDITION_WORDS
        for word in _WORD.findall(low, end)
    )


def _within(match: re.Match[str], spans: Sequence[tuple[int, int]]) -> bool:
    return any(start <= match.start() < stop for start, stop in spans)


def _blank(pattern: re.Pattern[str], low: str, kept: Sequence[tuple[int, int]]) -> str:
    """``low`` with the matches of ``pattern`` outside ``kept`` blanked, positions kept."""
    return pattern.sub(lambda m: m[0] if _within(m, kept) else " " * len(m[0]), low)


def _ordinal(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def path_name(path: str) -> str:
    """A path without its extension, folders kept (``archive/`` is a marker)."""
    folders, _, name = path.replace("\\", "/").rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return f"{folders}/{stem}" if folders else stem


def blocking_keys(*stems: str) -> frozenset[str]:
    """The words of the stems that block: not stop words, not bare numbers of one digit."""
    return frozenset(
        word
        for stem in stems
        for word in stem.split()
        if word not in STOPWORDS and len(word) >= 2 and not (word.isdigit() and len(word) < 2)
    )


def strip_frontmatter(body: str) -> str:
    """A body without a leading YAML frontmatter block."""
    if body.startswith("---"):
        end = body.find("\n---", 3)
        if end != -1:
            return body[end + 4 :]
    return body


def body_minhash(text: str, *, seed: int = 1) -> bytes | None:
    """MinHash of the word shingles of a body (folded, frontmatter off: as ``profile`` reads
    it) as ``NUM_PERM`` uint32 values (None for a body without words): 256 bytes, whatever
    the body's length."""
    words = _WORD.findall(text[:BODY_LIMIT])
    if not words:
        return None
    if len(words) < SHINGLE:
        shingles = {" ".join(words).encode()}
    else:
        shingles = {
            " ".join(words[i : i + SHINGLE]).encode() for i in range(len(words) - SHINGLE + 1)
        }
    hashed = MinHash(
        num_perm=NUM_PERM,
        seed=seed,
        hashfunc=zlib.crc32,
        permutations=_permutations(seed),
        scheme="affine32",
    )
    hashed.update_batch(list(shingles))
    return bytes(hashed.hashvalues.astype(np.uint32).tobytes())


@functools.cache
def _permutations(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The MinHash permutations of a seed (made once: they are the costly part of a MinHash)."""
    return MinHash(num_perm=NUM_PERM, seed=seed, scheme="affine32").permutations  # type: ignore[no-any-return]


def reference_of(*names: str) -> Ref | None:
    """The (word, number) a document is known by: its name is a word and a number only
    ("pep-0345", "RFC 822")."""
    for name in names:
        match = re.fullmatch(r"\s*([a-z]{2,12})[\s#_-]*0*([0-9]{1,6})\s*", fold(name))
        if match:
            return match[1], int(match[2])
    return None


def profile(
    *,
    doc_id: str,
    source: str,
    family: str,
    doc_class: str | None,
    title: str | None,
    path: str | None,
    effective_from: datetime | None,
    body: str | None,
    superseded_by: str | None = None,
) -> Profile:
    """Reduce one document to its profile (the body is read here and not kept)."""
    title = title or ""
    shown_path = path_name(path or doc_id.partition(":")[2] or doc_id)
    title_stem, title_markers, title_dates = markers_of(title)
    folders, _, basename = shown_path.rpartition("/")
    # a year folder (``2021/``) marks an edition; the file name reads like a title
    folder_stem, folder_markers, folder_dates = markers_of(
        folders.replace("/", " "), subjects=False
    )
    path_stem, path_markers, path_dates = markers_of(basename)
    path_stem = path_stem or folder_stem
    path_markers = (*folder_markers, *path_markers)
    if "archive" in fold(folders).split("/"):
        path_markers = (
            *(m for m in path_markers if m.text not in ("archive", "archived")),
            Marker("archive/", "older"),
        )
    reference = reference_of(basename, doc_id.partition(":")[2])
    text = fold(strip_frontmatter(body)) if body else ""
    claims = read_claims(text, reference) if text else NOTHING
    return Profile(
        doc_id=doc_id,
        source=source,
        family=family,
        doc_class=doc_class,
        title=title,
        path=shown_path,
        title_stem=title_stem,
        path_stem=path_stem,
        markers=_unique((*title_markers, *path_markers)),
        effective_from=effective_from.astimezone(UTC) if effective_from else None,
        name_dates=tuple(sorted({*title_dates, *folder_dates, *path_dates}, reverse=True)),
        keys=blocking_keys(title_stem, path_stem),
        body=body_minhash(text) if text else None,
        replaces=claims.replaces,
        replaced_by=claims.replaced_by,
        reference=reference,
        superseded_by=superseded_by,
        between=claims.between,
        claims_capped=claims.capped,
    )


def _unique(markers: Sequence[Marker]) -> tuple[Marker, ...]:
    seen: dict[tuple[str, str], Marker] = {}
    for marker in markers:
        seen.setdefault((marker.text, marker.says), marker)
    return tuple(seen.values())


def bodies_alike(a: Profile, b: Profile) -> float | None:
    """Estimated Jaccard similarity of two bodies' shingles (None: a body is missing)."""
    if a.body is None or b.body is None:
        return None
    return float(np.mean(np.frombuffer(a.body, np.uint32) == np.frombuffer(b.body, np.uint32)))
