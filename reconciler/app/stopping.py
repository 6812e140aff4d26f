"""Stopping a ``serve`` job that runs too long, safely: never in the middle of a write.

A job is asked to stop (``JobControl.request_stop``: its deadline passed, or serve got
SIGTERM) and stops itself at its next safe point, with ``JobStopped``: before a payload batch
(the batch before is confirmed, the run is recorded as failed with what it wrote), or while it
reads a source (between the bytes of an HTTP answer, before a retry, or when a scan returns),
when nothing of the run is written yet. A job that does not reach a safe point within the
grace may be left (``abandon``) only while it waits on a source: its thread then writes
nothing more (its scan ends in ``JobStopped``), and its lease is given up for the next job.

A job's sources are read side by side (``SourceReads``), each in a thread of its own and
within the job's read deadline (``[schedule] source_deadline``, by default half of
``job_deadline``): a source past it is unreadable this run (``SourceTimedOut``, a
``SourceUnavailable``: its families stay as they are and the run is ``partial``), its read is
told to stop, and the other sources are reconciled in the same job. Real time, as sockets are.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from reconciler.errors import JobStopped
from reconciler.model import SourceSnapshot
from reconciler.ports.source import SourceUnavailable, SystemOfRecord, stoppable

log = logging.getLogger(__name__)

T = TypeVar("T")


class JobControl:
    """One job as its supervisor sees it: asked to stop or not, and whether it is reading a
    source (the only place it may be left)."""

    def __init__(self, job_id: str, *, read_within: float | None = None) -> None:
        self.job_id = job_id
        #: Seconds each source's read may take (``SourceReads``); None: no bound of its own.
        self.read_within = read_within
        #: Set when the job has ended (whatever the outcome), or when it is asked to stop.
        self.wake = threading.Event()
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._reading: str | None = None
        #: What to give up when the job is left (its lease, its chunk index), last first.
        self._on_leave: list[Callable[[], None]] = []

    def on_leave(self, release: Callable[[], None]) -> None:
        """Call ``release`` if the job is left (after what was registered later)."""
        self._on_leave.append(release)

    def request_stop(self, reason: str) -> None:
        """Ask the job to stop at its next safe point (the first reason given stays)."""
        with self._lock:
            if self._reason is None:
                self._reason = reason
        self.wake.set()

    def end(self) -> None:
        """The job's thread has finished."""
        self.ended.set()
        self.wake.set()

    def reason(self) -> str | None:
        """Why the job was asked to stop, or None."""
        return self._reason

    def check(self, cause: BaseException | None = None) -> None:
        """Raise ``JobStopped`` when the job was asked to stop."""
        if (why := self._reason) is not None:
            raise JobStopped(f"job {self.job_id} stopped: {why}") from cause

    @contextmanager
    def reading(self, source: str) -> Iterator[None]:
        """The block reads ``source``: the job may be left there, and the connector is told
        of a stop request (``reconciler.ports.source.stop_requested``)."""
        with self._lock:
            self._reading = source
        try:
            with stoppable(self.reason):
                yield
        finally:
            with self._lock:  # (waits while a supervisor records the job it left)
                self._reading = None

    def abandon(self, record: Callable[[str], None]) -> str | None:
        """Leave the job if it is reading a source: ``record(source)`` and give up what it
        holds (``on_leave``), under the lock, so the job cannot leave its read meanwhile (it
        then raises ``JobStopped``). The source's name, or None when the job is elsewhere (in
        a store call or a write: wait for it)."""
        with self._lock:
            source = self._reading
            if source is None:
                return None
            record(source)
            for release in reversed(self._on_leave):
                try:
                    release()
                except Exception as error:  # (the next job meets it, with its own error)
                    log.error("job %s: could not give up what it held: %s", self.job_id, error)
            self._on_leave.clear()
        return source


class SourceTimedOut(SourceUnavailable):
    """A source's read passed the job's read deadline: unreadable this run."""


class _Read:
    """One source's scan, in a thread of its own, told to stop when the job is or when the
    read is cut."""

    def __init__(self, source: SystemOfRecord, control: JobControl, within: float) -> None:
        self.source = source
        self.control = control
        self.within = within
        self.deadline = time.monotonic() + within
        self.done = threading.Event()
        self.snapshot: SourceSnapshot | None = None
        self.error: BaseException | None = None
        #: Why the read was cut (set by the job's thread), or None.
        self.cut: str | None = None
        threading.Thread(target=self._run, name=f"read-{source.name}", daemon=True).start()

    def _reason(self) -> str | None:
        return self.control.reason() or self.cut

    def _run(self) -> None:
        try:
            with stoppable(self._reason):
                self.snapshot = self.source.scan()
        except BaseException as exc:  # handed to the job's thread
            self.error = exc
        finally:
            self.done.set()


class SourceReads:
    """The sources of one job read side by side: the first scan the job asks for starts every
    source's (``_Read``); a source read again in the same job is read again alone."""

    def __init__(self, sources: list[SystemOfRecord], control: JobControl, within: float) -> None:
        self._sources = {source.name: source for source in sources}
        self._control = control
        self.within = within
        self._reads: dict[str, _Read] = {}
        self._started: set[str] = set()
        self._lock = threading.Lock()

    def take(self, name: str) -> _Read:
        """The read of source ``name`` (started with every other not started yet)."""
        with self._lock:
            for other, source in self._sources.items():
                if other not in self._started:
                    self._started.add(other)
                    self._reads[other] = _Read(source, self._control, self.within)
            read = self._reads.pop(name, None)
            if read is None:
                read = _Read(self._sources[name], self._control, self.within)
            return read


class StoppableSource:
    """A source whose scan is a safe point of its job: a scan that was asked to stop (cut
    short, or failed because it was) raises ``JobStopped``, and is no read of the source;
    with ``reads``, a scan past the job's read deadline raises ``SourceTimedOut``."""

    def __init__(
        self, source: SystemOfRecord, control: JobControl, reads: SourceReads | None = None
    ) -> None:
        self._source = source
        self._control = control
        self._reads = reads
        self.name = source.name

    def scan(self) -> SourceSnapshot:
        """The source's scan, within the job's control (and its read deadline)."""
        try:
            with self._control.reading(self.name):
                snapshot = self._scan()
        except (JobStopped, SourceTimedOut):
            raise
        except Exception as exc:
            self._control.check(exc)
            raise
        self._control.check()
        return snapshot

    def _scan(self) -> SourceSnapshot:
        if self._reads is None:
            return self._source.scan()
        read = self._reads.take(self.name)
        while not read.done.wait(min(0.2, max(0.0, read.deadline - time.monotonic()))):
            self._control.check()
            if time.monotonic() >= read.deadline:
                read.cut = f"its read passed the job's read deadline ({read.within:g}s)"
                log.warning("source %s: %s; unreadable this run", self.name, read.cut)
                raise SourceTimedOut(
                    f"source {self.name!r} did not finish its scan within {read.within:g}s "
                    "([schedule] source_deadline, by default half of job_deadline): it is "
                    "unreadable this run, its families stay as they are (its TTL quarantines "
                    "them in time), and the other sources are reconciled"
                )
        if read.error is not None:
            raise read.error
        assert read.snapshot is not None
        return read.snapshot

    def read_body(self, source_key: str) -> str:
        """The source's body of one document."""
        return self._source.read_body(source_key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def stoppable_sources(
    sources: list[SystemOfRecord], control: JobControl | None
) -> list[SystemOfRecord]:
    """``sources`` as safe points of ``control``'s job, read side by side within its read
    deadline when it has one (unchanged without a control)."""
    if control is None:
        return sources
    reads = (
        SourceReads(sources, control, control.read_within)
        if control.read_within is not None
        else None
    )
    return [StoppableSource(source, control, reads) for source in sources]


def unless_stopping(call: Callable[[], T], stopping: threading.Event) -> tuple[bool, T | None]:
    """``call()`` in a thread of its own, waited for until it returns or ``stopping`` is set
    (serve got SIGTERM): ``(True, what it returned)`` (its exception raised), or ``(False,
    None)`` when serve began to stop first (then it is not made at all). A call to a store
    that does not answer (bounded only by the store's own timeouts) then no longer holds
    serve past ``stop_grace``: it is left to end by itself in its daemon thread."""
    if stopping.is_set():
        return False, None
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # raised by the caller below
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="store-call", daemon=True).start()
    while not done.wait(0.05):
        if stopping.is_set():
            return False, None
    returned, value = outcome[0]
    if not returned:
        raise value
    return True, value
