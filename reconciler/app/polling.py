"""What ``serve``'s watch polls: a source read through its connector at an interval (http,
confluence, sql; ``[[sources]] poll_interval``), a cheap probe first where the connector has
one, and a scan compared with the last one when something changed."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from reconciler.app.followers import RETRY, Batch, Polled
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports.source import SystemOfRecord, probe
from reconciler.stores.sql.watermarks import WatchMark

log = logging.getLogger(__name__)

#: Seconds between two polls of a polled source (http, confluence, sql) unless it sets
#: ``poll_interval``.
POLL = 60.0


class PolledWatch(Polled):
    """A source read through its connector at an interval (http, confluence, sql): a cheap
    probe first where the connector has one (``ports.source.probe``: an HTTP validator
    answered 304, a SQL ``updated_at`` watermark), and a scan when it says something changed
    (or cannot say), compared with the last scan: each document whose metadata or hash
    differs, or that came or went, is a change (keyed by its source key, dated when the poll
    saw it). What changed while ``serve`` was down is the full job's: the first poll only
    reads where the source stands."""

    def __init__(
        self,
        name: str,
        source: SystemOfRecord,
        *,
        clock: Clock = SYSTEM_CLOCK,
        interval: float = POLL,
    ) -> None:
        super().__init__(name, source, clock=clock, interval=interval)
        #: The family each document names (``family``), from the last scan.
        self.named: dict[str, str] = {}
        self._seen: dict[str, tuple[Any, ...]] | None = None
        self._token: str | None = None

    def start(self, mark: WatchMark | None, known: set[str]) -> None:
        self._until = mark.changed_until if mark is not None else None

    def poll(self, now: float) -> None:
        if now < self._next_poll or now < self.batch.not_before:
            return
        self._next_poll = now + self.interval
        try:
            token = probe(self.source, self._token)
            if token is not None and token == self._token and self._seen is not None:
                self._up = True
                return
            snapshot = self.source.scan()
        except Exception as exc:  # unreachable: tried again at the next poll
            if self._up:
                log.warning("watch %s: cannot poll the source: %s", self.name, exc)
            self._up = False
            return
        self._up = True
        if not snapshot.complete:
            return  # (a partial read proves no change: the next poll reads it again)
        seen = {doc.source_key: _facts(doc) for doc in snapshot.documents}
        self.named = {doc.source_key: doc.family for doc in snapshot.documents if doc.family}
        before, self._seen, self._token = self._seen, seen, token
        if before is None:
            return  # (where the source stands: the changes from now on are the watch's)
        changed = {key for key in seen.keys() | before.keys() if seen.get(key) != before.get(key)}
        at = self.clock.now()
        for key in changed:
            self.batch.add(key, at, now)
        if changed:
            log.info("watch %s: %d document(s) changed", self.name, len(changed))

    def due(self, now: float) -> bool:
        return bool(self.batch.paths) and now >= self.batch.not_before

    def give_back(self, batch: Batch, now: float) -> None:
        for key, changed in batch.paths.items():
            self.batch.add(key, changed, now)
        self.batch.not_before = now + RETRY

    def done(self, batch: Batch, known: Iterable[str], gone: Iterable[str]) -> None:
        newest = max(batch.paths.values(), default=None)
        if newest is not None and (self._until is None or newest > self._until):
            self._until = newest

    def reached(self) -> tuple[str | None, datetime | None]:
        return None, self._until


def _facts(doc: Any) -> tuple[Any, ...]:
    """What the watch compares of a document between two polls."""
    return (
        doc.content_hash,
        doc.family,
        doc.version,
        doc.state,
        doc.effective_from,
        doc.effective_to,
        doc.declared_successors,
    )
