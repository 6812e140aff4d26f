"""Which files of a repository are a git source's documents, and their sidecars: read from the
tracked branch's tip commit (``ls-tree``), never from a working tree, so uncommitted edits do
not count.

A document is a regular file below ``subdir`` that the vocabulary selects (``include`` /
``exclude``, or the old ``glob``). A symlink is never followed: one that points inside the
source is skipped (its target is read itself), one that points out of it is a
``LINK_OUTSIDE_ROOT`` problem; a sidecar that is a symlink or lies behind one is never read. A
file name that is not UTF-8 is an ``UNDECODABLE`` problem.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from connectors.frontmatter import NoteRefused
from connectors.git.command import Git
from connectors.linking import ProblemFactory
from connectors.vocabulary import Vocabulary
from reconciler.model import ProblemKind, SourceProblem

__all__ = ["FILE_MODES", "LINK_MODE", "Scope", "decodes", "read_sidecar", "select", "sidecar_blobs"]

log = logging.getLogger(__name__)

FILE_MODES = {b"100644", b"100755"}
LINK_MODE = b"120000"
#: Stands for a sidecar that is a symlink or lies behind one (never read).
_LINKED = "symlink"


@dataclass(frozen=True)
class Scope:
    """The part of a repository a source reads: a folder (``subdir``, "" for the whole
    repository) and the vocabulary that says which of its files are documents."""

    subdir: str
    vocabulary: Vocabulary

    def selects(self, path: str) -> bool:
        """Whether a path in the repository is a file of this source."""
        if self.subdir:
            if not path.startswith(self.subdir + "/"):
                return False
            path = path[len(self.subdir) + 1 :]
        return self.vocabulary.selects(path)

    def rel(self, path: str) -> str:
        """A repository path relative to ``subdir`` (the source's root)."""
        return path[len(self.subdir) + 1 :] if self.subdir else path

    def repo_path(self, rel: str) -> str:
        """A path relative to the source's root as a path in the repository."""
        return f"{self.subdir}/{rel}" if self.subdir else rel


def select(
    git: Git,
    git_dir: Path,
    commit: str,
    scope: Scope,
    problems: list[SourceProblem],
    problem: ProblemFactory,
) -> tuple[dict[str, str], dict[str, str]]:
    """Path in the repository -> blob id of every file of the source at ``commit``, and
    sidecar path (relative to the source's root) -> blob id of every file that is the sidecar
    of one of them."""
    out = git.run("ls-tree", "-r", "-z", "--full-tree", commit, git_dir=git_dir, what="the tree")
    selected: dict[str, str] = {}
    links: dict[str, str] = {}
    files: dict[str, str] = {}
    linked: set[str] = set()  # symlinks, for sidecars that are one or lie behind one
    vocabulary = scope.vocabulary
    wants_sidecars = vocabulary.sidecar_path("x") is not None
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        mode, kind, oid = meta.split(b" ")
        path = raw.decode("utf-8", "surrogateescape")
        if wants_sidecars and kind == b"blob" and mode in FILE_MODES:
            files[path] = oid.decode("ascii")
        elif wants_sidecars and mode == LINK_MODE:
            linked.add(path)
        if kind != b"blob" or not scope.selects(path):
            continue
        if not decodes(raw):
            problems.append(
                problem(
                    ProblemKind.UNDECODABLE,
                    "file name is not valid UTF-8",
                    _printable(scope.rel(path)),
                )
            )
        elif mode in FILE_MODES:
            selected[path] = oid.decode("ascii")
        elif mode == LINK_MODE:
            links[path] = oid.decode("ascii")
    if links:
        targets = git.read_blobs(git_dir, links.values())
        for path in sorted(links):
            _check_link(git.name, scope, path, targets.get(links[path]), problems, problem)
    sidecars: dict[str, str] = {}
    for path in selected if wants_sidecars else ():
        where = vocabulary.sidecar_path(scope.rel(path))
        if where is None:
            continue
        full = scope.repo_path(where)
        parts = full.split("/")
        if any("/".join(parts[:n]) in linked for n in range(1, len(parts) + 1)):
            sidecars[where] = _LINKED
        elif full in files:
            sidecars[where] = files[full]
    return selected, sidecars


def sidecar_blobs(sidecars: Mapping[str, str]) -> list[str]:
    """The blob ids of the sidecars that are read (not the symlinked ones)."""
    return [oid for oid in sidecars.values() if oid != _LINKED]


def read_sidecar(
    vocabulary: Vocabulary,
    rel: str,
    sidecars: Mapping[str, str],
    blobs: Mapping[str, bytes | None],
) -> bytes | None:
    """The content of the sidecar of the document at ``rel`` (None: it has none)."""
    where = vocabulary.sidecar_path(rel)
    if where is None or where not in sidecars:
        return None
    if sidecars[where] == _LINKED:
        raise NoteRefused(
            ProblemKind.LINK_OUTSIDE_ROOT,
            f"sidecar {where} is a symbolic link or lies behind one; not read",
        )
    data = blobs.get(sidecars[where])
    if data is None:
        raise NoteRefused(
            ProblemKind.UNREADABLE, f"sidecar {where}: blob {sidecars[where]} is missing"
        )
    return data


def _check_link(
    name: str,
    scope: Scope,
    path: str,
    target: bytes | None,
    problems: list[SourceProblem],
    problem: ProblemFactory,
) -> None:
    """A symlink is never followed; one pointing out of the source is a problem."""
    text = (target or b"").decode("utf-8", "replace")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), text))
    inside = not text.startswith("/") and not resolved.startswith("../") and resolved != ".."
    if inside and (not scope.subdir or resolved.startswith(scope.subdir + "/")):
        log.debug("git %s: skipping symlink %s (its target is read itself)", name, path)
        return
    problems.append(
        problem(
            ProblemKind.LINK_OUTSIDE_ROOT,
            f"symlink to {text}, outside the source; not read",
            scope.rel(path),
        )
    )


def decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _printable(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
