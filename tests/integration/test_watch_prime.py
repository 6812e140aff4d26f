"""``serve``'s watch primes a polled git source as it starts: the tree at the tip is read
right after the first tick (whose polls it does not delay), so the first change after a (re)start is read as its difference from
that tree, not whole; a priming that fails is only logged, and the watch goes on (that change
is then read whole, as before)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import pytest
from acceptance_kit import GIT_NOTE, Deployment, day, git_deployment
from git_kit import Repo
from prometheus_client import CollectorRegistry

from connectors.git import delta as git_delta
from connectors.git import source as git_source
from connectors.git.source import GitSource
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock


@contextmanager
def _whole_reads() -> Iterator[list[str]]:
    """The commit of each tree read whole."""
    read: list[str] = []
    real = git_delta.whole

    def counted(git, git_dir, commit, scope, problem):  # type: ignore[no-untyped-def]
        read.append(commit)
        return real(git, git_dir, commit, scope, problem)

    with mock.patch.object(git_source, "whole", counted):
        yield read


def _deployment(tmp_path: Path) -> tuple[Repo, Deployment]:
    repo, dep = git_deployment(tmp_path)
    git_source._LAST_TREE.clear()  # (a restart: no tree read in this process)
    return repo, dep


def _applied(registry: CollectorRegistry) -> float:
    value = registry.get_sample_value(
        "reconciler_incremental_runs_total", {"source": "gh", "outcome": "applied"}
    )
    return value or 0.0


def _retire_beta(repo: Repo, watch: Watch, clock: ManualClock) -> str:
    watch.tick()  # the first watch starts at the tip
    repo.write("docs/beta.md", GIT_NOTE.format("beta", "retired", day(-30)))
    commit = repo.commit("retire beta")
    clock.advance(2.5)
    watch.tick()
    return commit


def test_the_first_change_after_priming_is_read_as_a_difference(tmp_path: Path) -> None:
    repo, dep = _deployment(tmp_path)
    clock = ManualClock(datetime.now(UTC))
    registry = CollectorRegistry()
    watch = Watch(dep.settings, registry, clock=clock)
    watch.open()
    try:
        with _whole_reads() as whole:
            tip = repo.git("rev-parse", "HEAD")
            watch.prime()
            assert whole == [tip]  # the tree at the tip, read as the watch starts
            commit = _retire_beta(repo, watch, clock)
            assert _applied(registry) == 1
            assert dep.served() == {"gh:alpha"}
            assert whole == [tip]  # the change read from the primed tree, not whole
            assert git_source._LAST_TREE[next(iter(git_source._LAST_TREE))][1].commit == commit
    finally:
        watch.stop()


def test_a_stopping_watch_does_not_prime(tmp_path: Path) -> None:
    _repo, dep = _deployment(tmp_path)
    watch = Watch(dep.settings, CollectorRegistry(), clock=ManualClock(datetime.now(UTC)))
    watch.stopping.set()
    with _whole_reads() as whole:
        watch.prime()
    assert whole == []


def test_a_priming_that_fails_leaves_the_watch_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo, dep = _deployment(tmp_path)
    clock = ManualClock(datetime.now(UTC))
    registry = CollectorRegistry()
    watch = Watch(dep.settings, registry, clock=clock)
    watch.open()
    logger = logging.getLogger("reconciler.app.watching")
    logger.addHandler(caplog.handler)  # (alembic's logging config took the root's away)
    try:
        with (
            _whole_reads() as whole,
            mock.patch.object(GitSource, "prime", side_effect=OSError("disk on fire")),
        ):
            watch.prime()
            assert "watch gh: cannot read its source ahead: disk on fire" in caplog.text
            assert whole == []
            commit = _retire_beta(repo, watch, clock)
            assert _applied(registry) == 1
            assert dep.served() == {"gh:alpha"}
            assert whole == [commit]  # not primed: the first change read whole, as before
    finally:
        logger.removeHandler(caplog.handler)
        watch.stop()


def test_the_watch_thread_primes_right_after_its_first_tick(tmp_path: Path) -> None:
    """The first tick's polls come first (a change made just after the start is a change, not
    the start's tip), then the priming."""
    _repo, dep = _deployment(tmp_path)
    watch = Watch(dep.settings, CollectorRegistry(), clock=ManualClock(datetime.now(UTC)))
    done: list[str] = []

    def prime(*_sources: object) -> None:
        done.append("prime")
        watch.stopping.set()

    with (
        mock.patch.object(watch, "prime", side_effect=prime),
        mock.patch.object(watch, "tick", side_effect=lambda *_: done.append("tick")),
    ):
        watch._loop()
    assert done == ["tick", "prime"]
