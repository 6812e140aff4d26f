"""``serve``'s watch: a change in a vault or a git repository reaches the served set in seconds, not
at the next full job.

A vault is watched through filesystem events (watchdog), debounced: a batch is reconciled once the
vault has been quiet for ``DEBOUNCE`` seconds, or ``MAX_DELAY`` after its first event in a storm. A
git source's branch tip is polled every ``GIT_POLL`` seconds; only the paths that changed between
the last reconciled commit and the tip are looked at. The documents at those paths name their
families (the identity map; a path it does not know is read from a scan of that source), and those
families go through the same scoped run as ``reconciler repair --family`` (widened by membership,
planned, guarded, audited and applied under the lease).

Each source's watermark (the last reconciled commit; the source's date of the newest change
reconciled) is written to the ``watch_marks`` table only after that run has committed, so a restart
resumes from it: a vault is rescanned at start (files changed since the mark, and paths new to or
gone from the identity map), as it is whenever its watcher died (it is started again). A run that
cannot take the lease, or fails, keeps its changes pending and is tried again ``RETRY`` seconds
later. Each source is followed by a thread of its own, so a source whose read hangs (a git host
that accepts and never answers, until the git timeout) holds up no other; their runs take turns.
The full job stays the safety net: a change the watch missed is its own finding there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from apscheduler.events import JobExecutionEvent
from prometheus_client import CollectorRegistry

from reconciler.app.followers import (
    GIT_POLL,
    REFUSED_RETRY,
    RETRY,
    GitWatch,
    VaultWatch,
    followed,
)
from reconciler.app.operations import engine_options, reconcile
from reconciler.app.polling import POLL, PolledWatch
from reconciler.app.resuming import drifted_in
from reconciler.app.watch_metrics import WatchMetrics
from reconciler.app.watch_reports import few as _few
from reconciler.app.watch_reports import note_missed, status_of
from reconciler.app.watch_scope import WatchScope, beside, keyed_scope, watch_scope
from reconciler.app.wiring import build_sources, open_index, open_table
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import LeaseBusy
from reconciler.model import SourceDocument
from reconciler.pipeline.values import Report
from reconciler.settings import Settings
from reconciler.stores.sql.watermarks import SqlWatchMarks

log = logging.getLogger(__name__)

#: How often the watch loop looks at its sources.
TICK = 0.1
#: Seconds between two log lines of a watcher that keeps failing to start for one reason (it
#: is tried again every tick, and ``reconciler_watcher_up`` says 0 meanwhile).
REPEAT_LOG = 60.0

Followed = VaultWatch | GitWatch | PolledWatch
Runs = Callable[[frozenset[str], str, frozenset[str] | None], Report]


class Watch:
    """The watch loops of ``serve``: a thread a watched source, that follows it and
    reconciles each batch of changes through a scoped run."""

    def __init__(
        self,
        settings: Settings,
        registry: CollectorRegistry,
        *,
        clock: Clock = SYSTEM_CLOCK,
        run: Runs | None = None,
        stopping: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.metrics = WatchMetrics(registry)
        self.stopping = stopping or threading.Event()
        self._run = run or self._scoped_run
        self.sources: list[Followed] = []
        chosen = [s for s in settings.sources if followed(s)]
        built = {s.name: s for s in build_sources(settings, [c.name for c in chosen])}
        for config in chosen:
            source = built[config.name]
            if config.type == "vault":
                root = Path(getattr(source, "path", config.path or "."))
                self.sources.append(VaultWatch(config.name, root, clock=clock))
            elif config.type == "git":
                every = config.poll_interval.total_seconds() if config.poll_interval else GIT_POLL
                self.sources.append(GitWatch(config.name, source, clock=clock, interval=every))
            else:
                every = (config.poll_interval or timedelta(seconds=POLL)).total_seconds()
                self.sources.append(
                    PolledWatch(config.name, source, clock=clock, interval=every, drift=self._drift)
                )
        self._built = built
        #: One loop thread a source: a source whose poll hangs (a git host that accepts and
        #: never answers holds its read for the git timeout) holds up no other source's changes.
        self._threads: list[threading.Thread] = []
        #: A lock a source, held while it is read (its poll, its priming, a run that reads it):
        #: its connector is never used by two threads at once (two git fetches in one cache).
        self._reading = {name: threading.Lock() for name in built}
        #: The table and chunk index kept open across runs (``[watch] keep_open``), under ``_kept``:
        #: a run holds it, and ``release`` (serve's job is about to open them) waits for it.
        self._table: Any = None
        self._index: Any = None
        self._kept = threading.Lock()
        self._used = 0.0
        self.keep_open = settings.watch.keep_open.total_seconds()
        #: Called after a run applied (serve plans the next boundary again).
        self.after_run: Callable[[], object] | None = None
        #: Vaults whose watcher fails to start: (the reason last logged, when, starts failed
        #: since that line, starts failed in all): a folder gone for an hour is a line a
        #: minute, not ten a second.
        self._failing: dict[str, tuple[str, float, int, int]] = {}

    def start(self) -> None:
        """Read the marks, start the watchers and the loop thread."""
        self.open()
        if self.keep_open > 0:  # (opened now, not at the first change)
            with self._kept:
                try:
                    self._kept_table()
                    self._index = open_index(self.settings)
                    self._index.ready_reads()  # (local mode: its ids by doc_id, read now)
                except Exception as exc:  # the first run opens them, and says what fails
                    log.warning("watch: cannot open the stores yet: %s", exc)
        self._threads = [
            threading.Thread(target=self._loop, args=([w],), name=f"watch {w.name}", daemon=True)
            for w in self.sources
        ]
        for thread in self._threads:
            thread.start()

    def open(self) -> None:
        """Read the marks and start the watchers (``tick`` then follows them)."""
        table = open_table(self.settings)
        try:
            store = SqlWatchMarks.of(table)
            marks = store.marks()
            for watched in self.sources:
                mark = marks.get(watched.name)
                watched.start(mark, store.known_paths(watched.name))
                log.info(
                    "watch %s: %s",
                    watched.name,
                    "resuming from its mark "
                    + (f"{mark.mark[:24]} " if mark.mark else "")
                    + f"(changes up to {mark.changed_until})"
                    if mark is not None
                    else "no mark yet (first watch): changes from now on",
                )
                commit, until = watched.reached()
                if mark is None and (commit or until):
                    # the first watch's mark, written before any event is taken: a serve
                    # killed before its first run still finds, at its next start, what
                    # changed since (everything before it is the full job's)
                    store.advance(
                        watched.name,
                        mark=commit,
                        changed_until=until,
                        reconciled_at=self.clock.now(),
                    )
        finally:
            table.close()

    def nudge(self, name: str) -> bool:
        """Look at source ``name`` at the next tick (a webhook); False when it is not watched."""
        watched = next((w for w in self.sources if w.name == name), None)
        if watched is None:
            return False
        watched.nudge()
        return True

    def stop(self) -> None:
        self.stopping.set()
        for watched in self.sources:
            watched.stop()
        deadline = time.monotonic() + 30  # (all of them: one stuck in a read is left behind)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=max(deadline - time.monotonic(), 0.1))
        for watched in self.sources:  # (one the loop restarted while it was being stopped)
            watched.stop()
        self.release(timeout=5)  # (a job left behind at stop_grace may hold them)

    def release(self, *, hold: bool = False, timeout: float = -1) -> None:
        """Close the kept table and index once the run holding them has ended; ``hold``: no
        watch run until ``unhold`` (serve's job: local mode and Edge lock their folder)."""
        if self._kept.acquire(timeout=timeout):
            self.release_unlocked()
            if not hold:
                self._kept.release()

    def unhold(self) -> None:
        self._kept.release()

    def release_unlocked(self) -> None:
        """``release``, by the thread that holds ``_kept``."""
        self._close_index()
        table, self._table = self._table, None
        if table is not None:
            table.close()

    def _close_index(self) -> None:
        index, self._index = self._index, None
        if index is not None:
            try:
                index.close()
            except Exception as exc:  # (closing is best effort: the next run opens it anew)
                log.warning("watch: closing the chunk index: %s", exc)

    def _kept_table(self) -> Any:
        if self._table is None:
            self._table = open_table(self.settings)
        self._used = self.clock.monotonic()
        return self._table

    def prime(self, sources: Sequence[Followed] | None = None) -> None:
        """Let each watched source read ahead what it keeps between two reads (its ``prime``,
        where it has one: a git source's tree at its tip), so the first change after a start
        is read as a difference, not whole. In the watch's thread, right after its first tick
        (whose polls it does not hold up); a failure is only logged (that change is then read
        whole)."""
        for watched in self.sources if sources is None else sources:
            prime = getattr(self._built.get(watched.name), "prime", None)
            if prime is None or self.stopping.is_set():
                continue
            try:
                with self._reading[watched.name]:
                    prime()
            except Exception as exc:
                log.warning("watch %s: cannot read its source ahead: %s", watched.name, exc)

    def _loop(self, sources: Sequence[Followed] | None = None) -> None:
        """Tick ``sources`` (every source when None) until the watch stops: ``start`` runs one
        loop a source, in a thread of its own."""
        primed = False
        while not self.stopping.is_set():
            try:
                self.tick(sources)
            except Exception:  # the loop never dies of one source's trouble
                log.exception("watch: unexpected error; going on")
            if not primed:  # (after the first tick: its polls are not held up by it)
                self.prime(sources)
                primed = True
            self.clock.wait(self.stopping, TICK)

    def tick(self, sources: Sequence[Followed] | None = None) -> None:
        """Look at each source once (``sources``, else every one): restart a dead watcher,
        poll, reconcile what is due (one run at a time, whichever thread: ``_kept``)."""
        now = self.clock.monotonic()
        for watched in self.sources if sources is None else sources:
            why = watched.dead() if isinstance(watched, VaultWatch) else None
            if isinstance(watched, VaultWatch) and why is not None:
                if self.stopping.is_set():  # (serve stops: no new watcher behind its stop)
                    continue
                if watched.name not in self._failing:
                    log.warning(
                        "watch %s: the watcher died (%s); starting it again (rescan)",
                        watched.name,
                        why,
                    )
                try:
                    watched.restart()
                except OSError as exc:  # the folder is gone, or inotify refuses: next tick
                    self._failed_start(watched.name, str(exc), now)
                    self.metrics.up.labels(source=watched.name).set(0)
                    continue
                failed = self._failing.pop(watched.name, None)
                if failed is not None:
                    log.warning(
                        "watch %s: watching the vault again (rescan); %d start(s) had failed",
                        watched.name,
                        failed[3],
                    )
            with self._reading[watched.name]:
                watched.poll(now)
            if isinstance(watched, PolledWatch) and watched.unsaved:
                self._save_mark(watched)
            self.metrics.up.labels(source=watched.name).set(1 if watched.alive() else 0)
            oldest = watched.batch.oldest()
            lag = (self.clock.now() - oldest).total_seconds() if oldest is not None else 0.0
            self.metrics.lag.labels(source=watched.name).set(max(lag, 0.0))
            if watched.due(now) and not self.stopping.is_set():
                with self._kept:
                    if self.stopping.is_set():  # (serve stopped while this waited its turn:
                        continue  # the batch stays pending, the next start rescans it)
                    self._reconcile(watched)
                    if self.keep_open <= 0:
                        self.release_unlocked()
        if self._table is not None and self.clock.monotonic() - self._used >= self.keep_open:
            with self._kept:  # ([watch] keep_open: local mode and Edge lock their folder)
                if (
                    self._table is not None
                    and self.clock.monotonic() - self._used >= self.keep_open
                ):
                    self.release_unlocked()  # (idle still, now that no other run holds them)

    def _failed_start(self, name: str, reason: str, now: float) -> None:
        """Log a watcher that cannot start: at once, then again when the reason changes or
        ``REPEAT_LOG`` seconds on, with the starts that failed between."""
        last = self._failing.get(name)
        total = 1 if last is None else last[3] + 1
        if last is not None and last[0] == reason and now - last[1] < REPEAT_LOG:
            self._failing[name] = (last[0], last[1], last[2] + 1, total)
            return
        since = f" ({last[2] + 1} failed start(s) since the last line)" if last else ""
        log.error(
            "watch %s: cannot watch the vault: %s%s; tried again each tick (said again every "
            "%.0f s while it fails)",
            name,
            reason,
            since,
            REPEAT_LOG,
        )
        self._failing[name] = (reason, now, 0, total)

    def _save_mark(self, watched: PolledWatch) -> None:
        """A polled source's mark that moved with nothing to reconcile (its first, or a token
        that moved over no change), written now; tried again at the next tick if it fails."""
        mark, until = watched.reached()
        with self._kept:
            try:
                table = self._kept_table()
                SqlWatchMarks.of(table).advance(
                    watched.name, mark=mark, changed_until=until, reconciled_at=self.clock.now()
                )
                watched.saved()
            except Exception as exc:  # the table did not answer: the next tick writes it
                log.warning("watch %s: cannot write its mark: %s", watched.name, exc)
                self.release_unlocked()
            if self.keep_open <= 0:
                self.release_unlocked()

    def _reconcile(self, watched: Followed) -> None:
        batch = watched.take()
        name = watched.name
        try:
            table = self._kept_table()
            scope = self._scope(table, watched, set(batch.paths))
            families, known, gone = table.known_families(scope.families), scope.known, scope.gone
        except Exception as exc:  # the table did not answer: the batch waits for it
            log.error("watch %s: cannot read the document table: %s; retrying", name, exc)
            self.metrics.runs.labels(source=name, outcome="failed").inc()
            watched.give_back(batch, self.clock.monotonic())
            self.release_unlocked()
            return
        if not families:
            outcome = "idle"
            log.info(
                "watch %s: %d changed path(s), none a document the table knows: nothing "
                "to reconcile",
                name,
                len(batch.paths),
            )
        else:
            log.info(
                "watch %s: %d changed path(s) (%s) -> reconciling family(ies) %s",
                name,
                len(batch.paths),
                _few(batch.paths),
                _few(families),
            )
            try:
                report = self._run(frozenset(families), name, scope.paths)
            except LeaseBusy as exc:
                log.info("watch %s: lease held (%s); trying again in %gs", name, exc, RETRY)
                self.metrics.runs.labels(source=name, outcome="busy").inc()
                watched.give_back(batch, self.clock.monotonic())
                return
            except Exception as exc:
                log.error("watch %s: the scoped run failed: %s; retrying", name, exc)
                self._close_index()  # (opened anew for the retry)
                self.metrics.runs.labels(source=name, outcome="failed").inc()
                watched.give_back(batch, self.clock.monotonic())
                return
            if report.error or report.refused or report.partial:
                why = report.error or ("refused by the guard" if report.refused else "partial")
                wait = REFUSED_RETRY if report.refused else RETRY
                log.error(
                    "watch %s: run %s did not commit: %s; trying again in %gs",
                    name,
                    report.run_id,
                    why,
                    wait,
                )
                self.metrics.runs.labels(source=name, outcome="failed").inc()
                watched.give_back(batch, self.clock.monotonic(), wait)
                return
            outcome = "applied"
            log.info(
                "watch %s: run %s reconciled family(ies) %s: writes %s",
                name,
                report.run_id,
                _few(families),
                report.writes(),
            )
        reconciled_at = self.clock.now()
        watched.done(batch, known, gone)
        commit, until = watched.reached()
        SqlWatchMarks.of(table).advance(
            name, mark=commit, changed_until=until, reconciled_at=reconciled_at
        )
        self.metrics.runs.labels(source=name, outcome=outcome).inc()
        if outcome == "applied" and self.after_run is not None:
            self.after_run()
        for changed in batch.paths.values():
            self.metrics.staleness.labels(source=name).observe(
                max((reconciled_at - changed).total_seconds(), 0.0)
            )

    def after_job(self, event: JobExecutionEvent) -> None:
        """After serve's full job (an APScheduler listener): what it repaired in a watched
        source's documents that the watch had not (``watch_missed.note_missed``)."""
        note_missed(self.settings, self.sources, self.metrics, event)

    def _drift(self, name: str, documents: Sequence[SourceDocument]) -> set[str]:
        """What a polled source changed while serve was down (``reconciler.app.resuming``);
        every document when the table does not answer (the run then says why). A table of its
        own, not ``_kept``'s: its poll holds the source's lock, which a run under ``_kept`` may
        wait for (a deadlock)."""
        try:
            with contextlib.closing(open_table(self.settings)) as table:
                return drifted_in(table, name, documents, now=self.clock.now())
        except Exception as exc:
            log.error("watch %s: cannot read the document table: %s", name, exc)
            return {doc.source_key for doc in documents}

    def _scope(self, table: Any, watched: Followed, paths: set[str]) -> WatchScope:
        """The families at ``paths`` and the paths the run reads (``app.watch_scope``)."""
        if isinstance(watched, PolledWatch):  # (keys: their paths where it reads by path)
            return keyed_scope(table, watched.source, paths, watched.named, watched.paths)
        root = watched.root if isinstance(watched, VaultWatch) else None
        return watch_scope(
            table,
            self._built[watched.name],
            paths,
            exists=(lambda path: (root / path).exists()) if root is not None else None,
        )

    def status(self) -> list[dict[str, Any]]:
        """Each watched source's mark and lag (for /healthz and logs)."""
        return status_of(self.sources, self.clock.now())

    def _scoped_run(
        self, families: frozenset[str], source: str, paths: frozenset[str] | None
    ) -> Report:
        options = engine_options(
            self.settings,
            mode="repair",
            actor="watch",
            families=sorted(families),
            job=f"watch:{source}",
        )
        # (actor "watch": the guard weighs every family of it, against the whole corpus, as
        # it weighs a cron run's; ``guarding.decide``)
        # (the other sources: not read where they hold none of the families, their members'
        # paths where they can be read by path; ``watch_scope.beside``)
        read = beside(self._kept_table(), self._built, source, families)
        if paths is not None:  # (the source's files at these paths alone)
            read[source] = paths
        if read:
            options = dataclasses.replace(options, paths=read)
        if self._index is None:
            self._index = open_index(self.settings)
        kept = (self._kept_table(), self._index)
        with contextlib.ExitStack() as reading:  # (the sources it reads, in one order)
            for name in sorted(self._reading):
                if read.get(name) != frozenset():
                    reading.enter_context(self._reading[name])
            return reconcile(self.settings, options, clock=self.clock, kept=kept)


def start_watch(
    settings: Settings,
    registry: CollectorRegistry,
    *,
    stopping: threading.Event | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Watch | None:
    """``serve``'s watch of its sources, started; None when no source is watched."""
    watch = Watch(settings, registry, clock=clock, stopping=stopping)
    if not watch.sources:
        log.info("watch: no source to watch (vault and git sources; `watch = false` opts out)")
        return None
    watch.start()
    log.info("watch: following %s", ", ".join(w.name for w in watch.sources))
    return watch
