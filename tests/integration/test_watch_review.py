"""Adversarial review of the watch (issue 39): defects found, each a failing reproduction."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from acceptance_kit import GIT_NOTE, Deployment, day, git_deployment
from prometheus_client import CollectorRegistry
from watch_kit import opened, vault_of

from reconciler.app.followers import GIT_POLL, MAX_DELAY, RETRY, GitWatch, VaultWatch
from reconciler.app.watching import Watch


def until_seen(watched: VaultWatch, paths: set[str], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not paths <= set(watched.batch.paths) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert paths <= set(watched.batch.paths), watched.batch.paths


def test_a_mass_retirement_in_the_vault_is_refused_by_the_guard_as_a_full_run_is(
    tmp_path: Path,
) -> None:
    """30 families; 20 notes retired at once (a bad bulk edit, a `git pull` of a bad commit):
    the full job refuses it (over max_changed_fraction, over the floor). The watch's scoped
    run must not write it either."""
    dep = Deployment(tmp_path)
    dep.configure(fraction=0.2)
    names = [f"n{i:02d}" for i in range(30)]
    for name in names:
        dep.note(name, id=name, family=name, status="current", effective_from=day(-50))
    dep.init_ingest()
    assert len(dep.served()) == 30
    watch, clock, registry = opened(dep)
    try:
        watch.tick()
        for name in names[:20]:
            dep.edit_front(name, status="retired")
        until_seen(vault_of(watch), {f"{n}.md" for n in names[:20]})
        clock.advance(MAX_DELAY)
        watch.tick()
        for _ in range(24):  # two minutes: the refused batch is not run again every 5 s
            clock.advance(RETRY)
            watch.tick()
    finally:
        watch.stop()
    assert len(dep.served()) == 30, f"the watch hid {30 - len(dep.served())} families"
    refused = registry.get_sample_value(
        "reconciler_incremental_runs_total", {"source": "hb", "outcome": "failed"}
    )
    assert refused is not None
    assert refused <= 3, refused  # (24 at one every 5 s)


def test_the_watch_weighs_a_large_batch_against_the_whole_corpus(tmp_path: Path) -> None:
    """12 of 30 families retired (over the floor, within a 0.5 fraction of the corpus): the
    watch's run is weighed against the whole table, not only the 12 families it read."""
    dep = Deployment(tmp_path)
    dep.configure(fraction=0.5)
    names = [f"n{i:02d}" for i in range(30)]
    for name in names:
        dep.note(name, id=name, family=name, status="current", effective_from=day(-50))
    dep.init_ingest()
    watch, clock, _registry = opened(dep)
    try:
        watch.tick()
        for name in names[:12]:
            dep.edit_front(name, status="retired")
        until_seen(vault_of(watch), {f"{n}.md" for n in names[:12]})
        clock.advance(MAX_DELAY)
        watch.tick()
    finally:
        watch.stop()
    assert len(dep.served()) == 18


def test_a_rewritten_branch_whose_marked_commit_is_gone_is_still_followed(
    tmp_path: Path,
) -> None:
    """The branch is force-pushed (a squash, a history rewrite) and the commit of the watch's
    mark is gone (pruned, or a fresh mirror of a pod's empty cache): the watch must go on
    from the tip, not fail every poll for ever."""
    repo, dep = git_deployment(tmp_path)
    watch, _clock, _registry = opened(dep)
    watch.tick()  # the first watch's mark: the tip
    watch.stop()
    # history rewritten: one orphan commit with beta retired, the old commits pruned
    repo.git("checkout", "-q", "--orphan", "rewritten")
    repo.write("docs/beta.md", GIT_NOTE.format("beta", "retired", day(-30)))
    repo.commit("squashed")
    repo.git("branch", "-q", "-M", "main")
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "-q", "--prune=now")
    watch, clock, _registry = opened(dep)
    try:
        watched = watch.sources[0]
        assert isinstance(watched, GitWatch)
        for _ in range(3):
            watch.tick()
            clock.advance(GIT_POLL)
        assert watched.alive(), "the watch of gh is down for good"
        assert dep.served() == {"gh:alpha"}
    finally:
        watch.stop()


class _Silent:
    """A TCP server that accepts every connection and never answers (a git host that
    hangs)."""

    def __init__(self) -> None:
        import socket  # noqa: PLC0415

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[object] = []
        import threading  # noqa: PLC0415

        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()


def test_a_git_host_that_hangs_does_not_hold_up_the_vault(tmp_path: Path) -> None:
    """Beside the vault, a git source by URL whose host accepts and never answers: each of
    its polls waits out the git timeout (120 s by default; 6 s here). The watch followed
    every source in one thread, so the vault's changes waited with it; now each source has a
    loop of its own, and the vault's change is served in seconds while gh's read hangs."""
    silent = _Silent()
    dep = Deployment(tmp_path)
    dep.note("runbook", id="runbook", family="runbook", status="current", effective_from=day(-5))
    dep.init_ingest()
    dep.configure(
        source_extra="\n".join(
            [
                "[[sources]]",
                'name = "gh"',
                'type = "git"',
                f'url = "http://127.0.0.1:{silent.port}/r.git"',
                "[sources.options]",
                "timeout = 6",
                f'cache_dir = "{tmp_path / "cache"}"',
            ]
        )
    )
    registry = CollectorRegistry()
    watch = Watch(dep.settings, registry)  # (the real clock: the loops run)
    watch.open()

    def applied() -> float:
        labels = {"source": "hb", "outcome": "applied"}
        return registry.get_sample_value("reconciler_incremental_runs_total", labels) or 0.0

    try:
        watch.start()
        deadline = time.monotonic() + 10
        while not silent.held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert silent.held, "gh was never polled"
        time.sleep(0.5)  # (gh's first read is under way, and hangs)
        started = time.monotonic()
        dep.edit_front("runbook", status="retired")
        while not applied() and time.monotonic() - started < 15:
            time.sleep(0.1)
        took = time.monotonic() - started
        assert applied() == 1.0, f"the vault's change waited {took:.1f}s on the git host"
    finally:
        watch.stop()
        silent.close()
    assert dep.served() == set()


def test_a_row_replaced_by_one_of_an_older_time_moves_the_sql_watermark(tmp_path: Path) -> None:
    """A SQL source polled with ``options.updated_at`` a timestamp: a row deleted and another
    inserted with an older time (an ETL that copies rows with their upstream time, a row
    restored from an archive) leaves the column's maximum and the row count as they were; the
    probe's sum of the instants moves (it said nothing changed, and the change waited for the
    full job)."""
    import sqlite3  # noqa: PLC0415

    from connectors.sql.source import SqlTableSource  # noqa: PLC0415

    db = tmp_path / "docs.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT, stamp TIMESTAMP)")
        conn.executemany(
            "INSERT INTO t VALUES (?, 'x', ?)",
            [("a", "2026-01-01 10:00:00"), ("b", "2026-01-01 11:00:00")],
        )
    source = SqlTableSource("db", url=f"sqlite:///{db}", table="t", updated_at="stamp")
    first = source.probe(None)
    assert first is not None
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM t WHERE id = 'a'")
        conn.execute("INSERT INTO t VALUES ('c', 'y', '2026-01-01 10:30:00')")
    assert source.probe(first) != first


def test_a_vault_whose_folder_is_gone_at_start_does_not_stop_serve(tmp_path: Path) -> None:
    """serve starts while a vault's folder is not there (a mount not up yet at boot, a sync
    folder being re-created) or inotify refuses: the watch said nothing and raised, and
    serve exited 1, every source's jobs with it (a crash loop under Kubernetes). The vault
    is watched from the tick its folder is back, and what changed meanwhile is found."""
    dep = Deployment(tmp_path)
    dep.note("runbook", id="runbook", family="runbook", status="current", effective_from=day(-5))
    dep.note("guide", id="guide", family="guide", status="current", effective_from=day(-5))
    dep.init_ingest()
    away = dep.vault.rename(tmp_path / "away")
    watch, clock, registry = opened(dep)  # (raised FileNotFoundError)
    try:
        watch.tick()
        assert registry.get_sample_value("reconciler_watcher_up", {"source": "hb"}) == 0.0
        time.sleep(0.02)
        note = away / "guide.md"
        note.write_text(note.read_text().replace("status: current", "status: retired"))
        away.rename(dep.vault)
        watch.tick()  # back: watched, and rescanned
        assert vault_of(watch).alive()
        clock.advance(MAX_DELAY)
        watch.tick()
        assert dep.served() == {"hb:runbook"}
    finally:
        watch.stop()


def test_a_run_reads_beside_its_source_only_what_holds_its_families(tmp_path: Path) -> None:
    """``watch_scope.beside``: a source holding no document of the run's families is not read
    at all (an empty set of paths), one holding some is read at their paths (a git source
    reads by path), and the run reads a source at no path as not read: neither scanned nor
    counted unreadable (the run is not partial for it)."""
    from acceptance_kit import Repo  # noqa: PLC0415

    from reconciler.app.operations import engine_options, reconcile  # noqa: PLC0415
    from reconciler.app.watch_scope import beside  # noqa: PLC0415
    from reconciler.app.wiring import open_table  # noqa: PLC0415

    repo = Repo(tmp_path / "repo")
    repo.write("docs/alpha.md", GIT_NOTE.format("alpha", "current", day(-30)))
    repo.commit("start")
    dep = Deployment(tmp_path / "dep")
    dep.note("runbook", id="runbook", family="runbook", status="current", effective_from=day(-5))
    git = f'[[sources]]\nname = "gh"\ntype = "git"\npath = "{repo.root}"\n'
    dep.configure(source_extra=git + '[sources.options]\nsubdir = "docs"')
    dep.init_ingest()
    watch = Watch(dep.settings, CollectorRegistry())
    table = open_table(dep.settings)
    try:
        assert beside(table, watch._built, "hb", frozenset({"hb:runbook"})) == {"gh": frozenset()}
        assert beside(table, watch._built, "hb", frozenset({"gh:alpha"})) == {
            "gh": frozenset({"alpha.md"})
        }
        assert beside(table, watch._built, "gh", frozenset({"gh:alpha"})) == {"hb": frozenset()}
    finally:
        table.close()
    repo.root.rename(tmp_path / "gone")  # (gh unreadable now: a run that reads it is partial)
    dep.edit_front("runbook", status="retired")
    options = engine_options(dep.settings, mode="repair", families=["hb:runbook"])
    report = reconcile(dep.settings, dataclasses.replace(options, paths={"gh": frozenset()}))
    assert not report.sources["gh"].scanned
    assert report.unread_sources == []
    assert report.status() == "succeeded"
    assert dep.served() == {"gh:alpha"}  # (the runbook retired, gh's note as it was)
    report = reconcile(dep.settings, options)  # (read whole: the outage is this run's)
    assert report.unread_sources == ["gh"]
