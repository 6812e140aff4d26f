"""What one batch of ``serve``'s watch reconciles: the families of the changed paths, and the
paths of every document of those families, so that the scoped run reads those files alone
(``Options.paths``) and not the whole source.

The families are those the changed paths' documents belong to by every account the run will
weigh: the family a file names (explicit), the identity map's for its key and for its path
(a file deleted or no longer parsed), and the family of its row. Every document of those
families, as the identity map places them, is read with them; that may bring in more
families (a member that now names another family), so it is done again until nothing new
comes (``ROUNDS`` at most). A scoped read is then complete for the run's families: a member
absent from it is deleted, as a whole scan would find it.

The source is read whole instead (``paths`` is None) wherever reading by path could judge
otherwise than a whole scan: a changed document with no family of its own that the identity
map does not know (a new note whose family is found through links or its body, maybe from
a file that was not read), a link that names a document that was not read, a row of those
families with no known path, or a closure that does not settle in ``ROUNDS``."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model import ProblemKind, SourceDocument
from reconciler.ports.source import ReadsPaths, SystemOfRecord, scan_paths
from reconciler.stores.sql.watermarks import SqlWatchMarks

log = logging.getLogger(__name__)

#: Reads of the growing set of paths before the source is read whole instead.
ROUNDS = 4


@dataclass(frozen=True)
class WatchScope:
    """The families a batch reconciles, the paths read for them (None: the whole source),
    and the changed paths that are documents now and that are gone."""

    families: frozenset[str]
    paths: frozenset[str] | None
    known: frozenset[str]
    gone: frozenset[str]


def watch_scope(
    table: Any, source: SystemOfRecord, changed: set[str], *, exists: Any = None
) -> WatchScope:
    """The scope of a batch of ``changed`` paths of ``source`` (``table``: the document
    table, its identity map and rows). ``exists(path)``: whether a changed path is still
    there (a vault's files); None: a path not read as a document is gone."""
    name = source.name
    marks = SqlWatchMarks.of(table)
    at = table.identities_at(name, changed)  # (a deleted file's identity, by its path)
    read: set[str] = set(changed)
    families: set[str] = set()
    whole: str | None = None
    documents: tuple[SourceDocument, ...] = ()
    for _ in range(ROUNDS):
        try:
            snapshot, by_path = scan_paths(source, read)
        except Exception as exc:  # the run reads the source again (and says what it found)
            log.warning("watch %s: cannot read the changed path(s): %s", name, exc)
            families |= _families(
                name, (), marks.identities_of(name, at.values()), table, at.values()
            )
            return WatchScope(frozenset(families), None, frozenset(at), frozenset())
        documents = snapshot.documents
        if not by_path:
            whole = "its connector reads no path alone"
            break
        keys = {doc.source_key for doc in documents} | set(at.values())
        known = marks.identities_of(name, keys)  # key -> (family, path)
        found = _families(name, documents, known, table, at.values())
        stranger = next(
            (d for d in documents if d.family is None and d.source_key not in known), None
        )
        if stranger is not None:
            whole = f"{stranger.path} is new and names no family"
            break
        families |= found
        paths, unplaced = _member_paths(table, marks, name, families)
        if unplaced is not None:
            whole = f"{unplaced}, of the families, has no known path"
            break
        wanted = set(changed) | paths
        if wanted <= read:
            dangling = [p for p in snapshot.problems if p.kind is _DANGLING]
            if dangling:
                whole = f"{dangling[0].path} links to a document that was not read"
            break
        read = wanted
    else:
        whole = f"its families did not settle in {ROUNDS} reads"
    present = {doc.path for doc in documents if doc.path is not None}
    if exists is not None:
        present |= {path for path in changed if exists(path)}
    known_paths = frozenset(path for path in changed if path in present)
    gone = frozenset(path for path in changed if path not in present)
    if whole is not None:
        log.info("watch %s: the source is read whole for this batch: %s", name, whole)
        return WatchScope(frozenset(families), None, known_paths, gone)
    return WatchScope(frozenset(families), frozenset(read), known_paths, gone)


_DANGLING = ProblemKind.DANGLING_SUPERSEDED_BY


def beside(
    table: Any, sources: Mapping[str, SystemOfRecord], changed: str, families: frozenset[str]
) -> dict[str, frozenset[str]]:
    """What a batch's run reads of the sources beside the changed one: nothing of a source
    that holds no document of the run's families (the identity map's members, the rows: an
    empty set, read as not read at all), the members' paths where its connector reads by path
    and every member has a known path; the rest (absent from the answer) is read whole. So
    a vault's change never waits on a git host that hangs, unless that host holds a
    document of the same families."""
    marks = SqlWatchMarks.of(table)
    read: dict[str, frozenset[str]] = {}
    for name, source in sources.items():
        if name == changed:
            continue
        paths, unplaced = _member_paths(table, marks, name, set(families))
        if unplaced is None and (not paths or isinstance(source, ReadsPaths)):
            read[name] = frozenset(paths)
    return read


def keyed_scope(
    table: Any,
    source: SystemOfRecord,
    keys: set[str],
    named: Mapping[str, str],
    paths: Mapping[str, str],
) -> WatchScope:
    """The scope of a polled source's changed documents (by source key; ``named``: the
    family each names, ``paths``: the path of each, from the watch's last read). Where the
    connector reads by path (``ReadsPaths``: Confluence) and every changed key has a path
    now, it is ``watch_scope``'s of those paths: the families and their members' paths. Else
    (a document gone, an http or sql source) their families by the identity map, their rows
    and their own, and the source is read whole."""
    name = source.name
    if isinstance(source, ReadsPaths) and keys <= paths.keys():
        return watch_scope(table, source, {paths[key] for key in keys})
    marks = SqlWatchMarks.of(table)
    known = marks.identities_of(name, keys)
    families = _families(name, (), known, table, keys)
    families |= {f"{name}:{named[key]}" for key in keys if key in named}
    return WatchScope(frozenset(families), None, frozenset(), frozenset())


def _families(
    name: str,
    documents: Iterable[SourceDocument],
    known: dict[str, tuple[str, str | None]],
    table: Any,
    keys_at_paths: Iterable[str],
) -> set[str]:
    """Every family the run may weigh the documents read (and the keys last seen at the
    changed paths) in: their own, the identity map's, their rows'."""
    found: set[str] = set()
    keys = set(keys_at_paths)
    for doc in documents:
        keys.add(doc.source_key)
        if doc.family is not None:
            found.add(f"{name}:{doc.family}")
    found |= {known[key][0] for key in keys if key in known}
    rows = table.get_documents(f"{name}:{key}" for key in sorted(keys))
    found |= {row.doc_family_id for row in rows.values()}
    return found


def _member_paths(
    table: Any, marks: SqlWatchMarks, name: str, families: set[str]
) -> tuple[set[str], str | None]:
    """The paths of every document of ``families`` from this source (the identity map's
    members of them, and the rows of them), and the first one with no known path."""
    members = marks.members(name, families)  # key -> path
    prefix = f"{name}:"
    rows = {
        row.doc_id[len(prefix) :]
        for row in table.iter_documents(batch_size=1000, families=sorted(families))
        if row.doc_id.startswith(prefix)
    }
    missing = rows - members.keys()
    if missing:
        members.update(
            {key: path for key, (_family, path) in marks.identities_of(name, missing).items()}
        )
    unplaced = sorted(key for key in rows | members.keys() if members.get(key) is None)
    if unplaced:
        return set(), f"{prefix}{unplaced[0]}"
    return {path for path in members.values() if path is not None}, None
