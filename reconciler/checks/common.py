"""Small helpers the check modules share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconciler.model import Document, Finding, Severity

#: Document fields that describe a version's state and window.
STATE_FIELDS: tuple[str, ...] = ("version_state", "superseded_by", "effective_from", "effective_to")
#: Descriptive fields the source owns.
META_FIELDS: tuple[str, ...] = ("doc_version", "doc_class", "title")


def diff(before: Document, after: Document, fields: Iterable[str]) -> dict[str, Any]:
    """Fields (of ``fields``) whose value differs, with the ``after`` value."""
    if before is after:
        return {}  # (``settle`` hands back a version it leaves unchanged as it is)
    return {f: getattr(after, f) for f in fields if getattr(before, f) != getattr(after, f)}


def values(doc: Document, fields: Iterable[str]) -> dict[str, Any]:
    """Selected fields of a document, for a finding's expected/actual."""
    return {f: getattr(doc, f) for f in fields}


def quarantine_lifted(check: str, reason: str, doc: Document, family: str, why: str) -> Finding:
    """The quarantine ``reason`` that ``check`` set no longer holds: lift it."""
    return Finding(
        check=check,
        kind="quarantine_lifted",
        severity=Severity.INFO,
        family=family,
        doc_id=doc.doc_id,
        expected={"quarantined": False},
        actual={"quarantined": True, "quarantine_reason": reason},
        action=f"lift the quarantine: {why}",
        quarantine=(reason, False),
    )
