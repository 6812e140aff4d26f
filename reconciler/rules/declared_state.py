"""What a document row should say, derived from what its system of record declares.

One pure rule used by the reference ingestion when it registers a document, and by the family
check when it decides whether a row has drifted; so the two never disagree.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from reconciler.model import (
    OPEN_END,
    OPEN_START,
    SERVABLE_STATES,
    Document,
    SourceDocument,
    VersionState,
    utc,
)
from reconciler.rules.time_rule import NEVER_IN_FORCE, settle, successor_links


def declared_state(source_doc: SourceDocument, *, as_of: datetime) -> VersionState:
    """The state a source document declares at ``as_of``.

    An explicit ``status`` wins, except that an approved (``current``) version whose
    ``effective_from`` is still ahead is ``pending``. With no status, a version that names a
    successor is ``superseded``; anything else is ``unknown`` — the honest state of an
    undeclared document.
    """
    state = source_doc.state
    if state is None:
        state = VersionState.SUPERSEDED if source_doc.superseded_by else VersionState.UNKNOWN
    if (
        state in (VersionState.CURRENT, VersionState.PENDING)
        and source_doc.effective_from is not None
    ):
        started = utc(source_doc.effective_from) <= utc(as_of)
        state = VersionState.CURRENT if started else VersionState.PENDING
    return state


def declared_document(
    source_doc: SourceDocument,
    *,
    family: str,
    as_of: datetime,
    successor: SourceDocument | Document | None = None,
    version: int | None = None,
    registered: Document | None = None,
) -> Document:
    """The document row ``source_doc`` declares, before the time rule places it in its family.

    A version that names a successor whose start is known (``successor``: of several, the one
    ``closing_successor`` picks) is a servable one
    until then: ``current`` when the source declares states, ``unknown`` when it declares
    none. It keeps ``superseded_by`` (the time rule reads it) and its ``effective_to`` is
    closed at the successor's start. A successor that is a draft or retired never comes into
    force: it closes nothing, and the link is dropped (the family's order decides). Without a
    known successor, a declared supersession takes effect at once. ``effective_to`` is
    otherwise the declared one, else the open-end sentinel (never null). ``version`` is the
    ordinal to use when the source declares none. ``registered``: the document's row, whose
    hash, quarantine and ingestion instants the declared row keeps (what the source does not
    say), set as the row is built rather than copied onto it after.
    """
    state = declared_state(source_doc, as_of=as_of)
    link = successor.doc_id if successor is not None else source_doc.superseded_by
    start = utc(source_doc.effective_from) if source_doc.effective_from else None
    effective_to = utc(source_doc.effective_to) if source_doc.effective_to else OPEN_END
    if link is not None and successor is not None:
        if state is VersionState.SUPERSEDED:
            state = VersionState.CURRENT if source_doc.state is not None else VersionState.UNKNOWN
            if state is VersionState.CURRENT and start is not None and start > utc(as_of):
                state = VersionState.PENDING
        if _never_in_force(successor):
            link = None
        elif successor.effective_from is not None:
            # Closed at the successor's start, never before its own.
            closing = max(utc(successor.effective_from), start or OPEN_START)
            effective_to = min(effective_to, closing)
        else:
            effective_to = min(effective_to, start or OPEN_START)
    keeps_link = state is VersionState.SUPERSEDED or state in SERVABLE_STATES
    return Document(
        doc_id=source_doc.doc_id,
        source=source_doc.source,
        source_key=source_doc.source_key,
        doc_family_id=family,
        doc_version=source_doc.version if source_doc.version is not None else (version or 1),
        version_state=state,
        superseded_by=link if keeps_link else None,
        effective_from=start,
        effective_to=effective_to,
        doc_class=source_doc.doc_class,
        title=source_doc.title,
        source_hash=source_doc.content_hash if registered is None else registered.source_hash,
        quarantined=False if registered is None else registered.quarantined,
        quarantine_reason=None if registered is None else registered.quarantine_reason,
        ingested_at=None if registered is None else registered.ingested_at,
        updated_at=None if registered is None else registered.updated_at,
    )


def closing_successor(
    source_doc: SourceDocument, find: Callable[[str], SourceDocument | Document | None]
) -> SourceDocument | Document | None:
    """Of the successors ``source_doc`` declares, the one whose start closes its window: the
    earliest to come into force (by start, then id), else the first found (one never in
    force: it closes nothing); ``find`` looks a successor up (source document or row)."""
    found = [
        target
        for named in source_doc.declared_successors
        if named != source_doc.doc_id and (target := find(named)) is not None
    ]
    in_force = [target for target in found if not _never_in_force(target)]
    if in_force:
        return min(
            in_force,
            key=lambda t: (utc(t.effective_from) if t.effective_from else OPEN_START, t.doc_id),
        )
    return found[0] if found else None


def _never_in_force(doc: SourceDocument | Document) -> bool:
    """Whether the source declares ``doc`` a draft or retired (a row's state is the rule's
    answer, not a declaration: a successor known only by its row still closes the window)."""
    return isinstance(doc, SourceDocument) and doc.state in NEVER_IN_FORCE


def expected_document(
    source_doc: SourceDocument,
    *,
    family: str,
    as_of: datetime,
    successor: SourceDocument | Document | None = None,
    version: int | None = None,
) -> Document:
    """The document row that ``source_doc`` implies at ``as_of`` on its own (ingest
    bookkeeping fields left empty): ``declared_document`` with the time rule applied to it
    alone. The family check applies the rule to the whole family instead.
    """
    declared = declared_document(
        source_doc, family=family, as_of=as_of, successor=successor, version=version
    )
    return settle([declared], as_of)[declared.doc_id]


def family_rows(
    documents: Iterable[SourceDocument],
    *,
    family_of: Mapping[str, str],
    as_of: datetime,
    registered: Mapping[str, Document],
    version_of: Mapping[str, int],
    unknown_siblings: str = "supersede",
) -> dict[str, Document]:
    """The row each of ``documents`` that is not ``registered`` implies at ``as_of``
    (``expected_document``, ingest bookkeeping fields left empty), with the window end its
    family gives it when that is still to come.

    The time rule over the whole family (the family check's derivation: its registered members
    as they stand, the others as their source declares them) closes a version's window at the
    start of its successor. When that start is ahead, closing it hides nothing now, and the
    first check would write it (``dates/successor_scheduled``): the row takes it. A successor
    already in force is left to the reconciler: superseding the older version is drift it
    reports and repairs, as the ingestion never supersedes.

    ``version_of``: the ordinal of each document that declares none."""
    members: dict[str, list[SourceDocument]] = defaultdict(list)
    by_id: dict[str, SourceDocument] = {}
    for doc in documents:
        members[family_of[doc.doc_id]].append(doc)
        by_id[doc.doc_id] = doc
    rows: dict[str, Document] = {}
    for family, docs in members.items():
        inputs = []
        for doc in docs:
            row = registered.get(doc.doc_id)
            if row is None:
                row = declared_document(
                    doc,
                    family=family,
                    as_of=as_of,
                    successor=closing_successor(doc, by_id.get),
                    version=version_of.get(doc.doc_id),
                )
            inputs.append(row)
        settled = settle(
            inputs, as_of, unknown_siblings=unknown_siblings, links=successor_links(docs)
        )
        for doc, declared in zip(docs, inputs, strict=True):
            if doc.doc_id in registered:
                continue
            alone = settle([declared], as_of)[doc.doc_id]
            together = settled[doc.doc_id]
            if (
                together.version_state is alone.version_state
                and as_of < together.effective_to < alone.effective_to
            ):
                alone = dataclasses.replace(alone, effective_to=together.effective_to)
            rows[doc.doc_id] = alone
    return rows


#: ``SourceDocument`` fields a registered row can stand in for, when the connector could not
#: read them (a typo is taken as absent; absent would change what the row says). Not
#: ``superseded_by``: a row's successor may be one the time rule inferred, not one the source
#: declared, and a link that names nothing leaves the order of the family to decide. Not
#: ``state`` either: the row's state is the rule's answer, not a declaration; the family check
#: keeps all of the row's state fields instead.
_REGISTERED: dict[str, Callable[[Document], object]] = {
    "version": lambda row: row.doc_version,
    "effective_from": lambda row: row.effective_from,
    "effective_to": lambda row: None if row.effective_to == OPEN_END else row.effective_to,
    "title": lambda row: row.title,
    "doc_class": lambda row: row.doc_class,
}


def with_registered(
    source_doc: SourceDocument, row: Document, fields: Iterable[str]
) -> SourceDocument:
    """``source_doc`` with each of ``fields`` (those the connector could not read) taken from
    the document's registered row, so a typo never changes what the row says."""
    values = {name: _REGISTERED[name](row) for name in fields if name in _REGISTERED}
    return dataclasses.replace(source_doc, **values) if values else source_doc  # type: ignore[arg-type]


def ordinals_by_family(
    documents: Iterable[SourceDocument], family_of: Mapping[str, str]
) -> dict[str, int]:
    """``version_ordinals`` of every family of ``documents`` (``family_of``: id -> family)."""
    families: dict[str, list[SourceDocument]] = defaultdict(list)
    for doc in documents:
        families[family_of[doc.doc_id]].append(doc)
    ordinals: dict[str, int] = {}
    for members in families.values():
        ordinals.update(version_ordinals(members))
    return ordinals


def version_ordinals(documents: list[SourceDocument]) -> dict[str, int]:
    """Ordinals for one family's documents that declare no ``version``.

    Declared versions are kept; undeclared ones follow the time order: ``effective_from`` (a
    missing start first, as the time rule orders), then the supersession links (a version
    comes after every one it supersedes, through any chain), then id.
    """
    ids = {d.doc_id for d in documents}
    predecessors: dict[str, list[str]] = defaultdict(list)
    for doc in documents:
        for named in doc.declared_successors:
            if named in ids and named != doc.doc_id:
                predecessors[named].append(doc.doc_id)
    depth: dict[str, int] = {}
    for doc in documents:
        # The longest chain of predecessors behind it (cycles were dropped by the source;
        # a visited set guards anyway).
        depth[doc.doc_id] = _depth(doc.doc_id, predecessors, depth, set())
    order = sorted(
        documents,
        key=lambda d: (
            utc(d.effective_from) if d.effective_from else OPEN_START,
            depth[d.doc_id],
            d.doc_id,
        ),
    )
    ordinals: dict[str, int] = {}
    for position, doc in enumerate(order, start=1):
        ordinals[doc.doc_id] = doc.version if doc.version is not None else position
    return ordinals


def _depth(
    node: str, predecessors: Mapping[str, list[str]], depth: dict[str, int], seen: set[str]
) -> int:
    """How many versions stand before ``node`` on its longest chain of predecessors."""
    stack = [(node, iter(predecessors.get(node, ())))]
    seen.add(node)
    best: dict[str, int] = {node: 0}
    while stack:
        current, pending = stack[-1]
        step = next(pending, None)
        if step is None:
            stack.pop()
            depth[current] = best[current]
            if stack:
                parent = stack[-1][0]
                best[parent] = max(best[parent], best[current] + 1)
            continue
        if step in depth:
            best[current] = max(best[current], depth[step] + 1)
        elif step not in seen:
            seen.add(step)
            best[step] = 0
            stack.append((step, iter(predecessors.get(step, ()))))
    return depth[node]
