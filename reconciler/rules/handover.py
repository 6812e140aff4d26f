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

A successor scheduled ahead (served later, not now) whose start is brought forward takes over
now (``brought_forward``) when its family served another version now before the run and
serves it alone now after: the same handover, made earlier. A version served at no instant
from now on before (a draft, a retired note made current) is still a reveal.

Pure: rows and source documents in, a yes or no out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from reconciler.model import OPEN_END, OPEN_START, Document, SourceDocument, VersionState
from reconciler.rules.time_rule import row_served, served_at, start_of


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


def brought_forward(
    before: Document,
    after: Document,
    family: str,
    rows: Iterable[tuple[Document, Document]],
    now: datetime,
) -> bool:
    """Whether ``after``, served later but not at ``now`` before the run (``before``: a
    successor scheduled ahead) and served at ``now`` after it, takes over from its family's
    version: it stays in ``family`` (the one it is in before the run), another version of
    which served at ``now`` before the run, and none of ``rows`` (the family's rows, each before
    the run and as the plan leaves it) but ``after`` serves in it at ``now`` after."""
    later = before.effective_to > now and row_served(before, max(start_of(before), now))
    if row_served(before, now) or not later or not row_served(after, now):
        return False
    if before.doc_family_id != family or after.doc_family_id != family:
        return False
    pairs = [(old, new) for old, new in rows if old.doc_id != after.doc_id]
    served_before = any(old.doc_family_id == family and row_served(old, now) for old, _ in pairs)
    beside = any(new.doc_family_id == family and row_served(new, now) for _, new in pairs)
    return served_before and not beside
