"""What a polled source changed while ``serve`` was down: at the watch's first poll, its
probe's token (an HTTP validator, a SQL ``updated_at`` watermark, Confluence's newest page
modification) is compared with the one persisted in ``watch_marks``; when it moved (or the
source cannot tell), the source's documents are compared with their rows in the document
table, and those that differ are the changes the watch reconciles at once.

The comparison errs towards a change: a document new to the table, a served row whose
document is gone, a body hash, title, class, version, family or start that differs, a
declared end later than the row's, or a declared state the row's cannot follow from (a
retired or draft document served, a servable one that is not). What the time rule derives
(a version superseded by its family's order, a window closed at a successor's start) is not
a change. A change it misses is the full job's, which reports it (``missed_by_watch``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from reconciler.model import SERVABLE_STATES, Document, SourceDocument, VersionState, utc
from reconciler.rules.declared_state import declared_state

#: The longest token kept as it is (``watch_marks.mark``); a longer one is kept as its hash.
MARK_LENGTH = 128

_HASHED = "sha256:"
_NOT_SERVED = (VersionState.RETIRED, VersionState.DRAFT)


def mark_of(token: str | None) -> str | None:
    """The form ``watch_marks`` keeps a probe's token in (a long one as its sha256)."""
    if token is None or len(token) <= MARK_LENGTH:
        return token
    return _HASHED + hashlib.sha256(token.encode("utf-8")).hexdigest()


def asked_with(mark: str | None) -> str | None:
    """The token to ask the probe with at start (a hashed one cannot be sent back)."""
    return None if mark is None or mark.startswith(_HASHED) else mark


def drifted_in(
    table: Any, name: str, documents: Sequence[SourceDocument], *, now: datetime
) -> set[str]:
    """``drifted``, against the rows of source ``name`` in the document ``table``."""
    rows = {row.source_key: row for row in table.iter_documents(source=name)}
    return drifted(name, documents, rows, now=now)


def drifted(
    name: str,
    documents: Iterable[SourceDocument],
    rows: Mapping[str, Document],
    *,
    now: datetime,
) -> set[str]:
    """The source keys of ``documents`` (source ``name``) whose rows (``rows``, by source
    key) do not say what they declare, and of served rows whose document is gone."""
    changed: set[str] = set()
    seen: set[str] = set()
    for doc in documents:
        seen.add(doc.source_key)
        row = rows.get(doc.source_key)
        if row is None or _differs(name, doc, row, now):
            changed.add(doc.source_key)
    changed |= {
        key
        for key, row in rows.items()
        if key not in seen and row.version_state in SERVABLE_STATES and not row.quarantined
    }
    return changed


def _differs(name: str, doc: SourceDocument, row: Document, now: datetime) -> bool:
    if doc.content_hash != row.source_hash:
        return True
    declared = (
        (doc.title, row.title),
        (doc.doc_class, row.doc_class),
        (doc.version, row.doc_version),
        (f"{name}:{doc.family}" if doc.family else None, row.doc_family_id),
        (utc(doc.effective_from) if doc.effective_from else None, row.effective_from),
    )
    if any(said is not None and said != held for said, held in declared):
        return True
    if doc.effective_to is not None and row.effective_to > utc(doc.effective_to):
        return True
    if row.quarantined:
        return False  # (its state is the quarantine's; the hash says whether it changed)
    state, held = declared_state(doc, as_of=now), row.version_state
    if state in _NOT_SERVED:
        return held != state
    if state in (VersionState.CURRENT, VersionState.PENDING):
        return held in _NOT_SERVED
    if state is VersionState.SUPERSEDED:  # (kept current until a known successor's start)
        return held is not VersionState.SUPERSEDED and row.superseded_by is None
    return False
