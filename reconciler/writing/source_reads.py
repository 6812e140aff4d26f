"""What was read of the systems of record, kept in the table: each source's attempt (its
``source_up`` and the TTL's last successful read) and the identities of what it held."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from reconciler.check_inputs import SourceState
from reconciler.ports import DocumentWriter

#: (source key, family, content hash, path) of one document a source held.
Identity = tuple[str, str, str | None, str | None]


def record_attempt(
    table: DocumentWriter,
    source: str,
    *,
    ok: bool,
    at: datetime,
    error: str | None = None,
    documents_seen: int | None = None,
) -> None:
    """Record one read of ``source`` at ``at``: whether it answered, and how many documents."""
    table.record_source_attempt(source, ok=ok, at=at, error=error, documents_seen=documents_seen)


def record_reading(
    table: DocumentWriter,
    states: Mapping[str, SourceState],
    identities: Mapping[str, Iterable[Identity]],
    present: Mapping[str, Iterable[str]],
    *,
    at: datetime,
) -> None:
    """Record what a reconciliation read: every scanned source's attempt (at ``at``, when it
    was read), the identities it parsed, and the keys present but not parsed (kept as seen)."""
    for name, state in states.items():
        if state.scanned:
            record_attempt(
                table,
                name,
                ok=state.readable,
                at=at,
                error=state.error,
                documents_seen=state.documents if state.readable and not state.scoped else None,
            )
    for name, entries in identities.items():
        table.record_identities(name, list(entries))
    for name, keys in present.items():
        table.touch_identities(name, keys)
