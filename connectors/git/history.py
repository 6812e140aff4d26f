"""What a git source reads from the tracked branch's history rather than from its files: each
document's identity, version ordinal and start, from its first-parent history (one ``git log``
with rename detection; a merge counts as one change, the change it brought to the branch).

- identity (``source_key``): the frontmatter ``id``, else the file's *first* path in the source
  (relative to ``subdir``, without ``.md``). A file moved or renamed inside the source keeps its
  identity, so its doc id, family and chunks stay put; a file moved in from outside the source
  (another folder, another suffix) enters it then, as a new document. Should two files claim the
  same first path (a file moved away and a new one created in its place), the older keeps it and
  the newer becomes ``<path>@<commit>`` (the commit that added it);
- version ordinal: the frontmatter ``version``, else the number of commits that changed the
  file's content (1 for the commit that added it); a pure rename or mode change is not a version;
- ``effective_from``: the frontmatter's when present (``effective_from = "frontmatter"``, the
  default), else the time of the last commit that changed the *body*. A commit that only edits
  frontmatter (marking a version superseded) does not move its start past its successor's.

"Frontmatter" stands for wherever the source's vocabulary reads the fields
(docs/connectors/mapping.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from connectors.base import SourceUnavailable
from connectors.git.command import Git
from connectors.git.tree import Scope
from connectors.vocabulary import Vocabulary

__all__ = ["Change", "History", "commit_times", "histories", "histories_since", "identities"]

#: (commit time, blob before or None where the file entered the source, blob after).
Change = tuple[datetime, str | None, str]


@dataclass(slots=True)
class History:
    """One tip file's history on the tracked branch, newest change first."""

    first_path: str = ""
    first_commit: str = ""
    #: Position of the first commit in the walk (larger is older).
    first_order: int = -1
    changes: list[Change] = field(default_factory=list)


def histories(
    git: Git, git_dir: Path, commit: str, selected: Mapping[str, str], scope: Scope
) -> dict[str, History]:
    """Each selected file's history along the branch's first parents, renames followed."""
    found, _tracked, _walked, _parent = _log(git, git_dir, [commit, "--root"], selected, scope)
    for path, history in found.items():  # a shallow history may end before the add
        if not history.first_path:
            history.first_path = path
    return found


def histories_since(
    git: Git,
    git_dir: Path,
    commit: str,
    selected: Mapping[str, str],
    scope: Scope,
    before: tuple[str, Mapping[str, History]],
) -> dict[str, History] | None:
    """``histories`` at ``commit`` from those at an earlier commit of the branch (``before``:
    that commit and its histories): only the commits since are read (``git log A..B``), and
    each file's history goes on with the one its name had then. None where that cannot be
    done exactly (``before`` is not on the branch's first-parent line, a file's name then has
    no history): ``histories`` is to be read whole."""
    since, known = before
    if since == commit:
        return {path: known[path] for path in selected} if selected.keys() <= known.keys() else None
    found, tracked, walked, parent = _log(git, git_dir, [f"{since}..{commit}"], selected, scope)
    if walked == 0 or parent != since:  # (the oldest commit walked, and its first parent)
        return None  # (a rewritten branch, or a merge that brought the old tip in aside)
    for name, tip in tracked.items():  # (the files there before: their history goes on)
        old = known.get(name)
        if old is None:
            return None
        new = found[tip]
        new.changes.extend(old.changes)
        new.first_path, new.first_commit = old.first_path, old.first_commit
        new.first_order = old.first_order + walked
    return found


def _log(
    git: Git, git_dir: Path, revisions: list[str], selected: Mapping[str, str], scope: Scope
) -> tuple[dict[str, History], dict[str, str], int, str | None]:
    """Walk ``git log`` of ``revisions`` back from the tip: each selected file's changes in
    it, the names (at the walk's oldest commit) of the files still followed, how many
    commits were walked, and the first parent of the oldest (None: a root commit)."""
    found = {path: History() for path in selected}
    if not found:
        return found, {}, 0, None
    out = git.run(
        "log",
        "--first-parent",
        "--diff-merges=first-parent",
        "-M",
        "--raw",
        "--no-abbrev",
        "--no-relative",
        "-z",
        "--format=%x01%H %ct %P",
        *revisions,
        "--",
        git_dir=git_dir,
        what="the history",
    )
    tracked = {path: path for path in selected}  # name before the commit -> tip path
    tokens = out.split(b"\0")
    sha, when, order = "", datetime.min.replace(tzinfo=UTC), 0
    parent: str | None = None
    entries: list[tuple[str, str, str, str, str]] = []
    index = 0

    def settle() -> None:
        _walk_back(scope, entries, tracked, found, sha, when, order)
        entries.clear()

    while index < len(tokens):
        token = tokens[index].lstrip(b"\n")
        index += 1
        if not token:
            continue
        if token.startswith(b"\x01"):
            settle()
            head, stamp, *parents = token[1:].decode("ascii").split()
            sha, when, order = head, datetime.fromtimestamp(int(stamp), UTC), order + 1
            parent = parents[0] if parents else None
            continue
        fields = token[1:].decode("ascii").split(" ")
        if not token.startswith(b":") or len(fields) != 5 or index >= len(tokens):
            raise SourceUnavailable(f"git {git.name!r}: unexpected git log output")
        old, new, status = fields[2], fields[3], fields[4]
        src = tokens[index].decode("utf-8", "surrogateescape")
        index += 1
        dst = src
        if status[:1] in {"R", "C"}:
            dst = tokens[index].decode("utf-8", "surrogateescape")
            index += 1
        entries.append((status[:1], src, dst, old, new))
    settle()
    return found, tracked, order, parent


def _walk_back(
    scope: Scope,
    entries: list[tuple[str, str, str, str, str]],
    tracked: dict[str, str],
    found: dict[str, History],
    sha: str,
    when: datetime,
    order: int,
) -> None:
    """Walk one commit backwards: attribute its changes, then restore names it renamed."""
    renamed: list[tuple[str, str]] = []
    for status, src, dst, old, new in entries:
        if status in {"A", "C"}:
            tip = tracked.pop(dst, None)
            before: str | None = None
        elif status == "R":
            tip = tracked.pop(dst, None)
            before = old
            if tip is not None and scope.selects(src):
                renamed.append((src, tip))
            else:
                before = None  # moved in from outside the source: it enters here
        elif status in {"M", "T"}:
            tip = tracked.get(dst)
            before = old
        else:
            continue
        if tip is None:
            continue
        history = found[tip]
        if before is None or before != new:
            history.changes.append((when, before, new))
        if before is None:
            history.first_path, history.first_commit, history.first_order = dst, sha, order
    for src, tip in renamed:
        tracked[src] = tip


def identities(scope: Scope, found: Mapping[str, History]) -> dict[str, str]:
    """Each tip file's default key: its first path in the source; the oldest claim wins."""
    claims: dict[str, list[str]] = {}
    for path, history in found.items():
        key = scope.vocabulary.default_key(scope.rel(history.first_path))
        claims.setdefault(key, []).append(path)
    keys: dict[str, str] = {}
    for key, paths in claims.items():
        paths.sort(key=lambda p: (-found[p].first_order, p))
        keys[paths[0]] = key
        for path in paths[1:]:
            keys[path] = f"{key}@{found[path].first_commit[:12] or path}"
    return keys


def commit_times(
    git: Git, git_dir: Path, vocabulary: Vocabulary, wanted: Mapping[str, list[Change]]
) -> dict[str, datetime]:
    """The time of the last commit that changed each file's body (not only its metadata)."""
    times: dict[str, datetime] = {}
    bodies: dict[str, str | None] = {}
    cursor = {path: 0 for path, changes in wanted.items() if changes}
    while cursor:
        needed = {
            oid
            for path, at in cursor.items()
            for oid in wanted[path][at][1:]
            if oid is not None and oid not in bodies
        }
        for oid, data in git.read_blobs(git_dir, needed).items():
            bodies[oid] = vocabulary.body(data) if data is not None else None
        following: dict[str, int] = {}
        for path, at in cursor.items():
            when, old, new = wanted[path][at]
            if old is None or bodies[old] is None or bodies[old] != bodies[new]:
                times[path] = when
            elif at + 1 == len(wanted[path]):
                times[path] = when  # history ends here (shallow)
            else:
                following[path] = at + 1
        cursor = following
    return times
