"""The contract every system-of-record connector honours, and its error types (connectors
import them from ``connectors.base``, which re-exports this module).

Errors are grouped by what the caller does with them::

    ConnectorError                  base; never raised itself
    ├── SourceUnavailable           stop this source for this run, retry later; its documents
    │                               keep their state (an unreadable source is never an empty one)
    ├── DocumentUnreadable          skip this one document; the rest of the scan goes on
    └── ConnectorConfigError        fatal: the configuration is wrong, fix it and start again

Per-document problems found during a scan (bad frontmatter, a dangling ``superseded_by``) are
not exceptions: they are ``SourceProblem`` values in the ``SourceSnapshot``.

A scan may be asked to stop (the job that reads it passed its deadline, or ``serve`` is
stopping): ``stop_requested()`` says why, in the thread that scans. A connector that waits on
the network checks it between the bytes it receives and before each retry, and raises
``SourceUnavailable`` naming the reason; the caller knows the scan was stopped, not failed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

from reconciler.model import SourceSnapshot


class ConnectorError(Exception):
    """Base of every connector error."""


class SourceUnavailable(ConnectorError):
    """The source could not be read at all this time: stop this source, retry later."""


class DocumentUnreadable(ConnectorError):
    """One document could not be read: skip it, keep going."""


class ConnectorConfigError(ConnectorError):
    """The connector's configuration is wrong: fatal until fixed."""


@runtime_checkable
class SystemOfRecord(Protocol):
    """A system of record: where documents live and which version is in force is decided."""

    name: str

    def scan(self) -> SourceSnapshot:
        """Read every document's metadata and content hash; raise SourceUnavailable on outage."""
        ...

    def read_body(self, source_key: str) -> str:
        """Return one document's body text (for ingestion); raise DocumentUnreadable."""
        ...


@runtime_checkable
class ReadsPaths(Protocol):
    """A system of record that can also read only the documents at some paths (optional:
    ``serve``'s watch reads the few files that changed, not the whole source)."""

    def scan_paths(self, paths: Collection[str]) -> SourceSnapshot:
        """The documents at ``paths`` (as their ``SourceDocument.path`` names them), read as
        ``scan`` reads them; a path that is no document now is left out."""
        ...


def scan_paths(source: SystemOfRecord, paths: Collection[str]) -> tuple[SourceSnapshot, bool]:
    """The documents at ``paths`` and True where the connector reads by path (``ReadsPaths``);
    else its whole ``scan`` and False (a superset: never less than was asked)."""
    if isinstance(source, ReadsPaths):
        return source.scan_paths(paths), True
    return source.scan(), False


@runtime_checkable
class Probes(Protocol):
    """A system of record that can say cheaply whether it changed (optional: ``serve``'s watch
    polls it so before it scans)."""

    def probe(self, token: str | None) -> str | None:
        """A token of the source's state now: ``token`` itself while nothing changed (an HTTP
        validator answered 304, the same watermark), another when something did, None when
        the source cannot tell (it is then scanned)."""
        ...


def probe(source: SystemOfRecord, token: str | None) -> str | None:
    """The source's token (``Probes.probe``); None where its connector cannot tell."""
    return source.probe(token) if isinstance(source, Probes) else None


_STOP: ContextVar[Callable[[], str | None] | None] = ContextVar("source_stop", default=None)


def stop_requested() -> str | None:
    """Why the scans of this thread should stop now, or None (keep reading)."""
    check = _STOP.get()
    return check() if check is not None else None


@contextmanager
def stoppable(reason: Callable[[], str | None]) -> Iterator[None]:
    """Within the block, ``stop_requested()`` in this thread answers ``reason()``."""
    token = _STOP.set(reason)
    try:
        yield
    finally:
        _STOP.reset(token)
