"""Time applied to a family's versions: the one rule the family, dates and siblings checks share.

Keeping it in one place is what makes repairs converge: every check that changes a version's
state asks this function what the family should look like, so no two checks pull one document
in different directions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime

from reconciler.model import OPEN_START, Document, VersionState


def _start(doc: Document) -> datetime:
    return doc.effective_from or OPEN_START


def in_force_winner(docs: Iterable[Document], now: datetime) -> Document | None:
    """The current version in force at ``now``: the latest started one (then version, id)."""
    live = [
        d
        for d in docs
        if d.version_state is VersionState.CURRENT and _start(d) <= now < d.effective_to
    ]
    if not live:
        return None
    return max(live, key=lambda d: (_start(d), d.doc_version, d.doc_id))


def settle(docs: Iterable[Document], now: datetime) -> dict[str, Document]:
    """Return every version as it should stand at ``now`` (doc_id -> document).

    1. a ``pending`` version whose ``effective_from`` has come is ``current``, and a ``current``
       one whose ``effective_from`` is still ahead is ``pending``;
    2. of the current versions in force, the latest started wins; the others are
       ``superseded`` by it (``effective_to`` closed at its start when that is earlier);
    3. a ``current`` version whose ``effective_to`` has passed is ``superseded`` by the version
       in force, or ``retired`` when none is.

    Idempotent: ``settle(settle(x).values()) == settle(x)``.
    """
    started = []
    for doc in docs:
        if doc.version_state is VersionState.PENDING and _start(doc) <= now:
            doc = dataclasses.replace(doc, version_state=VersionState.CURRENT)
        elif doc.version_state is VersionState.CURRENT and _start(doc) > now:
            doc = dataclasses.replace(doc, version_state=VersionState.PENDING)
        started.append(doc)
    winner = in_force_winner(started, now)
    by_id = {doc.doc_id: doc for doc in started}
    settled: dict[str, Document] = {}
    for doc in started:
        if doc.version_state is VersionState.CURRENT and doc is not winner:
            if winner is not None:
                # A version that already names its successor keeps it (the chain v1 -> v2 ->
                # v3 stays a chain); otherwise it is superseded by the version in force.
                successor = by_id.get(doc.superseded_by or "", winner)
                end = doc.effective_to
                if successor.effective_from is not None and successor.effective_from < end:
                    end = successor.effective_from
                doc = dataclasses.replace(
                    doc,
                    version_state=VersionState.SUPERSEDED,
                    superseded_by=successor.doc_id,
                    effective_to=end,
                )
            else:  # not the winner and no winner: it has ended
                doc = dataclasses.replace(doc, version_state=VersionState.RETIRED)
        settled[doc.doc_id] = doc
    return settled
