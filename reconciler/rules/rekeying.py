"""Which registered documents a source now names with other ids: the pairs of a re-keying.

A configuration change (a vault's ids read from a header instead of the path, an
``id_template`` mended) gives documents already registered new ids. Seen naively, each is a
document gone (``missing_in_source``, kept and served for the grace period) and a new one
(ingested again): the same text served twice. A re-keying instead renames each document in
place (``writing.rekeying``).

A registered document is paired with the source document that holds its source key under
another id (a row adopted by ``reconciler bootstrap`` with an id of no ``<source>:`` form, the
source now naming it ``<source>:<key>``), or else with the one at the place it was last seen
(its path, as the identity map recorded it), one to one. Nothing is guessed: a place that two old
ids claim, a source document that two old ids could become, or a new id already registered
as another document is a ``RekeyConflict``, reported and left as it is.

Pure: plain values in, a frozen ``RekeyPlan`` out; the order of the input does not matter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconciler.model import Document, SourceDocument, VersionState

__all__ = ["RekeyConflict", "RekeyPair", "RekeyPlan", "pair_documents", "place_of"]

#: Why a re-keying cannot be decided (``RekeyConflict.reason``).
TWO_OLD = "two or more old ids at one path"
TWO_NEW = "two or more new ids at one path"
TAKEN = "the new id is already registered as another document"


@dataclass(frozen=True, slots=True)
class RekeyPair:
    """One registered document (``old_id``) that its source now names ``new_id``."""

    source: str
    old_id: str
    new_id: str
    old_key: str
    new_key: str
    #: Where the source holds it (its path, or its record key where it has none).
    path: str
    family: str
    #: Chunks its row says it has (0: not known).
    chunks: int = 0

    def swapped(self) -> RekeyPair:
        """The pair that undoes this one (a rollback's)."""
        return replace(
            self, old_id=self.new_id, new_id=self.old_id, old_key=self.new_key, new_key=self.old_key
        )

    def to_json(self) -> dict[str, Any]:
        """The pair as ``rekey --format json`` and the audit log spell it."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RekeyPair:
        """A pair as ``to_json`` spelt it (read back from an audit entry)."""
        return cls(**{name: data[name] for name in cls.__slots__ if name in data})


@dataclass(frozen=True, slots=True)
class RekeyConflict:
    """A re-keying that cannot be decided: the ids involved, where, and why."""

    source: str
    path: str
    doc_ids: tuple[str, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The conflict as ``rekey --format json`` spells it."""
        return {
            "source": self.source,
            "path": self.path,
            "doc_ids": list(self.doc_ids),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class RekeyPlan:
    """The pairs of one re-keying, sorted by old id, and what could not be decided."""

    pairs: tuple[RekeyPair, ...] = ()
    conflicts: tuple[RekeyConflict, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pairs or self.conflicts)

    @property
    def old_ids(self) -> frozenset[str]:
        """The ids the pairs give up."""
        return frozenset(p.old_id for p in self.pairs)

    @property
    def new_ids(self) -> frozenset[str]:
        """The ids the pairs take."""
        return frozenset(p.new_id for p in self.pairs)

    @property
    def blocking(self) -> bool:
        """Whether registering the source's documents now would serve one under two ids: a
        pair not applied, or an undecided one whose new id is not registered yet."""
        return bool(self.pairs) or any(c.reason != TAKEN for c in self.conflicts)

    def swapped(self) -> RekeyPlan:
        """The plan that undoes this one."""
        return RekeyPlan(tuple(sorted((p.swapped() for p in self.pairs), key=_order)))

    def __add__(self, other: RekeyPlan) -> RekeyPlan:
        return RekeyPlan(
            tuple(sorted((*self.pairs, *other.pairs), key=_order)),
            tuple(sorted((*self.conflicts, *other.conflicts), key=lambda c: (c.source, c.path))),
        )


def place_of(doc: SourceDocument) -> str:
    """Where a source holds a document: its path, or its record key where it has none."""
    return doc.path if doc.path is not None else doc.source_key


def _order(pair: RekeyPair) -> tuple[str, str]:
    return (pair.source, pair.old_id)


def pair_documents(
    source: str,
    documents: Iterable[SourceDocument],
    *,
    gone: Iterable[Document],
    paths: Mapping[str, str],
    registered: Mapping[str, Document],
) -> RekeyPlan:
    """Pair each registered document of ``source`` whose id the source no longer holds
    (``gone``) with the source document that holds its source key under another id, or else
    with the one at its last place (``paths``: source key -> path, from the identity map),
    one to one.

    ``registered`` holds the rows of the source documents at those places that are already
    registered (a new id that is taken is a conflict, never a merge). Documents of other
    sources, retired rows, and gone rows with no recorded place or none the source holds now,
    are left out: those are missing (or withdrawn), not renamed.
    """
    docs = [d for d in documents if d.source == source]
    held = {d.doc_id for d in docs}
    at: dict[str, list[SourceDocument]] = defaultdict(list)
    keyed: dict[str, str] = {}  # source key -> the place of the document that holds it
    for doc in docs:
        at[place_of(doc)].append(doc)
        keyed[doc.source_key] = place_of(doc)
    claims: dict[str, list[Document]] = defaultdict(list)  # place -> old rows claiming it
    for row in gone:
        place = keyed.get(row.source_key) or paths.get(row.source_key)
        if (
            row.source != source
            or row.doc_id in held
            or row.version_state is VersionState.RETIRED  # withdrawn: its place is free
            or place is None
            or place not in at
        ):
            continue
        claims[place].append(row)
    pairs: list[RekeyPair] = []
    conflicts: list[RekeyConflict] = []
    for place in sorted(claims):
        rows = sorted(claims[place], key=lambda r: r.doc_id)
        found = sorted(at[place], key=lambda d: d.doc_id)
        ids = tuple(r.doc_id for r in rows) + tuple(d.doc_id for d in found)
        if len(rows) > 1:
            conflicts.append(RekeyConflict(source, place, ids, TWO_OLD))
        elif len(found) > 1:
            conflicts.append(RekeyConflict(source, place, ids, TWO_NEW))
        elif found[0].doc_id in registered:
            conflicts.append(RekeyConflict(source, place, ids, TAKEN))
        else:
            row, doc = rows[0], found[0]
            pairs.append(
                RekeyPair(
                    source=source,
                    old_id=row.doc_id,
                    new_id=doc.doc_id,
                    old_key=row.source_key,
                    new_key=doc.source_key,
                    path=place,
                    family=row.doc_family_id,
                    chunks=row.chunk_count,
                )
            )
    return RekeyPlan(tuple(sorted(pairs, key=_order)), tuple(conflicts))
