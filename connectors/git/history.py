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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from connectors.base import SourceUnavailable
from connectors.git.command import Git
from connectors.git.tree import Scope
from connectors.vocabulary import Vocabulary

__all__ = [
    "Change",
    "Claims",
    "History",
    "add_claim",
    "claim",
    "claims_of",
    "commit_times",
    "drop_claim",
    "histories",
    "histories_since",
    "identities",
    "settle_claims",
]

#: (commit time, blob before or None where the file entered the source, blob after).
Change = tuple[datetime, str | None, str]
#: A commit of ``git log``: (id, time, first parent or None).
_Commit = tuple[str, str, str | None]
#: A file it changed: (status, source path, destination path, old blob, new blob).
_Entry = tuple[str, str, str, str, str]


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
    before: tuple[str, Mapping[str, History], int],
) -> tuple[dict[str, History], int] | None:
    """The histories at ``commit`` that differ from those at an earlier commit of the branch
    (``before``: that commit, its histories and their epoch): only the commits since are read
    (``git log A..B``), and each file they name goes on with the history its name had then;
    every other file's history is the one it had. With the new epoch: ``first_order`` is kept
    less the epoch, so the files not named keep theirs (the order of any two is the order a
    whole read gives). None where that cannot be done exactly (``before`` is not on the
    branch's first-parent line, a file's name then has no history): ``histories`` is to be
    read whole."""
    since, known, epoch = before
    found, tracked, walked, parent = _log(
        git, git_dir, [f"{since}..{commit}"], selected, scope, narrow=True
    )
    if walked == 0 or parent != since:  # (the oldest commit walked, and its first parent)
        return None  # (a rewritten branch, or a merge that brought the old tip in aside)
    epoch += walked
    for history in found.values():  # (those that entered the source since)
        history.first_order -= epoch
    for name, tip in tracked.items():  # (the files there before: their history goes on)
        old = known.get(name)
        if old is None:
            return None
        new = found[tip]
        new.changes.extend(old.changes)
        new.first_path, new.first_commit = old.first_path, old.first_commit
        new.first_order = old.first_order
    return found, epoch


def _log(
    git: Git,
    git_dir: Path,
    revisions: list[str],
    selected: Mapping[str, str],
    scope: Scope,
    *,
    narrow: bool = False,
) -> tuple[dict[str, History], dict[str, str], int, str | None]:
    """Walk ``git log`` of ``revisions`` back from the tip: each selected file's changes in
    it, the names (at the walk's oldest commit) of the files still followed, how many
    commits were walked, and the first parent of the oldest (None: a root commit).
    ``narrow``: only the selected files the log names (the others have no change in it)."""
    if not selected and not narrow:  # (narrow: the walk still says where it ends)
        return {}, {}, 0, None
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
    tokens = out.split(b"\0")
    if narrow:
        named = {dst for entry in _records(git, tokens) if len(entry) == 5 for dst in entry[1:3]}
        selected = {path: "" for path in named if path in selected}
    found = {path: History() for path in selected}
    tracked = {path: path for path in selected}  # name before the commit -> tip path
    sha, when, order = "", datetime.min.replace(tzinfo=UTC), 0
    parent: str | None = None
    entries: list[_Entry] = []
    for record in _records(git, tokens):
        if len(record) == 5:
            entries.append(record)
            continue
        _walk_back(scope, entries, tracked, found, sha, when, order)
        entries.clear()
        sha, stamp, parent = record
        when, order = datetime.fromtimestamp(int(stamp), UTC), order + 1
    _walk_back(scope, entries, tracked, found, sha, when, order)
    return found, tracked, order, parent


def _records(git: Git, tokens: list[bytes]) -> Iterator[_Commit | _Entry]:
    """``git log -z --raw``'s records: (commit, time, first parent or None) for a commit,
    (status, source path, destination path, old blob, new blob) for a file it changed."""
    index = 0
    while index < len(tokens):
        token = tokens[index].lstrip(b"\n")
        index += 1
        if not token:
            continue
        if token.startswith(b"\x01"):
            head, stamp, *parents = token[1:].decode("ascii").split()
            yield (head, stamp, parents[0] if parents else None)
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
        yield (status[:1], src, dst, old, new)


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
    return settle_claims(scope, found, claims_of(scope, found), {})


#: Default key -> the tip file that claims it, or the files when several do (a list only
#: then: one str a key is what most keys cost).
Claims = dict[str, str | list[str]]


def claims_of(scope: Scope, found: Mapping[str, History]) -> Claims:
    """Default key -> the tip files that claim it (their first path in the source)."""
    claims: Claims = {}
    for path, history in found.items():
        add_claim(claims, claim(scope, history), path)
    return claims


def claim(scope: Scope, history: History) -> str:
    """The default key a file's first path claims."""
    return scope.vocabulary.default_key(scope.rel(history.first_path))


def add_claim(claims: Claims, key: str, path: str) -> None:
    """``path`` claims ``key`` too."""
    held = claims.get(key)
    if held is None:
        claims[key] = path
    elif isinstance(held, str):
        claims[key] = [held, path]
    else:
        held.append(path)


def drop_claim(claims: Claims, key: str, path: str) -> None:
    """``path`` no longer claims ``key``."""
    held = claims[key]
    if isinstance(held, str):
        del claims[key]
        return
    held.remove(path)
    if len(held) == 1:
        claims[key] = held[0]


def settle_claims(
    scope: Scope, found: Mapping[str, History], claims: Claims, keys: dict[str, str]
) -> dict[str, str]:
    """Settle the ``claims`` into ``keys``: the oldest claim keeps its key, the others
    become ``<key>@<commit>``."""
    for key, paths in claims.items():
        if isinstance(paths, str):
            keys[paths] = key
            continue
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
