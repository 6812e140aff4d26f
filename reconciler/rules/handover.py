"""Whether a version whose window now ends earlier is handed over at its new end.

A row still served from now on whose ``effective_to`` moves earlier stays served until that
end: to ``default_filter()`` it is the same today and different from that day. It is a
handover when another version of its family takes over at the new end (the ``dates`` check
closes a predecessor's window at its successor's start: the family is served on either side
of it). It is a scheduled hide when none does: from that day its family serves nothing, and
no run will be weighed for it (the day comes without a write). The guard weighs the second
as a hide (issue 37's relabel was "served now and later", which a window closed tomorrow on
the whole corpus also is).

A version superseded now is handed over when the successor it names serves now in its place
and was a version of its family before the run (``handed_over_now``): a new version of the
family, in force already (the family serves before and after; a handover dated ahead is the
same change, made earlier). A successor that joins from a family of its own is a merge, not a
handover: what its own family served is gone, and the hide is weighed.

Pure: rows and source documents in, a yes or no out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from reconciler.model import OPEN_END, OPEN_START, Document, SourceDocument, VersionState
from reconciler.rules.time_rule import row_served, served_at


def ends_earlier(before: Document, after: Document) -> bool:
    """Whether ``after``'s window ends before ``before``'s did."""
    return after.effective_to < before.effective_to


def taken_over(
    after: Document, rows: Iterable[Document], successors: Iterable[SourceDocument] = ()
) -> bool:
    """Whether, at ``after``'s end, another version serves in its place: one of ``rows`` (the
    family's rows as the plan leaves them; ``after``'s own row is skipped) in ``after``'s
    family, or one of ``successors`` (those its source declares) by its declared state and
    window (an undeclared start taken as begun, an undeclared end as open) where ``rows`` has
    no row of it (a row, quarantined or not, says more than its source)."""
    end, family = after.effective_to, after.doc_family_id
    known = {after.doc_id}
    for row in rows:
        known.add(row.doc_id)
        if row.doc_id != after.doc_id and row.doc_family_id == family and row_served(row, end):
            return True
    return any(
        served_at(
            source.state or "current",
            source.effective_from or OPEN_START,
            source.effective_to or OPEN_END,
            False,
            end,
        )
        for source in successors
        if source.doc_id not in known
    )


def handed_over_now(
    after: Document, family: str, rows: Iterable[tuple[Document, Document]], now: datetime
) -> bool:
    """Whether ``after``, superseded, is handed over at ``now``: the successor it names is one
    of ``rows`` (the family's rows, each before the run and as the plan leaves it) that was in
    ``family`` (the one ``after`` is served in before the run) before the run, is in ``after``'s
    family after it, and serves at ``now``."""
    if after.version_state is not VersionState.SUPERSEDED or after.superseded_by is None:
        return False
    return any(
        left.doc_id == after.superseded_by
        and before.doc_family_id == family
        and left.doc_family_id == after.doc_family_id
        and row_served(left, now)
        for before, left in rows
    )
