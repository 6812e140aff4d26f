"""Time applied to a family's versions: the one rule the family, dates and siblings checks share.

Keeping it in one place is what makes repairs converge: every check that changes a version's
state asks this module what the family should look like, so no two checks pull one document
in different directions.

The rule (docs/engine.md, "The one time rule"):

- ``current``, ``pending`` and ``unknown`` versions are *servable* and take part alike;
- versions are ordered by ``(effective_from, version, doc_id)``, a missing start first;
- a servable version's window closes at the earliest of its own ``effective_to``, the start of
  the successor it declares (``superseded_by``), and the start of its *immediate* successor in
  that order; it keeps its state until then: only ``effective_to`` is written early, so the
  payloads stay right at every instant until the source changes, with no run in between;
- once its window has closed it is ``superseded`` by the successor it declares, else by its
  immediate successor, or ``retired`` when it has neither;
- ``pending`` becomes ``current`` at its start, and a ``current`` version not yet started is
  ``pending``.

Superseded versions that name their successor stay on the timeline as boundaries (an earlier
version ends where they began); drafts and retired versions never do, and a declared
successor that is one of them closes nothing. ``[policy] unknown_siblings = "report"`` leaves
an ``unknown`` version open beside later ``unknown`` ones (the siblings check reports them).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.model import (
    OPEN_END,
    OPEN_START,
    SERVABLE_STATES,
    Document,
    SourceDocument,
    VersionState,
    parse_instant,
    replaced,
)

#: ``[policy] unknown_siblings``: supersede an ``unknown`` version by a later ``unknown``
#: sibling (the default), or only report the two (a team that moves them out by hand).
UNKNOWN_SIBLINGS_POLICIES: tuple[str, ...] = ("supersede", "report")

_SERVABLE = frozenset(SERVABLE_STATES)
_SERVABLE_NAMES = frozenset(str(state) for state in SERVABLE_STATES)
#: The stored texts of the servable states.
SERVABLE_NAMES = _SERVABLE_NAMES


def start_of(doc: Document) -> datetime:
    """When a version comes into force; a missing start is the beginning of time."""
    return doc.effective_from or OPEN_START


def order_key(doc: Document) -> tuple[datetime, int, str]:
    """The time rule's order: a later start wins, then the higher version, then the id."""
    return (start_of(doc), doc.doc_version, doc.doc_id)


def served_at(
    state: object, start: datetime, end: datetime, quarantined: bool, instant: datetime
) -> bool:
    """Whether ``default_filter(as_of=instant)`` admits a chunk carrying these values."""
    return str(state) in _SERVABLE_NAMES and not quarantined and start <= instant < end


def kept_in_main(state: object) -> bool:
    """Whether the chunks of a version in ``state`` (its row's ``version_state``, or the one
    ``payload_for`` derives from it) belong in the main collection of a split store
    (``[index] archive_collection``), the rest in the archive: the servable versions, in
    force now or still to come. A version whose successor has not started yet keeps its
    state until that start (only its ``effective_to`` is written early), so it stays; once its
    window has closed the rule supersedes it (the ``dates`` schedule writes it), and it moves.
    A quarantine moves nothing: a hold is lifted where the chunks stand."""
    return str(state) in _SERVABLE_NAMES


def row_served(doc: Document, instant: datetime) -> bool:
    """Whether the chunks derived from ``doc`` are served at ``instant``."""
    return served_at(doc.version_state, start_of(doc), doc.effective_to, doc.quarantined, instant)


def payload_served(values: Mapping[str, Any], instant: datetime) -> bool:
    """Whether a chunk with this (logical, managed) payload is served at ``instant``."""
    return served_at(
        values.get("version_state"),
        # An absent or unreadable date matches no range condition: never served.
        payload_instant(values.get("effective_from"), OPEN_END),
        payload_instant(values.get("effective_to"), OPEN_START),
        values.get("quarantined") is True,
        instant,
    )


def payload_instant(value: object, default: datetime) -> datetime:
    """A payload date as an instant; ``default`` when absent or unreadable."""
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError:
            return default
    return default


@dataclass(frozen=True, slots=True)
class Slot:
    """A version's place on its family's timeline."""

    #: Who supersedes it when its window closes (declared first, else the next in order).
    successor: str | None
    #: Its ``effective_to`` under the rule.
    end: datetime


#: A declared successor in one of these states never comes into force: it closes nothing.
NEVER_IN_FORCE = frozenset({VersionState.DRAFT, VersionState.RETIRED})

#: Declared successors by doc id, beyond a document's own ``superseded_by`` (a version may
#: declare several: ``SourceDocument.successors``).
Links = Mapping[str, Sequence[str]]


def successor_links(documents: Iterable[SourceDocument]) -> dict[str, tuple[str, ...]]:
    """The time rule's ``links`` for source documents: the successors each one declares
    (a draft's and a retired version's too: their links join versions into one line)."""
    return {doc.doc_id: doc.declared_successors for doc in documents if doc.declared_successors}


def declared_links(doc: Document, links: Links | None) -> Sequence[str]:
    """The successors ``doc`` declares: those ``links`` gives for it, else its
    ``superseded_by``."""
    if links is not None:
        named = links.get(doc.doc_id)
        if named:
            return named
    return () if doc.superseded_by is None else (doc.superseded_by,)


def _closing(
    doc: Document, named: Sequence[str], by_id: Mapping[str, Document]
) -> tuple[str | None, Document | None]:
    """Of the successors ``doc`` declares, the one that closes it, and its row when it is in
    the family: the earliest of them to come into force (start, then the order). A successor
    never in force closes nothing; one outside the family is kept as named (its start is not
    known here)."""
    inside = [by_id[n] for n in named if n != doc.doc_id and n in by_id]
    in_force = [t for t in inside if t.version_state not in NEVER_IN_FORCE]
    if in_force:
        first = min(in_force, key=order_key)
        return first.doc_id, first
    outside = [n for n in named if n != doc.doc_id and n not in by_id]
    return (outside[0] if outside else None), None


def link_lines(docs: Sequence[Document], links: Links | None) -> dict[str, str]:
    """doc_id -> a representative of its *line*: the versions declared links join (either
    direction; a draft's or retired version's links join too). Versions of one line follow
    their links alone: several may be in force at once (the branches of a fan-out)."""
    parent = {doc.doc_id: doc.doc_id for doc in docs}

    def find(node: str) -> str:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for doc in docs:
        for named in declared_links(doc, links):
            if named in parent:
                a, b = find(doc.doc_id), find(named)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {doc_id: find(doc_id) for doc_id in parent}


def timeline(
    docs: Sequence[Document], *, unknown_siblings: str = "supersede", links: Links | None = None
) -> dict[str, Slot]:
    """Every servable version's successor and window end (doc_id -> slot); pure. The doc ids
    are distinct (a family's rows, or what its source declares for them); ``links`` gives the
    successors each declares when it declares several (``declared_links``).

    The timeline's members are the servable versions and the superseded ones that name a
    successor (boundaries: an earlier version ends where they begin); only the servable ones
    get a slot, the only ones the rule moves. A version's window closes at the earliest of its
    own end, the start of the first of its declared successors to come into force, and the
    start of the next version in the order that no declared link joins to it (another link
    component of the family: versions that links join follow their links alone, so branches
    of a fan-out, the versions of a fan-in and a successor older than its predecessor never
    close one another by their dates). Never before the version's own start.
    """
    by_id = {doc.doc_id: doc for doc in docs}
    # The members, each with its start, its place in the order (``order_key``), the successor
    # it declares and the end that declaration leaves it, worked out once.
    members: list[Document] = []
    starts: list[datetime] = []
    keys: list[tuple[datetime, int, str]] = []
    successors: list[str | None] = []
    ends: list[datetime] = []
    servable = False
    superseded = VersionState.SUPERSEDED
    for doc in docs:
        state = doc.version_state
        named = declared_links(doc, links)
        if state in _SERVABLE:
            servable = True
        elif state is not superseded or not named:
            continue  # drafts, retired versions and undeclared supersessions bound nothing
        start = doc.effective_from or OPEN_START
        end = doc.effective_to
        link, target = _closing(doc, named, by_id) if named else (None, None)
        if target is not None:
            end = min(end, max(target.effective_from or OPEN_START, start))
        members.append(doc)
        starts.append(start)
        keys.append((start, doc.doc_version, doc.doc_id))
        successors.append(link)
        ends.append(end)
    if not servable:
        return {}
    # Versions whose own declaration leaves them an empty window end no one else's.
    # (A stable sort of the members' positions by key: the order ``sorted(key=order_key)``
    # gives.)
    places = sorted((i for i in range(len(members)) if ends[i] > starts[i]), key=keys.__getitem__)
    ordered_keys = [keys[i] for i in places]
    # The link components, worked out only when a servable version has a later one in the
    # order (the usual family's only servable version is its latest: none is needed).
    component: dict[str, str] = {}
    groups: list[str] = []
    other_after: list[int] = []
    slots: dict[str, Slot] = {}
    for i, doc in enumerate(members):
        if doc.version_state not in _SERVABLE:
            continue
        link, end = successors[i], ends[i]
        position = bisect.bisect_right(ordered_keys, keys[i])
        after: Document | None = None
        if position < len(places):
            if not component:
                component = link_lines(docs, links)
                groups = [component[members[place].doc_id] for place in places]
                # For each place, the next place of another link component (len(places):
                # none).
                other_after = [len(places)] * len(places)
                for at in range(len(places) - 2, -1, -1):
                    other_after[at] = (
                        at + 1 if groups[at + 1] != groups[at] else other_after[at + 1]
                    )
            group = component[doc.doc_id]
            if groups[position] == group:
                position = other_after[position]
        if position < len(places):
            after_place = places[position]
            after, after_start = members[after_place], starts[after_place]
            if (
                unknown_siblings == "report"
                and link is None
                and doc.version_state is VersionState.UNKNOWN
                and after.version_state is VersionState.UNKNOWN
            ):
                # Left live beside the later unknown versions; closed by the first later
                # version that is not one of them.
                after = next(
                    (
                        members[place]
                        for at, place in enumerate(places[position:], start=position)
                        if groups[at] != group
                        and members[place].version_state is not VersionState.UNKNOWN
                    ),
                    None,
                )
                if after is not None:
                    after_start = start_of(after)
            if after is not None:
                end = min(end, max(after_start, starts[i]))
        successor = link or (after.doc_id if after is not None else None)
        slots[doc.doc_id] = Slot(successor=successor, end=end)
    return slots


def in_force_winner(docs: Iterable[Document], now: datetime) -> Document | None:
    """The current version in force at ``now``: the latest started one (then version, id)."""
    live = [
        d
        for d in docs
        if d.version_state is VersionState.CURRENT and start_of(d) <= now < d.effective_to
    ]
    if not live:
        return None
    return max(live, key=order_key)


def settle(
    docs: Iterable[Document],
    now: datetime,
    *,
    unknown_siblings: str = "supersede",
    links: Links | None = None,
) -> dict[str, Document]:
    """Return every version as it should stand at ``now`` (doc_id -> document); ``docs`` have
    distinct doc ids.

    Servable versions get their window end from ``timeline`` and keep their state while it
    is open (with ``superseded_by`` empty: only ``effective_to`` is written early); once it
    has closed they are superseded by their successor, or retired without one. Superseded,
    retired and draft versions are kept as they are.

    Idempotent: ``settle(settle(x).values()) == settle(x)``. A version the rule leaves as it
    is comes back as the very object passed in. What the rule makes of one version can change
    what it makes of another (a successor retired never comes into force and closes nothing;
    under ``unknown_siblings = "report"`` a later unknown version, once superseded, is no
    longer one of the unknowns left side by side), so when a pass changes anything the rule is
    applied again to its result, until a pass changes nothing: the state repeated runs would
    reach, in one call.
    """
    docs = list(docs)
    if _left_as_is(docs, now, links):
        return {doc.doc_id: doc for doc in docs}
    if len(docs) == 2:
        linked = _linked_pair(docs[0], docs[1], now, links)
        if linked is not None:
            return linked
    return _settle_full(docs, now, unknown_siblings, links)


def _settle_full(
    docs: list[Document], now: datetime, unknown_siblings: str, links: Links | None
) -> dict[str, Document]:
    """``settle`` of ``docs`` that ``_left_as_is`` does not leave: the rule applied until a
    pass changes nothing."""
    settled = _settle_once(docs, now, unknown_siblings, links)
    for _round in range(len(docs) + 1):
        if all(after is before for after, before in zip(settled.values(), docs, strict=False)):
            break  # nothing changed (the usual case): a fixpoint
        docs = list(settled.values())
        if _left_as_is(docs, now, links):
            break  # a pass would leave every version as it is (told without the timeline)
        again = _settle_once(docs, now, unknown_siblings, links)
        if again == settled:
            break
        settled = again
    return settled


def _linked_pair(
    a: Document, b: Document, now: datetime, links: Links | None
) -> dict[str, Document] | None:
    """``settle`` of the usual family a declaration links (``declare``: an older current
    version declared superseded by a newer one already in force), told without the timeline:
    two current versions, one (``p``) declaring exactly the other (``s``) its successor, ``s``
    declaring none, started after ``p`` began and by ``now``, in force at ``now``, and ``p`` open
    at least until ``s`` starts. The rule then closes ``p`` at ``s``'s start and supersedes it
    by ``s`` (its declared successor, in force), and leaves ``s`` as it is (the latest of the
    timeline, nothing declared): one pass, after which ``_left_as_is`` holds. ``None``: any
    other pair (``settle`` applies the rule in full; ``test_time_rule_pairs`` holds the two
    to the same result)."""
    current = VersionState.CURRENT
    if a.version_state is not current or b.version_state is not current:
        return None
    for p, s in ((a, b), (b, a)):
        if declared_links(s, links):
            continue
        named = declared_links(p, links)
        if len(named) != 1 or named[0] != s.doc_id or p.doc_id == s.doc_id:
            continue
        start_s, start_p = s.effective_from, p.effective_from or OPEN_START
        if start_s is None or not start_p < start_s <= now < s.effective_to:
            return None
        if p.effective_to < start_s:
            return None
        closed = replaced(
            p,
            version_state=VersionState.SUPERSEDED,
            superseded_by=s.doc_id,
            effective_to=min(p.effective_to, max(start_s, start_p)),
        )
        return {a.doc_id: closed if a is p else a, b.doc_id: closed if b is p else b}
    return None


def _left_as_is(docs: Sequence[Document], now: datetime, links: Links | None) -> bool:
    """Whether the rule leaves every version as it is, told without building the timeline:
    the usual family, whose one servable version is already in force or still to come, is the
    latest of the timeline's members in the order (nothing after it can close it), declares no
    successor, and has not reached its own end. Only servable versions ever change, and a
    servable version that nothing follows and that declares no successor has its own
    ``effective_to`` as its window end (``timeline``). ``False`` says nothing: the rule is then
    applied in full."""
    servable: Document | None = None
    for doc in docs:
        if doc.version_state in _SERVABLE:
            if servable is not None:
                return False
            servable = doc
    if servable is None:
        return True  # no timeline: nothing moves
    start = servable.effective_from or OPEN_START
    state = servable.version_state
    if (
        (state is VersionState.PENDING and start <= now)
        or (state is VersionState.CURRENT and start > now)
        or servable.effective_to <= now
        or declared_links(servable, links)
    ):
        return False
    last = (start, servable.doc_version, servable.doc_id)
    superseded = VersionState.SUPERSEDED
    # (the other members of the timeline: superseded versions that name a successor)
    return not any(
        (doc.effective_from or OPEN_START, doc.doc_version, doc.doc_id) >= last
        for doc in docs
        if doc.version_state is superseded and declared_links(doc, links)
    )


def _settle_once(
    docs: Iterable[Document], now: datetime, unknown_siblings: str, links: Links | None
) -> dict[str, Document]:
    """One application of the rule (see ``settle``)."""
    started = []
    for doc in docs:
        if doc.version_state is VersionState.PENDING and start_of(doc) <= now:
            doc = replaced(doc, version_state=VersionState.CURRENT)
        elif doc.version_state is VersionState.CURRENT and start_of(doc) > now:
            doc = replaced(doc, version_state=VersionState.PENDING)
        started.append(doc)
    slots = timeline(started, unknown_siblings=unknown_siblings, links=links)
    settled: dict[str, Document] = {}
    for doc in started:
        slot = slots.get(doc.doc_id)
        if slot is not None and doc.version_state in _SERVABLE:
            if slot.end > now:
                # Unchanged (the usual case): the same object, not an equal copy. ``slot.end``
                # is the version's own ``effective_to`` object unless something closes it.
                if slot.end is not doc.effective_to or doc.superseded_by is not None:
                    doc = replaced(doc, effective_to=slot.end, superseded_by=None)
            elif slot.successor is not None:
                doc = replaced(
                    doc,
                    version_state=VersionState.SUPERSEDED,
                    superseded_by=slot.successor,
                    effective_to=slot.end,
                )
            else:
                doc = replaced(doc, version_state=VersionState.RETIRED, superseded_by=None)
        settled[doc.doc_id] = doc
    return settled
