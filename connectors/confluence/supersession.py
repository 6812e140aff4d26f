"""Successors resolved across one Confluence scan: a labelled page's pointer (the successor
property) is taken only when it names another page of this scan, and the pages become the
snapshot's documents.

A pointer to the page itself (``SELF_SUPERSESSION``), to a page not in the source's scope
(``DANGLING_SUPERSEDED_BY``) or round a cycle (``SUPERSESSION_CYCLE``) is a problem, and the
page keeps the state its status gives. A pointer to a page this scan could not read, or that
may sit in the unread part of a partial scan, holds the page back instead: its registered
state is kept (an ``UNREADABLE`` problem says why), since dropping the pointer would read the
page as current again. ``content_hash`` is the sha256 of the storage-format body, exactly as
Confluence returns it.
"""

from __future__ import annotations

import hashlib

from connectors.confluence.declaration import Draft
from connectors.confluence.pages import doc_id, page_problem
from connectors.records import break_cycles
from reconciler.model import ProblemKind, SourceDocument, SourceProblem, VersionState

__all__ = ["resolve"]


def resolve(
    source: str,
    successor_property: str,
    drafts: list[Draft],
    problems: list[SourceProblem],
    *,
    complete: bool,
    unreadable: set[str],
) -> list[SourceDocument]:
    """Documents with successors resolved; pages whose successor was not read held back.

    A page is held back (not yielded, its state kept, an ``UNREADABLE`` problem naming
    why) when its successor is a page this scan could not read, or may sit in the part of a
    partial scan that was not read, or is itself held back: dropping the pointer instead
    would read the page as current again.
    """
    by_id = {d.page.id: d for d in drafts}
    successors: dict[str, str] = {}
    waiting: dict[str, str] = {}  # page id -> successor not read this scan
    for draft in drafts:
        target, page = draft.successor, draft.page
        if target is None:
            continue
        doc = doc_id(source, page.id)
        if target == page.id:
            problems.append(
                page_problem(
                    source,
                    ProblemKind.SELF_SUPERSESSION,
                    f"{successor_property} names the page itself; ignored",
                    page,
                    doc,
                )
            )
        elif target in by_id:
            successors[page.id] = target
        elif target in unreadable or not complete:
            waiting[page.id] = target
        else:
            problems.append(
                page_problem(
                    source,
                    ProblemKind.DANGLING_SUPERSEDED_BY,
                    f"{successor_property} names page {target}, which is not in this "
                    "source's scope; ignored",
                    page,
                    doc,
                )
            )
    for page_id, message in break_cycles(successors, successor_property):
        problems.append(
            page_problem(
                source,
                ProblemKind.SUPERSESSION_CYCLE,
                message,
                by_id[page_id].page,
                doc_id(source, page_id),
            )
        )
    grew = True
    while grew:  # a page superseded by a held-back page is held back too
        grew = False
        for page_id, target in successors.items():
            if target in waiting and page_id not in waiting:
                waiting[page_id] = target
                grew = True
    for page_id, target in sorted(waiting.items()):
        problems.append(
            page_problem(
                source,
                ProblemKind.UNREADABLE,
                f"its successor, page {target}, was not read this scan; "
                "the page keeps its registered state",
                by_id[page_id].page,
            )
        )
    held = set(waiting)
    documents = []
    for draft in sorted(drafts, key=lambda d: (len(d.page.id), d.page.id)):
        page = draft.page
        if page.id in held or page.body is None:
            continue
        successor = successors.get(page.id)
        state = draft.state
        if successor is not None and page.status != "trashed":
            state = VersionState.SUPERSEDED
        documents.append(
            SourceDocument(
                source=source,
                source_key=page.id,
                doc_id=doc_id(source, page.id),
                content_hash="sha256:" + hashlib.sha256(page.body.encode("utf-8")).hexdigest(),
                path=page.path,
                version=page.version,
                state=state,
                effective_from=draft.effective_from,
                effective_to=draft.effective_to,
                superseded_by=doc_id(source, successor)
                if successor is not None and state is VersionState.SUPERSEDED
                else None,
                title=page.title,
                doc_class=draft.doc_class,
            )
        )
    return documents
