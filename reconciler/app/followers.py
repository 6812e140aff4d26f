"""What ``serve``'s watch follows: a vault's folder through filesystem events (debounced,
rescanned when events may have been lost), a git branch's tip polled. Each gathers the
changed paths in a ``Batch``, each path dated as its source dates it (file mtime, commit
time), until the watch (``reconciler.app.watching``) reconciles it."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from reconciler.app.observers import MAX_LEFT_BEHIND, dispose
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports.source import SystemOfRecord

if TYPE_CHECKING:
    from reconciler.stores.sql.watermarks import WatchMark

log = logging.getLogger(__name__)

#: Seconds a vault must be quiet before its batch of changes is reconciled.
DEBOUNCE = 0.3
#: Seconds after a batch's first event that it is reconciled even if events keep coming.
MAX_DELAY = 2.0
#: Seconds between two reads of a git source's branch tip.
GIT_POLL = 2.0
#: Seconds before a batch whose run failed (or found the lease held) is tried again.
RETRY = 5.0
#: Seconds before a batch whose run the guard refused is tried again: each try is one more
#: refused run in the run log, and nothing changes until someone approves its plan or the
#: source is put right (the source's later changes join that batch, and wait as long).
REFUSED_RETRY = 60.0
#: Seconds at least between two looks a webhook's nudges bring forward (a poll, a vault's
#: rescan): a flood of them (a signed delivery replayed, a sender retrying in a loop) read
#: the source at every tick of the watch, ten times a second.
NUDGE_GAP = 2.0


@dataclass
class Batch:
    """Changes seen and not yet reconciled: each path with the source's date of its change."""

    paths: dict[str, datetime] = field(default_factory=dict)
    #: The git commit the batch reaches (None for a vault).
    mark: str | None = None
    first_seen: float | None = None
    last_seen: float | None = None
    #: Not before this (monotonic): a failed run waits ``RETRY``.
    not_before: float = 0.0

    def add(self, path: str, changed_at: datetime, seen: float) -> None:
        known = self.paths.get(path)
        self.paths[path] = changed_at if known is None else min(known, changed_at)
        self.first_seen = seen if self.first_seen is None else self.first_seen
        self.last_seen = seen

    def oldest(self) -> datetime | None:
        dates = list(self.paths.values())  # (a copy: the watcher's thread adds to it)
        return min(dates) if dates else None


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _mtime(path: Path, clock: Clock) -> datetime:
    return _dates(path, clock)[0]


def _dates(path: Path, clock: Clock) -> tuple[datetime, datetime]:
    """The file's mtime (its date as the source dates it), and the later of its mtime and
    ctime: when it last changed here. A sync tool, ``rsync -a``, ``cp -p`` or a ``mv`` from
    another folder puts a file in place with the mtime it had where it was edited, maybe
    before the watch's mark; its ctime is when it was put here."""
    try:
        found = path.stat()
    except OSError:  # deleted (or moved away): dated when it was seen
        now = clock.now()
        return now, now
    mtime = datetime.fromtimestamp(found.st_mtime, UTC)
    return mtime, max(mtime, datetime.fromtimestamp(found.st_ctime, UTC))


class _Events(FileSystemEventHandler):
    """Hands every file event's path(s) to ``seen``; a directory event, which may stand for
    many files (a folder moved in or out), asks for a rescan."""

    def __init__(self, seen: Callable[[str], None], rescan: Callable[[], None]) -> None:
        self.seen = seen
        self.rescan = rescan

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self._handle(event)
        except Exception:  # (an exception here ends watchdog's observer thread: the watch
            # would be restarted, and its events until then lost; a rescan finds them instead)
            log.exception("watch: cannot handle the file event %s; rescanning", event)
            self.rescan()

    def _handle(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        if event.event_type == "events_lost":  # the kernel's queue overflowed
            self.rescan()
            return
        if event.is_directory:
            if event.event_type in ("moved", "deleted", "created"):
                self.rescan()
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw:
                self.seen(os.fsdecode(raw))


class VaultWatch:
    """A vault's folder, followed through filesystem events."""

    def __init__(self, name: str, root: Path, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.name = name
        self.root = root.resolve()
        self.clock = clock
        self.batch = Batch()
        self._lock = threading.Lock()
        self._observer: Any = None
        self._inode: tuple[int, int] | None = None
        #: Watchers whose stop left something behind (see ``_dispose``); at
        #: ``MAX_LEFT_BEHIND`` the vault is polled instead (no inotify instance).
        self.left_behind = 0
        self._rescan = True
        #: A webhook asked for a rescan; the last rescan (monotonic): ``NUDGE_GAP`` apart.
        self._nudged = False
        self._rescanned_at = float("-inf")
        self._since: datetime | None = None
        self._known: set[str] = set()
        #: The newest source date of the changes reconciled or taken (the mark).
        self._until: datetime | None = None

    def start(self, mark: WatchMark | None, known: set[str]) -> None:
        # no mark yet (the first watch): changes from now on, and paths the table does not know
        self._since = mark.changed_until if mark is not None else None
        self._since = self._since or self.clock.now()
        self._until = self._since
        self._known = known
        try:
            self._observe()
        except OSError as exc:  # (serve exited, every source's jobs with it): each tick
            # tries again, as for a watcher that died, and rescans once it is watched
            log.error("watch %s: cannot watch the vault yet: %s", self.name, exc)

    def _observe(self) -> None:
        self._inode = _inode(self.root)
        if self._inode is None or not self.root.is_dir():
            # (asked before watchdog makes an inotify instance and its reader thread, which it
            # does before it looks at the folder, and which a failed start does not always give
            # back: a vault gone leaked one a tick, until the user had none left, every watch
            # on the machine failing, and the threads kept serve from exiting)
            raise FileNotFoundError(errno.ENOENT, "the vault's folder is gone", str(self.root))
        polling = self.left_behind >= MAX_LEFT_BEHIND
        observer = PollingObserver() if polling else Observer()
        observer.daemon = True
        try:
            observer.schedule(_Events(self._seen, self._ask_rescan), str(self.root), recursive=True)
            observer.start()
        except BaseException:
            # (watchdog made the inotify instance and its reader thread in schedule(), before
            # it looked at the folder: given back here, and checked)
            self._dispose(observer)
            raise
        self._observer = observer
        with self._lock:
            self._rescan = True  # events before it started (or while it was dead) are lost

    def _ask_rescan(self) -> None:
        with self._lock:
            self._rescan = True

    def nudge(self) -> None:
        """Look again now (a webhook): a rescan for what the events may not have said, at
        most once every ``NUDGE_GAP`` seconds."""
        with self._lock:
            self._nudged = True

    def _seen(self, raw: str) -> None:
        try:
            rel = Path(raw).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return
        if any(part.startswith(".") for part in rel.split("/")):
            return  # editors' swap files, .obsidian/, .git/: never documents
        changed = _mtime(self.root / rel, self.clock)
        with self._lock:
            self.batch.add(rel, changed, self.clock.monotonic())

    def poll(self, now: float) -> None:
        with self._lock:
            nudged = self._nudged and now - self._rescanned_at >= NUDGE_GAP
            rescan = self._rescan or nudged
            if rescan:
                self._rescan = self._nudged = False
        if rescan:
            self._rescanned_at = now
            self._rescan_files(now)

    def _rescan_files(self, now: float) -> None:
        """Events may have been lost: every file changed since the mark, and every path new to
        or gone from the identity map, is a change."""
        on_disk: dict[str, Path] = {}
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for file in files:
                if not file.startswith("."):
                    path = Path(folder) / file
                    on_disk[path.relative_to(self.root).as_posix()] = path
        found = 0
        with self._lock:
            for rel, path in on_disk.items():
                changed, here = _dates(path, self.clock)
                if rel not in self._known or self._since is None or here > self._since:
                    self.batch.add(rel, changed, now)
                    found += 1
            for rel in self._known - on_disk.keys():
                self.batch.add(rel, self.clock.now(), now)
                found += 1
        log.info("watch %s: rescanned the vault: %d change(s) to reconcile", self.name, found)

    def due(self, now: float) -> bool:
        with self._lock:
            batch = self.batch
            if not batch.paths or now < batch.not_before:
                return False
            assert batch.first_seen is not None
            assert batch.last_seen is not None
            return now - batch.last_seen >= DEBOUNCE or now - batch.first_seen >= MAX_DELAY

    def take(self) -> Batch:
        """The batch to reconcile; new events start the next one."""
        with self._lock:
            taken, self.batch = self.batch, Batch()
        return taken

    def give_back(self, batch: Batch, now: float, wait: float = RETRY) -> None:
        """A batch whose run did not commit: merged into the pending one, retried ``wait``
        seconds later."""
        with self._lock:
            for path, changed in batch.paths.items():
                self.batch.add(path, changed, now)
            self.batch.first_seen = min(self.batch.first_seen or now, batch.first_seen or now)
            self.batch.not_before = now + wait

    def done(self, batch: Batch, known: Iterable[str], gone: Iterable[str]) -> None:
        newest = max(batch.paths.values(), default=None)
        if newest is not None:  # (an mtime ahead of the clock is no mark: changes made
            # while serve is down, before that date, would be missed at its next start)
            newest = min(newest, self.clock.now())
        if newest is not None and (self._until is None or newest > self._until):
            self._until = newest
        self._since = self._until  # a later rescan looks only past what was reconciled
        self._known |= set(known)
        self._known -= set(gone)

    def reached(self) -> tuple[str | None, datetime | None]:
        return None, self._until

    def alive(self) -> bool:
        """The watcher runs, on the folder that is the vault's now (one moved away and
        another put in its place, a remount: the old watcher sees nothing of the new one)."""
        return self.dead() is None

    def dead(self) -> str | None:
        """Why the watcher does not follow the vault (None: it does), for the log line of the
        restart that follows: the next person reading it learns which of these it was."""
        observer = self._observer
        if observer is None:
            return "no watcher (stopped, or its last start failed)"
        if observer.stopped_event.is_set():  # (not by this watch: its stop forgets it)
            return "its observer was stopped"
        if not observer.is_alive():
            return "its observer thread ended (an exception in it: see the log above)"
        for emitter in list(observer.emitters):
            if not emitter.is_alive():  # (watchdog ends it when the folder itself is deleted)
                return "its emitter thread ended (the folder deleted, or an exception in it)"
        reader = getattr(observer, "_inotify_fd", None)  # (watchdog's, one an observer)
        if reader is not None and not reader.is_alive():
            return "its inotify reader thread ended (an exception in it: see the log above)"
        now = _inode(self.root)
        if now != self._inode:
            return f"the folder is another now (device, inode {self._inode} -> {now})"
        return None

    def restart(self) -> None:
        """The watcher died: a new one, and a rescan for what it missed."""
        self.stop()
        self._observe()

    def stop(self) -> None:
        """Stop the watcher, within ``STOP_WAIT`` seconds whatever watchdog does."""
        observer, self._observer = self._observer, None
        if observer is not None:
            self._dispose(observer)

    def _dispose(self, observer: Any) -> None:
        """Stop ``observer`` and check that it gave everything back (``observers.dispose``);
        what it could not is counted, and after ``MAX_LEFT_BEHIND`` the vault is polled."""
        left = dispose(observer, self.name)
        if left:
            self.left_behind += 1
            log.error(
                "watch %s: a stopped watcher was left behind (%s): %d so far%s",
                self.name,
                ", ".join(left),
                self.left_behind,
                "; the vault is polled from now on (no inotify instance)"
                if self.left_behind == MAX_LEFT_BEHIND
                else "",
            )


class Polled:
    """What a polled source's follower holds: the source, its interval, the pending batch,
    when it is next polled and whether its last poll answered."""

    def __init__(
        self,
        name: str,
        source: SystemOfRecord,
        *,
        clock: Clock = SYSTEM_CLOCK,
        interval: float = GIT_POLL,
    ) -> None:
        self.name = name
        self.source = source
        self.clock = clock
        self.interval = interval
        self.batch = Batch()
        self._until: datetime | None = None
        self._next_poll = 0.0
        #: When it was last polled (monotonic): a nudge brings the next poll no nearer.
        self._polled_at = float("-inf")
        self._up = True

    def take(self) -> Batch:
        taken, self.batch = self.batch, Batch()
        return taken

    def alive(self) -> bool:
        return self._up

    def restart(self) -> None:
        self._next_poll = 0.0

    def nudge(self) -> None:
        """Poll at the next tick (a webhook), or ``NUDGE_GAP`` after the last poll."""
        self._next_poll = min(self._next_poll, self._polled_at + NUDGE_GAP)

    def stop(self) -> None:
        return None


class GitWatch(Polled):
    """A git source's branch tip, polled."""

    #: The commit reconciled.
    _commit: str | None = None
    #: The paths the identity map knows of this source.
    _known: frozenset[str] = frozenset()

    def start(self, mark: WatchMark | None, known: set[str]) -> None:
        self._known = frozenset(known)
        if mark is not None:
            self._commit = mark.mark
            self._until = mark.changed_until
            return
        from connectors.git.changes import head  # noqa: PLC0415

        try:  # the first watch starts at the tip: what came before is the full job's
            tip = head(self.source)  # type: ignore[arg-type]
        except Exception as exc:  # unreachable now: the first poll that reads it starts there
            log.warning("watch %s: cannot read the branch tip: %s", self.name, exc)
            return
        log.info("watch %s: starting at commit %s", self.name, tip.commit[:12])
        self._commit, self._until = tip.commit, tip.committed_at

    def poll(self, now: float) -> None:
        from connectors.git.changes import changed_paths, head, tree_paths  # noqa: PLC0415

        if now < self._next_poll or now < self.batch.not_before:
            return
        self._next_poll, self._polled_at = now + self.interval, now
        try:
            tip = head(self.source)  # type: ignore[arg-type]
            if self._commit is None:
                # the first watch of this source starts at its tip: what came before is the
                # full job's
                log.info("watch %s: starting at commit %s", self.name, tip.commit[:12])
                self._commit, self._until = tip.commit, tip.committed_at
                self.batch.mark = tip.commit
                self._up = True
                return
            if tip.commit in (self._commit, self.batch.mark):
                self._up = True
                return
            since = self.batch.mark or self._commit
            paths = changed_paths(self.source, since, tip.commit)  # type: ignore[arg-type]
            if paths is None:  # the mark's commit is gone: every path at the tip, and gone
                log.warning(
                    "watch %s: commit %s is no longer in the repository (the branch was "
                    "rewritten): looking at every path at the tip %s",
                    self.name,
                    since[:12],
                    tip.commit[:12],
                )
                paths = tree_paths(self.source, tip.commit) | self._known  # type: ignore[arg-type]
        except Exception as exc:  # an unreachable repository is retried at the next poll
            if self._up:
                log.warning("watch %s: cannot read the branch tip: %s", self.name, exc)
            self._up = False
            return
        self._up = True
        log.info(
            "watch %s: branch moved %s..%s: %d path(s) changed",
            self.name,
            since[:12],
            tip.commit[:12],
            len(paths),
        )
        for path in paths:
            self.batch.add(path, tip.committed_at, now)
        self.batch.mark = tip.commit
        if not paths:  # nothing under the source's root: the mark moves at once
            self.batch.first_seen = self.batch.last_seen = now

    def due(self, now: float) -> bool:
        return self.batch.mark not in (None, self._commit) and now >= self.batch.not_before

    def give_back(self, batch: Batch, now: float, wait: float = RETRY) -> None:
        batch.not_before = now + wait
        self.batch = batch

    def done(self, batch: Batch, known: Iterable[str], gone: Iterable[str]) -> None:
        self._known = (self._known | set(known)) - set(gone)
        self._commit = batch.mark
        newest = max(batch.paths.values(), default=None)
        if newest is not None:
            self._until = newest

    def reached(self) -> tuple[str | None, datetime | None]:
        return self._commit, self._until


#: The connector types the watch follows through events or a branch's tip.
WATCHED_TYPES = frozenset({"vault", "git"})
#: The connector types the watch polls, when their source sets ``poll_interval``.
POLLED_TYPES = frozenset({"http", "confluence", "sql"})


def followed(config: Any) -> bool:
    """Whether ``serve``'s watch follows a ``[[sources]]`` entry: vault and git unless
    ``watch = false``; http, confluence and sql when they set ``poll_interval`` too."""
    if not config.watch:
        return False
    return config.type in WATCHED_TYPES or (
        config.type in POLLED_TYPES and config.poll_interval is not None
    )
