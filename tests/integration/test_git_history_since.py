"""A git source read again at a later tip reads only the commits since the tree it read last
(``histories_since``): through edits, renames, moves into the source, a file deleted and
another added at its path, a frontmatter-only edit, a merge, each scan says exactly what a
scan of the whole history says; a rewritten branch is read whole."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from git_kit import Repo

import connectors.git.delta as git_delta
import connectors.git.source as git_source
from connectors.git import GitSource

START = datetime(2024, 1, 1, tzinfo=UTC)


def _note(title: str, body: str, status: str = "current") -> str:
    return f"---\nstatus: {status}\n---\n# {title}\n\n{body}\n"


def test_the_commits_since_give_the_whole_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(tmp_path / "repo")
    repo.write("docs/a.md", _note("A", "one"))
    repo.write("docs/b.md", _note("B", "one"))
    repo.write("other/x.md", _note("X", "one"))
    repo.commit("start", when=START)
    whole = {"calls": 0}
    read_whole = git_delta.histories

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        whole["calls"] += 1
        return read_whole(*args, **kwargs)

    monkeypatch.setattr(git_delta, "histories", counted)
    source = GitSource("docs", repo.root, subdir="docs")
    source.scan()
    assert whole["calls"] == 1

    def side_merge() -> None:
        repo.git("checkout", "-q", "-b", "side")
        repo.write("docs/sub/b2.md", _note("B", "three"))
        repo.write("docs/c.md", _note("C", "one"))
        repo.commit("on the side", when=START + timedelta(days=20))
        repo.git("checkout", "-q", "main")
        repo.write("docs/x.md", _note("X", "four"))
        repo.commit("on main", when=START + timedelta(days=21))
        repo.git(
            "merge", "-q", "--no-ff", "-m", "merge side", "side", when=START + timedelta(days=22)
        )

    steps: list[Callable[[], None]] = [
        lambda: repo.write("docs/a.md", _note("A", "two")),
        lambda: repo.mv("docs/b.md", "docs/sub/b2.md"),
        lambda: repo.mv("other/x.md", "docs/x.md"),
        (repo.root / "docs/a.md").unlink,
        lambda: repo.write("docs/a.md", _note("A again", "new")),
        lambda: repo.write("docs/x.md", _note("X", "one", status="retired")),
        lambda: repo.write("docs/sub/b2.md", _note("B", "two")),
        side_merge,
    ]
    for day, step in enumerate(steps, start=1):
        step()
        if step is not side_merge:
            repo.commit(f"step {day}", when=START + timedelta(days=day))
        _same_as_whole(source, tmp_path)
    assert whole["calls"] == 1 + len(steps)  # (each whole one: the comparison's own)
    # a rewritten branch: the last tip read is no longer on it, the history is read whole
    repo.git("reset", "-q", "--hard", "HEAD~1")
    repo.write("docs/d.md", _note("D", "one"))
    repo.commit("rewritten", when=START + timedelta(days=40))
    calls = whole["calls"]
    source.scan()
    assert whole["calls"] == calls + 1


def _same_as_whole(source: GitSource, tmp_path: Path) -> None:
    read = source.scan()  # (from the tree read last: the commits since)
    git_source._LAST_TREE.clear()
    fresh = GitSource("docs", source.path, subdir="docs").scan()  # (the whole history)
    assert read.documents == fresh.documents
    assert read.problems == fresh.problems
