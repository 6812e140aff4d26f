"""What changed in a git source between two commits (``serve``'s watch polls it).

``head`` reads the tracked branch's tip and its commit time (a url source's mirror is
fetched first, as a scan fetches it); ``changed_paths`` lists the source's documents (and
sidecars, relative to its root) that differ between the last reconciled commit and the tip,
both sides of a rename, without reading any blob.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

from connectors.git.repository import open_repository, tip
from connectors.git.source import GitSource


@dataclass(frozen=True)
class Tip:
    """The tracked branch's tip: its commit and the commit's time (the source's date of the
    change)."""

    commit: str
    committed_at: datetime


def head(source: GitSource) -> Tip:
    """The tip of ``source``'s branch (``SourceUnavailable`` when git cannot say)."""
    git = source._git  # the source's own git command (its name, timeout)
    git_dir = open_repository(git, path=source.path, url=source.url, cache_dir=source.cache_dir)
    _ref, commit = tip(git, git_dir, source.branch)
    out = git.run("show", "-s", "--format=%ct", commit, git_dir=git_dir, what="the tip's time")
    return Tip(commit, datetime.fromtimestamp(int(out.strip() or b"0"), UTC))


def changed_paths(source: GitSource, since: str, until: str) -> set[str] | None:
    """Paths relative to the source's root (its ``subdir``) changed between two commits; every
    path under the root, documents or not (the caller keeps what it knows). None when
    ``since`` is no commit of the repository any more (the branch was rewritten and the old
    commits pruned, or a fresh mirror never had them): what changed since cannot be told."""
    git = source._git
    git_dir = open_repository(git, path=source.path, url=source.url, cache_dir=source.cache_dir)
    found = git.run(
        "rev-parse",
        "--verify",
        "--quiet",
        f"{since}^{{commit}}",
        git_dir=git_dir,
        what=f"the commit {since[:12]}",
        ok=(1,),
    )
    if not found.strip():
        return None
    out = git.run(
        "diff",
        "--name-only",
        "--no-renames",
        "-z",
        since,
        until,
        "--",
        *([source.subdir] if source.subdir else []),
        git_dir=git_dir,
        what=f"the changes {since[:12]}..{until[:12]}",
    )
    prefix = source.subdir + "/" if source.subdir else ""
    paths = set()
    for raw in out.split(b"\0"):
        if not raw:
            continue
        path = os.fsdecode(raw)
        if path.startswith(prefix):
            paths.add(path[len(prefix) :])
    return paths


def tree_paths(source: GitSource, commit: str) -> set[str]:
    """Every path under the source's root (its ``subdir``) at ``commit``."""
    git = source._git
    git_dir = open_repository(git, path=source.path, url=source.url, cache_dir=source.cache_dir)
    out = git.run(
        "ls-tree",
        "-r",
        "-z",
        "--name-only",
        commit,
        "--",
        *([source.subdir] if source.subdir else []),
        git_dir=git_dir,
        what=f"the tree of {commit[:12]}",
    )
    prefix = source.subdir + "/" if source.subdir else ""
    return {
        path[len(prefix) :]
        for path in (os.fsdecode(raw) for raw in out.split(b"\0") if raw)
        if path.startswith(prefix)
    }
