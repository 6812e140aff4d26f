"""A watchdog observer stopped whole: its threads ended and its inotify instance given back,
within a bounded time whatever watchdog does (``dispose``).

Watchdog 7.1's stop does not always give the instance back: its reader thread, stopped
before its first read (a failed start, a restart soon after a start, a loaded machine),
leaves its loop without closing it, and a stop that raises before it reaches the reader
leaves the reader and its dispatcher running. Each leak holds one of the user's 128 inotify
instances (``fs.inotify.max_user_instances``) until every watch on the machine fails."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from typing import Any

from watchdog.observers.api import EventDispatcher

log = logging.getLogger("reconciler.app.followers")

#: Seconds a watcher's stop may take (its threads ended, its inotify instance given back)
#: before it is left behind: serve's SIGTERM does not wait on a watchdog thread that hangs.
STOP_WAIT = 5.0
#: Watchers left behind (threads still running, an inotify instance still held) before a
#: vault is followed by polling instead: each one holds one of the user's 128 instances.
MAX_LEFT_BEHIND = 3


def dispose(observer: Any, name: str) -> list[str]:
    """Stop ``observer`` and check that it gave everything back: its threads ended, its
    inotify instance closed. Watchdog's stop does not always close the instance: a
    reader thread stopped before its first read (a failed start, a restart soon after
    a start, a loaded machine) leaves its loop without closing it, and a stop that
    raises before it reaches the reader leaves the reader and its dispatcher running.
    An instance left open is closed here; what cannot be given back is returned (the caller
    counts it: after ``MAX_LEFT_BEHIND`` a vault is polled instead)."""
    if observer.ident == threading.get_ident():
        observer.stop()  # (from its own thread: nothing to wait for)
        return []
    # stopped from a thread of its own: the stop joins watchdog's threads with no
    # timeout, and serve's SIGTERM must not wait on one that hangs
    stopper = threading.Thread(
        target=_stop_observer, args=(observer, name), name=f"watch-stop {name}"
    )
    stopper.daemon = True
    deadline = _monotonic() + STOP_WAIT
    stopper.start()
    stopper.join(timeout=STOP_WAIT)
    left = [] if not stopper.is_alive() else ["its stop still waits on watchdog"]
    reader = getattr(observer, "_inotify_fd", None)
    if reader is not None:
        if not reader.stopped_event.is_set():  # (the stop raised before it got there)
            try:
                reader.stop()
            except Exception as exc:
                log.warning("watch %s: stopping the inotify reader: %s", name, exc)
        _join(reader, deadline)
        if reader.is_alive():
            left.append("its inotify reader thread still runs")
        elif _close_left_open(reader):
            log.warning(
                "watch %s: watchdog left the stopped watcher's inotify instance open; closed it",
                name,
            )
    if not stopper.is_alive() and observer.is_alive():
        # (a stop that raised never woke the observer thread from its queue: woken here)
        with contextlib.suppress(queue.Full):
            observer.event_queue.put_nowait(EventDispatcher.stop_event)
    _join(observer, deadline)
    if observer.is_alive():
        left.append("its observer thread still runs")
    return left


def _stop_observer(observer: Any, name: str) -> None:
    try:
        observer.stop()
    except Exception:  # (checked by _dispose: the reader is stopped there)
        log.exception("watch %s: stopping the watcher", name)


def _monotonic() -> float:
    # (real time, not the watch's clock: a manual clock in tests does not move by itself)
    return time.monotonic()


def _join(thread: threading.Thread, deadline: float) -> None:
    if thread.ident is not None:  # (one never started, as in a failed start, has no end)
        thread.join(timeout=max(deadline - _monotonic(), 0.1))


def _close_left_open(reader: Any) -> bool:
    """Close a stopped watchdog ``InotifyFD``'s descriptors if its reader thread ended without
    closing them (True then). Its own close closes them only when the reader is not in a
    read (``_is_reading``), and leaves them to the reader otherwise; a reader that ended
    before it read, or on an error, never does."""
    if not all(hasattr(reader, a) for a in ("_lock", "_closed", "_is_reading", "_inotify_fd")):
        return False  # (another watchdog than 7.1's: its own close is trusted)
    with reader._lock:
        if not reader._closed or not reader._is_reading:
            return False  # (closed by watchdog: by close(), or by the reader after a read)
        reader._is_reading = False  # (no one closes them twice)
        fd = reader._inotify_fd
        try:
            still_open = os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            still_open = False
        if still_open:
            reader._close_resources()
        return still_open
