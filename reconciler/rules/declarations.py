"""A person's declarations read as a source: what they add to what the systems of record say.

``reconciler declare`` records decisions nobody's system of record holds (this document was
replaced by that one; these documents are versions of one family). Every run reads them beside
the sources, through ``overlay``, one pure function, so the engine judges a declared document as
it judges any document its source speaks for: the family check derives its row, the time rule
settles its family, and membership moves it.

Precedence (docs/engine.md, "Declarations"): **a system of record's own declaration wins**. A
declaration fills in only what the document's source leaves unsaid:

- ``supersede A by B`` applies when A's source names no successor of A, gives A no state
  of its own (an explicit ``current``, ``pending``, ``draft`` or ``retired``), and does not
  say the reverse (B superseded by A); a link that would close a cycle never applies;
- ``A in family F`` applies when A's source neither declares a family for A nor links it to
  other documents (its links make its family), unless they give it F already;

and where the source says otherwise, the declaration is not applied and is a *conflict*
(``family/declaration_conflict``, a warning that names both). A document whose source is not
configured at all (rows adopted by ``bootstrap``, say) has only its row and its declarations:
its row stands in for what a source would say (its dates, version, class, and a state that is
not the time rule's own: ``unknown`` and a ``superseded`` that names its successor are
derived again), with the declared links and family on top. A document whose configured source
could not be read this run waits: its declarations are neither applied nor in conflict.

Families follow the links, as they do in a source: the families a declared link joins become
one, with the id of the one declared explicitly (by a declaration or by the source), else of
the one that already holds the most of their members (ties: the one holding the oldest
version), so the fewest documents move.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.model import (
    OPEN_END,
    OPEN_START,
    Declaration,
    DeclarationKind,
    Document,
    SourceDocument,
    VersionState,
    utc,
)

__all__ = ["Conflict", "Overlay", "overlay", "synthesized"]

#: States a row carries as its own word, not as the time rule's answer (see ``synthesized``).
_OWN_STATES = frozenset(
    {VersionState.CURRENT, VersionState.PENDING, VersionState.DRAFT, VersionState.RETIRED}
)
#: States never in force: a successor in one of them closes nothing (``rules.time_rule``).
_NEVER = frozenset({VersionState.DRAFT, VersionState.RETIRED})


@dataclass(frozen=True)
class Conflict:
    """A declaration that is not applied this run, and why, reported on ``doc_id``."""

    declaration: Declaration
    doc_id: str
    message: str


@dataclass(frozen=True)
class Overlay:
    """What the declarations add to one run's reading of the sources."""

    #: doc_id -> the source document to judge it by (a source's, with declared successors
    #: added; or made from the row for a document no configured source holds).
    documents: Mapping[str, SourceDocument] = field(default_factory=dict)
    #: doc_id -> the family it belongs to now, where declarations move it.
    family_of: Mapping[str, str] = field(default_factory=dict)
    #: doc_id -> why it belongs there, in words (the ``membership_changed`` finding's).
    because: Mapping[str, str] = field(default_factory=dict)
    conflicts: tuple[Conflict, ...] = ()
    #: Sources no connector reads, whose documents are judged from their declarations.
    declared_only: frozenset[str] = frozenset()
    #: The declarations that took effect (the others conflict, wait for their source, or
    #: repeat what the source says).
    applied: frozenset[str] = frozenset()


def synthesized(
    row: Document, successors: Sequence[str] = (), family: str | None = None
) -> SourceDocument:
    """The source document a row stands for when no configured source holds it: its own
    values, with a state only where the row holds one of its own (``current``, ``pending``,
    ``draft``, ``retired``, and a ``superseded`` that names no successor); an ``unknown`` or a
    ``superseded`` by a named successor is derived again by the time rule from the links
    (``successors`` first, then the row's own ``superseded_by``)."""
    links = list(dict.fromkeys([*successors, *([row.superseded_by] if row.superseded_by else [])]))
    links = [link for link in links if link != row.doc_id]
    state: VersionState | None
    if row.version_state in _OWN_STATES:
        state = row.version_state
    elif row.version_state is VersionState.SUPERSEDED and not links:
        state = VersionState.SUPERSEDED
    else:
        state = None
    return SourceDocument(
        source=row.source,
        source_key=row.source_key,
        doc_id=row.doc_id,
        content_hash=row.source_hash or "",
        family=family,
        version=row.doc_version,
        state=state,
        effective_from=row.effective_from,
        effective_to=None if row.effective_to == OPEN_END else row.effective_to,
        superseded_by=links[0] if links else None,
        title=row.title,
        doc_class=row.doc_class,
        successors=tuple(links) if len(links) > 1 else (),
    )


def overlay(
    declarations: Iterable[Declaration],
    *,
    rows: Mapping[str, Document],
    sources: Mapping[str, SourceDocument],
    family_of: Mapping[str, str],
    configured: frozenset[str],
    read: frozenset[str],
) -> Overlay:
    """What ``declarations`` add to a run (see the module docstring).

    ``rows``: the row of every declared document and of every member of their families
    (``families_touched`` names them); ``sources``: the documents the sources read this run
    (by id), and ``family_of`` the families they gave them; ``configured``: the names of the
    configured sources, ``read`` those read this run."""
    declared = sorted(declarations, key=lambda d: (d.declared_at, d.id))
    conflicts: list[Conflict] = []
    applied: set[str] = set()

    def standing(doc_id: str) -> str:
        row = rows.get(doc_id)
        if row is None:
            return "missing"
        if row.source not in configured:
            return "declared"
        return "read" if row.source in read and doc_id in sources else "waiting"

    def conflict(decl: Declaration, doc_id: str, message: str) -> None:
        conflicts.append(Conflict(decl, doc_id, message))

    # -- families declared for one document ------------------------------------------------
    linked = _linked_in_sources(sources)
    explicit_family: dict[str, str] = {}
    family_decl: dict[str, Declaration] = {}
    for decl in (d for d in declared if d.kind is DeclarationKind.FAMILY):
        where = standing(decl.doc_id)
        if where in ("missing", "waiting"):
            continue
        if where == "read":
            src = sources[decl.doc_id]
            given = family_of.get(decl.doc_id)
            own = _source_family(src)
            if own is not None and own != decl.target:
                conflict(decl, decl.doc_id, f"its source declares family {own!r}")
                continue
            if own is None and decl.doc_id in linked and given != decl.target:
                conflict(
                    decl,
                    decl.doc_id,
                    f"its source links it to other documents, which place it in {given!r}",
                )
                continue
        explicit_family[decl.doc_id] = decl.target
        family_decl[decl.doc_id] = decl
        applied.add(decl.id)

    # -- links -------------------------------------------------------------------------------
    successors: dict[str, list[str]] = defaultdict(list)  # declared, applied
    link_decl: dict[tuple[str, str], Declaration] = {}
    for decl in (d for d in declared if d.kind is DeclarationKind.SUPERSEDE):
        old, new = decl.doc_id, decl.target
        ends = (standing(old), standing(new))
        if "missing" in ends or "waiting" in ends or old == new:
            continue
        src_old = sources.get(old) if ends[0] == "read" else None
        src_new = sources.get(new) if ends[1] == "read" else None
        if src_old is not None and new in src_old.declared_successors:
            continue  # the source says so itself
        if src_new is not None and old in src_new.declared_successors:
            conflict(decl, old, f"its source declares the reverse: {new} is superseded by {old}")
            continue
        if src_old is not None and src_old.declared_successors:
            named = ", ".join(src_old.declared_successors)
            conflict(decl, old, f"its source declares it superseded by {named}, not by {new}")
            continue
        if src_old is not None and src_old.state not in (None, VersionState.SUPERSEDED):
            conflict(decl, old, f"its source declares it {src_old.state}")
            continue
        if _reaches(new, old, sources, successors, rows):
            conflict(decl, old, f"superseding it by {new} would close a cycle of supersession")
            continue
        if not _leads_somewhere(new, sources, successors, rows):
            conflict(
                decl,
                old,
                f"{new} is superseded and no version it names is or will be in force: "
                "superseding it by that would leave nothing served",
            )
            continue
        successors[old].append(new)
        link_decl[(old, new)] = decl
        applied.add(decl.id)

    # -- families joined by the links ------------------------------------------------------------
    def family(doc_id: str) -> str:
        if doc_id in explicit_family:
            return explicit_family[doc_id]
        if doc_id in family_of:
            return family_of[doc_id]
        return rows[doc_id].doc_family_id

    explicit = set(explicit_family.values())
    for old, news in successors.items():
        for doc_id in (old, *news):
            end = sources.get(doc_id)
            if end is not None and (own := _source_family(end)) is not None:
                explicit.add(own)
    parent: dict[str, str] = {}
    #: root -> the explicitly declared families its group holds.
    held: dict[str, set[str]] = {}

    def find(node: str) -> str:
        if node not in parent:
            parent[node] = node
            held[node] = {node} & explicit
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for old, news in successors.items():
        for new in news:
            a, b = find(family(old)), find(family(new))
            if a == b:
                continue
            if len(held[a] | held[b]) > 1:
                conflict(
                    link_decl[(old, new)],
                    old,
                    f"it links two declared families ({', '.join(sorted(held[a] | held[b]))}): "
                    "they stay apart, and the link crosses them",
                )
                continue
            keep, gone = min(a, b), max(a, b)
            parent[gone] = keep
            held[keep] |= held.pop(gone)

    members: dict[str, set[str]] = defaultdict(set)
    for doc_id in rows:
        members[family(doc_id)].add(doc_id)
    for doc_id, given in family_of.items():
        if given in parent or doc_id in explicit_family:
            members[family(doc_id)].add(doc_id)
    groups: dict[str, list[str]] = defaultdict(list)
    for node in list(parent):
        groups[find(node)].append(node)
    target: dict[str, str] = {}
    for group in groups.values():
        chosen = _chosen(group, explicit, members, rows)
        for node in group:
            target[node] = chosen

    # -- what each document becomes ----------------------------------------------------------
    moved: dict[str, str] = {}
    because: dict[str, str] = {}
    for doc_id in {*explicit_family, *(d for f in target for d in members.get(f, ()))}:
        if standing(doc_id) == "waiting":
            continue  # its source was not read: it stays where it is until it is
        now = target.get(family(doc_id), family(doc_id))
        before = family_of.get(doc_id) or (rows[doc_id].doc_family_id if doc_id in rows else None)
        if now == before and doc_id not in explicit_family:
            continue
        moved[doc_id] = now
        if doc_id in family_decl:
            d = family_decl[doc_id]
            because[doc_id] = f"declaration {d.id} by {d.declared_by} places it in {d.target!r}"
        else:
            because[doc_id] = "a declared link joins its family to " + repr(now)
    for (old, new), d in link_decl.items():
        for doc_id in (old, new):
            if doc_id in moved and doc_id not in family_decl:
                because[doc_id] = f"declaration {d.id} by {d.declared_by} supersedes {old} by {new}"

    documents: dict[str, SourceDocument] = {}
    declared_only: set[str] = set()
    touched = {*moved, *successors, *(n for news in successors.values() for n in news)}
    for doc_id in sorted(touched):
        row = rows.get(doc_id)
        read_doc = sources.get(doc_id)
        if read_doc is not None:
            if successors.get(doc_id):
                links = list(dict.fromkeys([*read_doc.declared_successors, *successors[doc_id]]))
                documents[doc_id] = dataclasses.replace(
                    read_doc,
                    superseded_by=links[0],
                    successors=tuple(links) if len(links) > 1 else (),
                )
            continue
        if row is None or row.source in configured:
            continue
        documents[doc_id] = synthesized(row, successors.get(doc_id, ()))
        declared_only.add(row.source)
    return Overlay(
        documents=documents,
        family_of=moved,
        because=because,
        conflicts=tuple(conflicts),
        declared_only=frozenset(declared_only),
        applied=frozenset(applied),
    )


def families_touched(
    declarations: Iterable[Declaration],
    rows: Mapping[str, Document],
    family_of: Mapping[str, str],
) -> set[str]:
    """The families whose members ``overlay`` needs to see: those of the declared documents
    (as their source or row gives them) and those declared."""
    touched: set[str] = set()
    for decl in declarations:
        ends = (decl.doc_id, decl.target) if decl.kind is DeclarationKind.SUPERSEDE else ()
        for doc_id in ends or (decl.doc_id,):
            if doc_id in family_of:
                touched.add(family_of[doc_id])
            elif doc_id in rows:
                touched.add(rows[doc_id].doc_family_id)
        if decl.kind is DeclarationKind.FAMILY:
            touched.add(decl.target)
    return touched


def _source_family(src: SourceDocument) -> str | None:
    """The family a source declares outright (``rules.identity``'s explicit family)."""
    return f"{src.source}:{src.family}" if src.family is not None else None


def _linked_in_sources(sources: Mapping[str, SourceDocument]) -> set[str]:
    """The documents a source links to others (either end of a declared successor)."""
    linked: set[str] = set()
    for doc_id, src in sources.items():
        for successor in src.declared_successors:
            if successor != doc_id:
                linked.update((doc_id, successor))
    return linked


def _reaches(
    start: str,
    goal: str,
    sources: Mapping[str, SourceDocument],
    declared: Mapping[str, list[str]],
    rows: Mapping[str, Document],
) -> bool:
    """Whether ``goal`` is reached from ``start`` by supersession links (the sources', the
    declared ones taken so far, and the rows' own)."""
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        src = sources.get(node)
        nexts = list(src.declared_successors) if src is not None else []
        row = rows.get(node)
        if src is None and row is not None and row.superseded_by:
            nexts.append(row.superseded_by)
        nexts += declared.get(node, ())
        for step in nexts:
            if step not in seen:
                seen.add(step)
                stack.append(step)
    return False


def _leads_somewhere(
    start: str,
    sources: Mapping[str, SourceDocument],
    declared: Mapping[str, list[str]],
    rows: Mapping[str, Document],
) -> bool:
    """Whether a version declared as a successor leaves something served: it is (or will be)
    in force itself, or one of the successors it names is, through any chain; a draft or
    retired one never comes into force, and the time rule then closes nothing by it. A
    ``superseded`` version that names no successor (PEP 6) leads nowhere."""

    def never(doc_id: str) -> bool:
        src = sources.get(doc_id)
        if src is not None:
            return src.state in _NEVER
        row = rows.get(doc_id)
        return row is not None and row.version_state in _NEVER

    def successors_of(doc_id: str) -> list[str]:
        src = sources.get(doc_id)
        found = list(src.declared_successors) if src is not None else []
        row = rows.get(doc_id)
        if src is None and row is not None and row.superseded_by:
            found.append(row.superseded_by)
        return [s for s in (*found, *declared.get(doc_id, ())) if s != doc_id]

    if never(start):
        return True
    seen: set[str] = set()
    stack = [start]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        ahead = [s for s in successors_of(node) if not never(s) and (s in sources or s in rows)]
        if ahead:
            stack += ahead
            continue
        src = sources.get(node)
        state = src.state if src is not None else rows[node].version_state
        if state is not VersionState.SUPERSEDED:
            return True
    return False


def _chosen(
    group: Sequence[str],
    explicit: set[str],
    members: Mapping[str, set[str]],
    rows: Mapping[str, Document],
) -> str:
    """The id a group of joined families keeps: the declared one, else the one holding the
    most members (ties: the one holding the oldest version, then the lowest id)."""
    held = [f for f in group if f in explicit]
    if len(held) == 1:
        return held[0]

    def oldest(family: str) -> tuple[object, ...]:
        ranks = [
            (utc(r.effective_from) if r.effective_from else OPEN_START, r.doc_version, r.doc_id)
            for d in members.get(family, ())
            if (r := rows.get(d)) is not None
        ]
        return min(ranks) if ranks else (OPEN_END, 0, "")

    return min(group, key=lambda f: (-len(members.get(f, ())), oldest(f), f))
