"""Which family each registered document belongs to now, as the sources imply it, and how a
run's stages follow a document that changes family.

A row's ``doc_family_id`` was given at registration; the source may have moved it since (an
explicit ``family`` added later, a link that now joins two families: ``rules.identity``
decides). The family check is run over each family as the source now has it, so a document
moving from G to F is checked in F's view (the family check reports it and the time rule
settles F with it), and G's view goes on without it:

- ``target``: the family a row belongs to now (its own when its source was not read).
- ``moves``: the rows of a stream whose target is not their family.
- ``widen``: a scoped run's families, with every family a move joins or leaves, so that
  ``repair --family F`` moves a document out of F or into it, and settles both.
- ``regroup``: the rows of the families a move touches, by target.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter

from reconciler.model import Document
from reconciler.pipeline.scope_rows import ScopeRows
from reconciler.pipeline.values import SourcesRead
from reconciler.ports import DocumentReader

#: Rows looked up by id at once.
LOOKUP = 500
#: How a view's rows are ordered (as the table streams them: version, then id).
_ORDER = attrgetter("doc_version", "doc_id")


def target(row: Document, sources: SourcesRead) -> str:
    """The family ``row`` belongs to now: what its source implies, else its own."""
    return sources.family_of.get(row.doc_id, row.doc_family_id)


def moves(rows: Iterable[Document], sources: SourcesRead) -> dict[str, str]:
    """doc_id -> target family, for the rows of ``rows`` that belong elsewhere now."""
    if not sources.family_of:
        return {}
    return {
        row.doc_id: family for row in rows if (family := target(row, sources)) != row.doc_family_id
    }


def members_by_family(sources: SourcesRead) -> dict[str, set[str]]:
    """family -> the doc ids the sources place in it (registered or not)."""
    members: dict[str, set[str]] = defaultdict(set)
    for doc_id, family in sources.family_of.items():
        members[family].add(doc_id)
    return members


def widen(
    table: DocumentReader, scope: frozenset[str], sources: SourcesRead, *, batch: int = 1000
) -> frozenset[str]:
    """``scope`` with every family a document moves to or from, until no move leaves it."""
    if not sources.family_of:
        return scope
    members = members_by_family(sources)
    # (the families of the rows a scoped run read already: a joining document among them is
    # not looked up again; ``held`` is the table's answer to the same question, read earlier
    # in the run, before anything was written)
    held: dict[str, str] = {}
    if isinstance(table, ScopeRows):
        held = {row.doc_id: row.doc_family_id for row in table.rows}
    widened, frontier = set(scope), set(scope)
    while frontier:
        found: set[str] = set()
        for row in table.iter_documents(batch_size=batch, families=sorted(frontier)):
            found.add(target(row, sources))  # a document leaving the scope
        joining = []
        for doc_id in sorted({d for family in frontier for d in members.get(family, ())}):
            if doc_id in held:
                found.add(held[doc_id])
            else:
                joining.append(doc_id)
        for start in range(0, len(joining), LOOKUP):
            found.update(  # a registered document joining the scope from outside it
                row.doc_family_id
                for row in table.get_documents(joining[start : start + LOOKUP]).values()
            )
        frontier = found - widened
        widened |= frontier
    return frozenset(widened)


def incoming(
    table: DocumentReader,
    doc_ids: list[str],
    sources: SourcesRead,
    wanted: Callable[[str], bool],
    moving: bool = True,
) -> tuple[set[str], list[Document]]:
    """Of ``doc_ids`` (documents in the sources with no row in this run's scan): those that
    have a row somewhere, and the rows of those that move into a family ``wanted`` (owned by
    this shard and in scope; none unless ``moving``). Looked up ``LOOKUP`` at a time."""
    registered: set[str] = set()
    rows: list[Document] = []
    for start in range(0, len(doc_ids), LOOKUP):
        for doc_id, row in table.get_documents(doc_ids[start : start + LOOKUP]).items():
            registered.add(doc_id)
            family = target(row, sources)
            if moving and family != row.doc_family_id and wanted(family):
                rows.append(row)
    return registered, rows


def regroup(
    rows: Iterable[Document], moved: Mapping[str, str], wanted: Callable[[str], bool]
) -> dict[str, tuple[Document, ...]]:
    """``rows`` by the family each belongs to now (``moved``: doc_id -> target). A row moving
    to a family this run does not cover (another shard's) is left out: that shard's run takes
    it (``incoming``)."""
    by_target: dict[str, list[Document]] = defaultdict(list)
    for row in rows:
        destination = moved.get(row.doc_id, row.doc_family_id)
        if destination == row.doc_family_id or wanted(destination):
            by_target[destination].append(row)
    return {family: tuple(sorted(group, key=_ORDER)) for family, group in by_target.items()}
