"""A git source that reads a new tip from the tree it read last (``delta.advance``: the
difference, the commits since) reads what a whole read of that tip reads: for any sequence of
commits (files added, edited, deleted, renamed, moved in and out of the source's folder and
glob, several commits between two reads, a force-push), each scan and each ``scan_paths`` gives
the documents and problems of a fresh source's whole read, and only the first read (and a
force-push's) is whole."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from git_kit import Repo
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

import connectors.git.delta as git_delta
import connectors.git.source as git_source
from connectors.git import GitSource
from reconciler.model import SourceSnapshot

START = datetime(2024, 1, 1, tzinfo=UTC)
#: Documents of the source (``docs/``, ``*.md``), and files beside it: outside its folder,
#: outside its glob.
PATHS = ("docs/a.md", "docs/b.md", "docs/sub/c.md", "docs/d.txt", "other/e.md", "docs/sub/f.md")
BODIES = ("one", "two", "three")
Op = tuple[Any, ...]

_write = st.tuples(st.just("write"), st.sampled_from(PATHS), st.sampled_from(BODIES), st.booleans())
_delete = st.tuples(st.just("delete"), st.sampled_from(PATHS))
_move = st.tuples(st.just("move"), st.sampled_from(PATHS), st.sampled_from(PATHS))
_commit = st.lists(st.one_of(_write, _delete, _move), min_size=1, max_size=3)
#: One read's worth: 1-3 commits, or a force-push (the last commit dropped, one made instead).
_step = st.one_of(
    st.lists(_commit, min_size=1, max_size=3).map(lambda commits: ("commits", commits)),
    _commit.map(lambda commit: ("force", [commit])),
)


def _note(body: str, named: bool) -> str:
    head = "id: shared\n" if named else ""
    return f"---\n{head}status: current\n---\n# Note\n\n{body}\n"


def _apply(repo: Repo, op: Op) -> None:
    kind, path = op[0], op[1]
    there = (repo.root / path).exists()
    if kind == "write":
        repo.write(path, _note(op[2], op[3]))
    elif kind == "delete" and there:
        (repo.root / path).unlink()
    elif kind == "move" and there and not (repo.root / op[2]).exists():
        (repo.root / op[2]).parent.mkdir(parents=True, exist_ok=True)
        (repo.root / path).rename(repo.root / op[2])  # (the commit's rename detection)


@contextmanager
def _counted() -> Iterator[list[tuple[object, str]]]:
    """(the source, the commit) of each tree read whole."""
    read: list[tuple[object, str]] = []
    real = git_delta.whole

    def counted(git, git_dir, commit, scope, problem):  # type: ignore[no-untyped-def]
        read.append((problem.__self__, commit))
        return real(git, git_dir, commit, scope, problem)

    with mock.patch.object(git_source, "whole", counted):
        yield read


def _whole_read(root: Path, paths: set[str] | None) -> SourceSnapshot:
    """A fresh source's whole read; the tree read last is put back after."""
    kept = dict(git_source._LAST_TREE)
    git_source._LAST_TREE.clear()
    fresh = GitSource("docs", root, subdir="docs")
    try:
        return fresh.scan() if paths is None else fresh.scan_paths(paths)
    finally:
        git_source._LAST_TREE.clear()
        git_source._LAST_TREE.update(kept)


def _same(read: SourceSnapshot, whole: SourceSnapshot) -> None:
    assert read.documents == whole.documents
    assert read.problems == whole.problems


@settings(max_examples=examples(15), deadline=None)
@given(first=_commit, steps=st.lists(_step, min_size=1, max_size=5))
@example(  # a file moved away, a new one made at its first path: the older keeps the key
    first=[("write", "docs/b.md", "one", False)],
    steps=[
        ("commits", [[("delete", "docs/b.md")], [("move", "docs/a.md", "docs/b.md")]]),
        ("commits", [[("write", "docs/a.md", "two", False)]]),
    ],
)
def test_a_tip_read_from_the_last_tree_is_the_whole_read(
    first: list[Op], steps: list[tuple[str, list[list[Op]]]]
) -> None:
    git_source._LAST_TREE.clear()
    with tempfile.TemporaryDirectory() as folder, _counted() as read_whole:
        repo = Repo(Path(folder) / "repo")
        repo.write("docs/a.md", _note("zero", False))
        for op in first:
            _apply(repo, op)
        made = 0
        tip = repo.commit("start", when=START)
        source = GitSource("docs", repo.root, subdir="docs")
        _same(source.scan(), _whole_read(repo.root, None))
        expected = [tip]
        for kind, commits in steps:
            forced = kind == "force" and made > 0
            if forced:
                repo.git("reset", "-q", "--hard", "HEAD~1")
            before = tip
            for ops in commits:
                for op in ops:
                    _apply(repo, op)
                made += 1
                tip = repo.commit(f"commit {made}", when=START + timedelta(hours=made))
            if forced:
                expected.append(tip)
            changed = {
                path.removeprefix("docs/")
                for path in repo.git("diff", "--name-only", before, tip).splitlines()
            }
            _same(source.scan_paths(changed), _whole_read(repo.root, changed))
            _same(source.scan(), _whole_read(repo.root, None))
        # only the first read and each force-push's are whole (the comparisons' own aside)
        assert [commit for by, commit in read_whole if by is source] == expected
