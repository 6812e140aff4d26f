"""Which family each source document belongs to, with family ids that stay stable over time.

A family groups the versions of one document. Sources rarely say so outright, so the family is
derived, in this order of trust:

1. an explicit ``family`` in the source: ``f"{source}:{family}"``;
2. the connected component of supersession links (every declared successor, taken
   undirected: fan-in and fan-out join one family): members without an
   explicit family inherit it when the component carries exactly one distinct explicit family;
3. the identity map (``known_by_key``: source_key -> family id recorded by earlier runs), so a
   new version linked to a known one lands in the known family; when a link joins members of
   several known families, the one that already holds the most of them is kept (ties: the
   family of the lowest-ranked member), so the fewest documents move;
4. the body hash (``known_by_hash``: content_hash -> family id), so a note that moved or was
   renamed (new id, same body) keeps its family; used only when the hash is unique among the
   documents given and the family is not already claimed by another component in this run
   (a copy of a note must not join the original's family by accident);
5. otherwise a new id ``f"{source}:{root.source_key}"``, root being the member with the lowest
   ``(version, source_key)`` (a missing version sorts last). Should that id already name
   another family (known, explicit or claimed in this run), ``~2``, ``~3``... is appended
   rather than merging two unrelated families.

Pure: plain values in, a plain value out; the result does not depend on the input order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from reconciler.model import SourceDocument

__all__ = ["FamilyAssignment", "resolve_families"]


@dataclass(frozen=True, slots=True)
class FamilyAssignment:
    """The family of every document, and the identities to record in the identity map."""

    #: doc_id -> family id, for every document given.
    family_of: Mapping[str, str]
    #: (source_key, family_id) pairs that are new or changed relative to ``known_by_key``,
    #: sorted; recording them makes the next run reuse the same ids.
    new_identities: tuple[tuple[str, str], ...]


def resolve_families(
    documents: Sequence[SourceDocument],
    *,
    known_by_key: Mapping[str, str],
    known_by_hash: Mapping[str, str],
) -> FamilyAssignment:
    """Assign a family id to every document of one source (see the module docstring)."""
    sources = {doc.source for doc in documents}
    if len(sources) > 1:
        raise ValueError(
            f"resolve_families takes the documents of one source, got {sorted(sources)}"
        )
    by_id: dict[str, SourceDocument] = {}
    for doc in documents:
        if doc.doc_id in by_id:
            raise ValueError(f"duplicate doc_id {doc.doc_id!r}")
        by_id[doc.doc_id] = doc

    components = sorted(
        (sorted(c, key=_rank) for c in _components(by_id)), key=lambda c: _rank(c[0])
    )
    family_of: dict[str, str] = {}
    claimed: set[str] = set()
    undecided: list[list[SourceDocument]] = []

    # Explicit families, inheritance and the identity map first: they never conflict.
    for members in components:
        explicit = {_explicit(doc) for doc in members if doc.family is not None}
        for doc in members:
            if doc.family is not None:
                family_of[doc.doc_id] = _explicit(doc)
        claimed |= explicit
        rest = [doc for doc in members if doc.family is None]
        if not rest:
            continue
        if len(explicit) == 1:
            _assign(family_of, rest, next(iter(explicit)))
            continue
        known = _most_known(rest, known_by_key)
        if known is not None:
            _assign(family_of, rest, known)
            claimed.add(known)
            continue
        undecided.append(rest)

    # Then body hashes (moved notes), first come first served in root order; then new ids.
    hash_counts = Counter(doc.content_hash for doc in documents)
    fresh: list[list[SourceDocument]] = []
    for rest in undecided:
        moved = next(
            (
                known_by_hash[doc.content_hash]
                for doc in rest
                if hash_counts[doc.content_hash] == 1
                and doc.content_hash in known_by_hash
                and known_by_hash[doc.content_hash] not in claimed
            ),
            None,
        )
        if moved is None:
            fresh.append(rest)
            continue
        _assign(family_of, rest, moved)
        claimed.add(moved)

    taken = claimed | set(known_by_key.values()) | set(known_by_hash.values())
    for rest in fresh:
        root = rest[0]
        base = candidate = f"{root.source}:{root.source_key}"
        suffix = 1
        while candidate in taken:
            suffix += 1
            candidate = f"{base}~{suffix}"
        taken.add(candidate)
        _assign(family_of, rest, candidate)

    ordered = {doc_id: family_of[doc_id] for doc_id in sorted(family_of)}
    new_identities = tuple(
        sorted(
            {
                (doc.source_key, ordered[doc.doc_id])
                for doc in documents
                if known_by_key.get(doc.source_key) != ordered[doc.doc_id]
            }
        )
    )
    return FamilyAssignment(family_of=MappingProxyType(ordered), new_identities=new_identities)


def _most_known(members: Sequence[SourceDocument], known_by_key: Mapping[str, str]) -> str | None:
    """The known family that already holds the most of ``members`` (ties: the one of the
    lowest-ranked member), so joining two families moves the fewest documents."""
    held = Counter(known_by_key[d.source_key] for d in members if d.source_key in known_by_key)
    if not held:
        return None
    first: dict[str, int] = {}
    for d in members:  # members are in rank order
        family = known_by_key.get(d.source_key)
        if family is not None:
            first.setdefault(family, len(first))
    return min(held, key=lambda family: (-held[family], first[family]))


def _rank(doc: SourceDocument) -> tuple[int, int, str, str]:
    """Sort key of a family's root: lowest version first (missing last), then source_key."""
    if doc.version is None:
        return (1, 0, doc.source_key, doc.doc_id)
    return (0, doc.version, doc.source_key, doc.doc_id)


def _explicit(doc: SourceDocument) -> str:
    return f"{doc.source}:{doc.family}"


def _assign(family_of: dict[str, str], docs: Iterable[SourceDocument], family: str) -> None:
    for doc in docs:
        family_of[doc.doc_id] = family


def _components(by_id: Mapping[str, SourceDocument]) -> list[list[SourceDocument]]:
    """Connected components of the undirected graph of declared successors (links out of it
    ignored)."""
    parent = {doc_id: doc_id for doc_id in by_id}

    def find(node: str) -> str:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for doc in by_id.values():
        for successor in doc.declared_successors:
            if successor in by_id:
                a, b = find(doc.doc_id), find(successor)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[str, list[SourceDocument]] = {}
    for doc_id, doc in by_id.items():
        groups.setdefault(find(doc_id), []).append(doc)
    return list(groups.values())
