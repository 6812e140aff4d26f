"""A git source's tree as of a tip (its documents, sidecars, problems, histories and
identities), read whole, or from the tree read last when the branch has moved on from it.

``advance`` reads the new tip as the difference from the last one: one ``git diff-tree`` for
the files added, changed and removed, one ``git log LAST..NEW`` for the histories of the files
it names; the selection, histories and identities of those paths alone are updated, so a
commit's cost is the commit's, not the repository's. The result is the whole read's, to the
identity (``tests/integration/test_git_tree_delta.py``). It gives up (None, logged why) and the
tree is read whole where that cannot be done exactly: the last commit is unknown to the
repository or no longer on the branch's first-parent line (a force-push), the source reads
sidecars, or a path of the source that changed is a symlink or has a name that is not UTF-8.

Kept between two reads (one tree a process, ``source._LAST_TREE``), beside the selection and
histories a whole read holds anyway: ``claims`` (each default key's file: one dict entry a
key, its path and key strings shared with ``selected`` and ``keys``; a list only where several
files claim a key: 20-40 bytes a file) and ``epoch`` (an int).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from connectors.base import SourceUnavailable
from connectors.git.command import Git
from connectors.git.history import (
    Claims,
    History,
    add_claim,
    claim,
    claims_of,
    drop_claim,
    histories,
    histories_since,
    settle_claims,
)
from connectors.git.tree import FILE_MODES, LINK_MODE, Scope, decodes, select
from connectors.linking import ProblemFactory
from reconciler.model import SourceProblem

__all__ = ["Tree", "advance", "whole"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Tree:
    """What a source reads of one tip, before any blob."""

    commit: str
    #: Path in the repository -> blob id, of each document.
    selected: dict[str, str]
    #: Sidecar path (relative to the source's root) -> blob id.
    sidecars: dict[str, str]
    problems: tuple[SourceProblem, ...]
    history: dict[str, History]
    #: Path in the repository -> identity (source key when its metadata names none).
    keys: dict[str, str]
    #: Default key -> the files that claim it.
    claims: Claims
    #: What the histories' ``first_order`` is less than a whole read's (``histories_since``).
    epoch: int = 0


def whole(git: Git, git_dir: Path, commit: str, scope: Scope, problem: ProblemFactory) -> Tree:
    """The tree at ``commit``, read whole (``ls-tree``, the whole history)."""
    problems: list[SourceProblem] = []
    selected, sidecars = select(git, git_dir, commit, scope, problems, problem)
    history = histories(git, git_dir, commit, selected, scope)
    claims = claims_of(scope, history)
    keys = settle_claims(scope, history, claims, {})
    return Tree(commit, selected, sidecars, tuple(problems), history, keys, claims)


def advance(git: Git, git_dir: Path, last: Tree, commit: str, scope: Scope) -> Tree | None:
    """``last`` moved on to ``commit``, from their difference; None (logged why) where the
    tree is to be read whole. ``last`` is changed in place: it is not to be used again."""
    why = "the source reads sidecars" if scope.vocabulary.sidecar_path("x") is not None else ""
    try:
        changed = None if why else _difference(git, git_dir, last.commit, commit, scope)
    except SourceUnavailable as exc:
        why = f"its difference cannot be read ({exc})"
        changed = None
    if changed is None:
        log.info(
            "git %s: %s..%s read whole: %s",
            git.name,
            last.commit[:12],
            commit[:12],
            why or "a symlink or a file name that is not UTF-8 changed",
        )
        return None
    added = {path: oid for path, oid in changed.items() if oid is not None}
    removed = [path for path, oid in changed.items() if oid is None and path in last.selected]
    for path in removed:
        del last.selected[path]
    last.selected.update(added)
    try:
        since = histories_since(
            git, git_dir, commit, last.selected, scope, (last.commit, last.history, last.epoch)
        )
    except SourceUnavailable as exc:
        since, why = None, f"the history since cannot be read ({exc})"
    if since is None or any(p not in since[0] and p not in last.history for p in added):
        log.info(
            "git %s: %s..%s read whole: %s",
            git.name,
            last.commit[:12],
            commit[:12],
            why or f"{last.commit[:12]} is not on the branch's first-parent line (a force-push?)",
        )
        return None
    found, last.epoch = since
    _settle(scope, last, removed, found)
    last.commit = commit
    return last


def _settle(scope: Scope, tree: Tree, removed: list[str], found: dict[str, History]) -> None:
    """Update the histories and identities of the files removed and those ``found``."""
    affected: set[str] = set()
    for path in [*removed, *found]:
        old = tree.history.get(path)
        if old is not None:
            key = claim(scope, old)
            drop_claim(tree.claims, key, path)
            affected.add(key)
    for path in removed:
        del tree.history[path]
        del tree.keys[path]
    tree.history.update(found)
    for path, history in found.items():
        key = claim(scope, history)
        add_claim(tree.claims, key, path)
        affected.add(key)
    settle = {key: tree.claims[key] for key in affected if key in tree.claims}
    settle_claims(scope, tree.history, settle, tree.keys)


def _difference(
    git: Git, git_dir: Path, since: str, until: str, scope: Scope
) -> dict[str, str | None] | None:
    """Path -> new blob id (None: no longer a document's file) of each file of the source
    that differs between two commits; None when one is a symlink or has a name that is not
    UTF-8 (``select`` makes problems of those)."""
    out = git.run(
        "diff-tree",
        "-r",
        "-z",
        "--raw",
        "--no-renames",
        "--no-abbrev",
        since,
        until,
        git_dir=git_dir,
        what=f"the changes {since[:12]}..{until[:12]}",
    )
    tokens = out.split(b"\0")
    changed: dict[str, str | None] = {}
    for meta, raw in zip(tokens[0::2], tokens[1::2], strict=False):
        fields = meta[1:].split(b" ")
        if not meta.startswith(b":") or len(fields) != 5:
            raise SourceUnavailable(f"git {git.name!r}: unexpected git diff-tree output")
        old_mode, new_mode, _old, new, _status = fields
        path = raw.decode("utf-8", "surrogateescape")
        if not scope.selects(path):
            continue
        if LINK_MODE in (old_mode, new_mode) or not decodes(raw):
            return None
        changed[path] = new.decode("ascii") if new_mode in FILE_MODES else None
    return changed
