"""What ``serve``'s watch polls: a source read through its connector at an interval (http,
confluence, sql; ``[[sources]] poll_interval``), a cheap probe first where the connector has
one, and, when something changed, what changed where the connector can read it alone
(``ReadsChanges``: Confluence's last-modified search), else a scan, compared with the last
read. Each change is dated as the source dates it where it can (``DatesChanges``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from reconciler.app.followers import RETRY, Batch, Polled
from reconciler.app.resuming import asked_with, mark_of
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.model import SourceDocument, SourceSnapshot
from reconciler.ports.source import SystemOfRecord, probe
from reconciler.stores.sql.watermarks import WatchMark

log = logging.getLogger(__name__)

#: Seconds between two polls of a polled source (http, confluence, sql) unless it sets
#: ``poll_interval``.
POLL = 60.0

#: The source keys of a polled source's documents whose rows differ (the watch's).
Drift = Callable[[str, Sequence[SourceDocument]], set[str]]


@runtime_checkable
class ReadsChanges(Protocol):
    """A polled source that can read only what changed since its probe's last token
    (Confluence's last-modified search), instead of the whole source."""

    def changed_since(self, before: str | None, now: str | None) -> SourceSnapshot | None:
        """The documents changed since the state ``before`` named (the probe now answering
        ``now``), complete for what changed; None where it cannot tell (a deletion, a
        search that failed): the source is then read whole."""
        ...


@runtime_checkable
class DatesChanges(Protocol):
    """A polled source that dates its documents' changes (a page's version time)."""

    def changed_at(self, source_key: str) -> datetime | None:
        """When the document last changed, as the source dates it; None when it cannot."""
        ...


class PolledWatch(Polled):
    """A source read through its connector at an interval (http, confluence, sql): a cheap
    probe first where the connector has one (``ports.source.probe``: an HTTP validator
    answered 304, a SQL ``updated_at`` watermark), and a read when it says something changed
    (or cannot say): what changed since the last read where the connector can say
    (``ReadsChanges``), else a scan, compared with the last read: each document whose
    metadata or hash differs, or that came or went, is a change (keyed by its source key,
    dated as the source dates it, ``DatesChanges``, else when the poll saw it). The token of the state reconciled is the source's mark: at the first poll after
    a restart, a token that moved (or a source that cannot tell) means the source changed
    while ``serve`` was down, and the documents whose rows differ (``drift``, the watch's
    comparison with the document table, ``reconciler.app.resuming``) are reconciled at once.
    The first watch of a source (no mark yet) only reads where it stands."""

    def __init__(
        self,
        name: str,
        source: SystemOfRecord,
        *,
        clock: Clock = SYSTEM_CLOCK,
        interval: float = POLL,
        drift: Drift | None = None,
    ) -> None:
        super().__init__(name, source, clock=clock, interval=interval)
        #: The family each document names (``family``), from the last scan.
        self.named: dict[str, str] = {}
        self.drift = drift
        self._seen: dict[str, tuple[Any, ...]] | None = None
        self._token: str | None = None
        #: The mark: the token (``resuming.mark_of``) of the state reconciled; ``resumed``:
        #: a mark was read at start (a restart) and the first poll has not compared yet.
        self._mark: str | None = None
        self._resumed = False
        self._stored = False
        #: The source key of each document and its path, from the reads (the watch's scope).
        self.paths: dict[str, str] = {}
        #: When the source was last read (at start: when its mark was last written): no
        #: change it finds next is dated before it.
        self._read_at: datetime | None = None
        #: The mark moved without a run (nothing to reconcile): the watch writes it.
        self.unsaved, self._stored = False, True

    def start(self, mark: WatchMark | None, known: set[str]) -> None:
        self._until = mark.changed_until if mark is not None else None
        self._mark = mark.mark if mark is not None else None
        self._resumed = self._stored = mark is not None
        self._token = asked_with(self._mark)
        self._read_at = mark.reconciled_at if mark is not None else None

    def poll(self, now: float) -> None:
        if now < self._next_poll or now < self.batch.not_before:
            return
        self._next_poll, self._polled_at = now + self.interval, now
        try:
            token = probe(self.source, self._token)
            if self._resumed and token is not None and mark_of(token) == self._mark:
                self._token, self._resumed = token, False  # (nothing changed while down)
            if token is not None and token == self._token and self._seen is not None:
                self._up, self._read_at = True, self.clock.now()
                return
            snapshot, partial = self._read(token)
        except Exception as exc:  # unreachable: tried again at the next poll
            if self._up:
                log.warning("watch %s: cannot poll the source: %s", self.name, exc)
            self._up = False
            return
        self._up = True
        if not snapshot.complete:
            return  # (a partial read proves no change: the next poll reads it again)
        changed = self._compare(snapshot, partial)
        self._token = token
        moved = mark_of(token) != self._mark or not self._stored
        if not changed and not self.batch.paths and moved:
            # nothing to reconcile: the mark moves at once (the first watch's is its first)
            self._mark, self.unsaved = mark_of(token), True
            return
        floor, self._read_at = self._read_at, self.clock.now()
        for key in changed:
            self.batch.add(key, self._dated(key, floor), now)
        if changed:
            self.batch.mark = mark_of(token)
            log.info("watch %s: %d document(s) changed", self.name, len(changed))

    def _read(self, token: str | None) -> tuple[SourceSnapshot, bool]:
        """What changed since the last read where the source can say (True), else the whole
        source (False)."""
        if self._seen is not None and token is not None and isinstance(self.source, ReadsChanges):
            changes = self.source.changed_since(self._token, token)
            if changes is not None:
                return changes, True
        return self.source.scan(), False

    def _compare(self, snapshot: SourceSnapshot, partial: bool) -> set[str]:
        """The source keys that changed since the last read (``partial``: a read of what
        changed, compared page by page; nothing is gone from it)."""
        seen = {doc.source_key: _facts(doc) for doc in snapshot.documents}
        named = {doc.source_key: doc.family for doc in snapshot.documents if doc.family}
        paths = {doc.source_key: doc.path for doc in snapshot.documents if doc.path}
        before = self._seen
        if partial and before is not None:
            self._seen, self.named = {**before, **seen}, {**self.named, **named}
            self.paths.update(paths)
            return {key for key, facts in seen.items() if before.get(key) != facts}
        self._seen, self.named, self.paths = seen, named, paths
        if before is None:
            return self._at_start(snapshot.documents)
        return {k for k in seen.keys() | before.keys() if seen.get(k) != before.get(k)}

    def _dated(self, key: str, floor: datetime | None) -> datetime:
        """When a change happened as the source dates it (``DatesChanges``), never before
        ``floor`` (the read before, where it was not yet: at start, the mark's time) nor
        after now; now where the source gives no date (a document gone, a registry entry)."""
        now = self.clock.now()
        when = self.source.changed_at(key) if isinstance(self.source, DatesChanges) else None
        if when is None:
            return now
        return min(max(when, floor) if floor is not None else when, now)

    def _at_start(self, documents: Sequence[SourceDocument]) -> set[str]:
        """What changed while serve was down (a restart whose token moved, or a source that
        cannot tell): the documents whose rows differ. Nothing at the first watch."""
        if not self._resumed or self.drift is None:
            return set()  # (where the source stands: the changes from now on are the watch's)
        self._resumed = False
        changed = self.drift(self.name, documents)
        log.info(
            "watch %s: changed while serve was down: %d document(s) differ from their rows",
            self.name,
            len(changed),
        )
        return changed

    def due(self, now: float) -> bool:
        return bool(self.batch.paths) and now >= self.batch.not_before

    def give_back(self, batch: Batch, now: float, wait: float = RETRY) -> None:
        for key, changed in batch.paths.items():
            self.batch.add(key, changed, now)
        self.batch.mark = self.batch.mark or batch.mark
        self.batch.not_before = now + wait

    def done(self, batch: Batch, known: Iterable[str], gone: Iterable[str]) -> None:
        newest = max(batch.paths.values(), default=None)
        if newest is not None and (self._until is None or newest > self._until):
            self._until = newest
        if not self.batch.paths:  # (none pending since: the source's state is reconciled)
            self._mark = batch.mark or self._mark
        self._stored = True  # (the watch writes the mark after a run)

    def saved(self) -> None:
        """The watch wrote the mark that moved without a run."""
        self.unsaved, self._stored = False, True

    def reached(self) -> tuple[str | None, datetime | None]:
        return self._mark, self._until


def _facts(doc: Any) -> tuple[Any, ...]:
    """What the watch compares of a document between two polls: each field the row and the
    chunks' payload are written from (a title or class changed alone is a change too, as
    ``resuming`` compares them after a restart)."""
    return (
        doc.content_hash,
        doc.family,
        doc.version,
        doc.state,
        doc.effective_from,
        doc.effective_to,
        doc.declared_successors,
        doc.title,
        doc.doc_class,
    )
