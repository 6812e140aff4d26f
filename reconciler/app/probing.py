"""Reading the sources for a job whose checks do not (serve's TTL and dates jobs), so that
every read feeds ``source_up`` and the TTL's last successful read: a source that went away is
seen at the next job, not at the next full run."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports import DocumentTable
from reconciler.ports.source import ConnectorError, SystemOfRecord
from reconciler.writing.source_reads import record_attempt

log = logging.getLogger(__name__)


def probe_sources(
    table: DocumentTable, sources: Iterable[SystemOfRecord], *, clock: Clock = SYSTEM_CLOCK
) -> None:
    """Read every source and record the attempt (``source_up``, and the TTL's last
    successful read, at the clock's time), as a run that reads them does; a scan that read
    nothing and broke off is a failed read."""
    for source in sources:
        at = clock.now()
        try:
            snapshot = source.scan()
        except ConnectorError as exc:
            log.warning("source %s unreadable: %s", source.name, exc)
            record_attempt(table, source.name, ok=False, at=at, error=str(exc))
            continue
        ok = snapshot.complete or bool(snapshot.documents)
        record_attempt(
            table,
            source.name,
            ok=ok,
            at=at,
            error=None if ok else "the scan failed before any document was read",
            documents_seen=len(snapshot.documents) if ok else None,
        )
