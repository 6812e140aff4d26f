"""Supersession links across one file source: which notes each note's links name, forward and
reverse, merged into every version's successors.

Shared by the vault and the git connector. A note names its successors (``superseded_by``) and
the versions it replaces (``replaces``, the reverse link: each one named is superseded by the
note). Both are spelled as the source spells them (``connectors.vocabulary``): an id, an id
through ``id_template`` (``600`` -> ``pep-0600``), a path relative to the note or to the root,
a folder holding one document, a markdown link, an Obsidian wikilink. Here they are resolved
to notes and merged, never guessed:

- every successor named, forward or reverse, is one: a version named by several is a fan-in,
  a version naming several (or named by several ``replaces``) is a fan-out, and the time rule
  closes it at the start of the earliest of them to come into force (docs/engine.md);
- a link that names no note, or the note itself: dropped with a problem; a version whose own
  ``superseded_by`` names nothing taken this scan takes none of its other successors either
  (``conflicting_links``: a registered successor stands until the source reads whole);
- links between versions on one cycle: dropped with a problem for each version (its links
  that leave the cycle stay).

Pure: notes in, successors and problems out.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connectors.frontmatter import SUFFIX
from connectors.records import cycle_message
from connectors.vocabulary import Link, Note, Vocabulary
from reconciler.model import ProblemKind, SourceProblem

__all__ = [
    "ProblemFactory",
    "admit_note",
    "refuse_duplicates",
    "resolve_links",
    "settle_notes",
    "successor_fields",
]

#: Links are not expected in every source (a young corpus has no supersession yet): a link
#: mapping no document uses is not reported; a link that names nothing is.
_LINK_FIELDS = frozenset({"superseded_by", "replaces"})
#: Builds a connector's ``SourceProblem``: (kind, message, path, doc_id, field=...).
ProblemFactory = Callable[..., SourceProblem]


def admit_note(
    note: Note,
    rel: str,
    *,
    doc_id: str,
    kept: dict[str, Note],
    refused: set[str],
    problems: list[SourceProblem],
    problem: ProblemFactory,
    duplicates: dict[str, list[str]],
) -> bool:
    """Record a parsed note's field problems; keep it unless its id is already taken (then
    ``duplicates`` records both paths, for ``refuse_duplicates``)."""
    problems.extend(
        problem(ProblemKind.INVALID_FIELD, message, rel, doc_id, field=name)
        for name, message in note.invalid
    )
    if note.id_missed is not None:
        problems.append(problem(ProblemKind.ID_NOT_READ, note.id_missed, rel, doc_id))
    first = kept.get(note.key)
    if first is not None:
        duplicates.setdefault(note.key, [first.path]).append(rel)
        refused.add(rel)
        return False
    kept[note.key] = note
    return True


def refuse_duplicates(
    notes: list[Note],
    duplicates: Mapping[str, list[str]],
    *,
    refused: set[str],
    problems: list[SourceProblem],
    problem: ProblemFactory,
    doc_id: Callable[[str], str],
) -> list[Note]:
    """Refuse every note of an id that several notes declare, naming all of them: none of
    them displaces the document registered under that id (which keeps its state)."""
    for key, paths in duplicates.items():
        for rel in paths:
            problems.append(
                problem(
                    ProblemKind.DUPLICATE_ID,
                    f"id {key!r} is declared by {len(paths)} notes ({', '.join(paths)}); none "
                    "of them is taken until only one declares it",
                    rel,
                    doc_id(key),
                )
            )
            refused.add(rel)
    return [note for note in notes if note.key not in duplicates]


def unused_mappings(vocabulary: Vocabulary, notes: Iterable[Note]) -> list[tuple[str, str]]:
    """(field, message) for each field the configuration maps that no document's readers
    gave: where documents write the key although no reader took it, the first of them and
    the likely cause; else (link fields aside) that no document writes it at all."""
    found: set[str] = set()
    unread: dict[str, list[tuple[str, str]]] = defaultdict(list)
    any_note = False
    for note in notes:
        any_note = True
        found |= note.found
        for name, where in note.unread.items():
            unread[name].append((note.path, where))
    if not any_note:
        return []
    readers = " and ".join(f"the {r} reader" for r in vocabulary.readers if r != "body")
    out: list[tuple[str, str]] = []
    for name in sorted(vocabulary.mapped - found):
        mapping = f"fields.{name} = {list(vocabulary.keys[name])!r}"
        if unread.get(name):
            path, where = unread[name][0]
            out.append(
                (
                    name,
                    f"{mapping}: {readers or 'no reader'} took it from no document, but "
                    f"{len(unread[name])} document(s) write the key (the first: {path} "
                    f"{where})",
                )
            )
        elif name not in _LINK_FIELDS:
            out.append(
                (
                    name,
                    f"{mapping}: no document of the source writes this key anywhere in its "
                    "text; check its spelling (or remove the mapping if the source never "
                    "writes it)",
                )
            )
    return out


@dataclass(frozen=True)
class _Index:
    """Where a link can land: note keys by id, by path, by stem and by folder."""

    ids: frozenset[str]
    paths: Mapping[str, str]
    stems: Mapping[str, tuple[str, ...]]
    folders: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, notes: Iterable[Note]) -> _Index:
        paths: dict[str, str] = {}
        stems: dict[str, list[str]] = defaultdict(list)
        folders: dict[str, list[str]] = defaultdict(list)
        keys = set()
        for note in notes:
            keys.add(note.key)
            paths[note.path] = note.key
            paths.setdefault(note.path.removesuffix(SUFFIX), note.key)
            folder, name = posixpath.split(note.path)
            if "." in name.lstrip("."):
                stems[posixpath.join(folder, name.rsplit(".", 1)[0])].append(note.key)
            folders[folder].append(note.key)
        return cls(
            ids=frozenset(keys),
            paths=paths,
            stems={k: tuple(v) for k, v in stems.items()},
            folders={k: tuple(v) for k, v in folders.items()},
        )

    def at(self, path: str) -> str | None:
        """The note at a path: exact, without ``.md``, by stem, or the one note of a folder."""
        path = posixpath.normpath(path) if path else path
        if not path or path.startswith("../") or path == "..":
            return None
        if path in self.paths:
            return self.paths[path]
        for table in (self.stems, self.folders):
            found = table.get(path, ())
            if len(found) == 1:
                return found[0]
        return None


class _Resolver:
    def __init__(
        self, notes: list[Note], vocabulary: Vocabulary, name: str, refused: set[str], place: str
    ) -> None:
        self.index = _Index.of(notes)
        self.vocabulary = vocabulary
        self.name = name
        self.refused = refused
        self.place = place

    def resolve(self, link: Link, note: Note, what: str) -> tuple[str | None, str]:
        """(key, "") or (None, why the link names nothing)."""
        target = link.target.removeprefix("./")
        here = posixpath.dirname(note.path)
        candidates: list[str | None] = []
        if link.kind == "wikilink":  # Obsidian resolves links by path first
            stem = target.removesuffix(SUFFIX)
            candidates = [self.index.paths.get(target), self.index.paths.get(stem)]
            candidates.append(target if target in self.index.ids else None)
        elif link.kind == "markdown":  # relative to the note, as a markdown renderer does
            if not target.startswith("/"):
                candidates.append(self.index.at(posixpath.join(here, target)))
            candidates.append(self.index.at(target.lstrip("/")))
        else:  # "the successor's id or path": ids first, the one link_pattern finds first
            unqualified = target.removeprefix(f"{self.name}:")
            for token in dict.fromkeys([t for t in (link.fallback, target, unqualified) if t]):
                made = self.vocabulary.id_of(token)
                if made is not None and made in self.index.ids:
                    candidates.append(made)
                if token in self.index.ids:
                    candidates.append(token)
            candidates.append(self.index.at(target.lstrip("/")))
            if not target.startswith("/"):
                candidates.append(self.index.at(posixpath.join(here, target)))
        if link.kind == "markdown" and link.fallback is not None and not any(candidates):
            made = self.vocabulary.id_of(link.fallback)
            candidates += [made if made in self.index.ids else None]
        for key in candidates:
            if key is not None:
                return key, ""
        shown = link.shown()
        if link.kind == "wikilink":
            # Obsidian resolves [[Name]] and [[folder/Name]] by the end of the path, if unique.
            stem = target.removesuffix(SUFFIX)
            matches = sorted(
                {key for path, key in self.index.paths.items() if path.endswith(f"/{stem}{SUFFIX}")}
            )
            if len(matches) == 1:
                return matches[0], ""
            if len(matches) > 1:
                return None, f"{what} {shown} is ambiguous: {', '.join(matches)}; ignored"
        stem = target.removesuffix(SUFFIX)
        if f"{stem}{SUFFIX}" in self.refused or target in self.refused:
            return None, f"{what} {shown} names a note that was not taken; ignored"
        return None, f"{what} {shown} names no note in {self.place}; ignored"


def resolve_links(
    notes: list[Note],
    refused: set[str],
    *,
    name: str,
    problem: ProblemFactory,
    place: str = "the source",
    vocabulary: Vocabulary | None = None,
) -> tuple[dict[str, tuple[str, ...]], list[SourceProblem]]:
    """Map each note's key to its successors' keys (module docstring); problems found.

    ``refused`` holds the paths of notes that were not taken (a link to one is named so);
    ``name`` is the source's name (a full ``<name>:<id>`` doc id is accepted as a target);
    ``place`` names the source in messages ("the vault").
    Returns the successors and the problems, in note order then cycle order.
    """
    resolver = _Resolver(notes, vocabulary or Vocabulary(), name, refused, place)
    problems: list[SourceProblem] = []
    paths = {note.key: note.path for note in notes}
    forward: dict[str, list[str]] = {}
    reverse: dict[str, list[str]] = defaultdict(list)
    unresolved: dict[str, list[str]] = defaultdict(list)  # forward links that named nothing
    for note in notes:
        doc_id = f"{name}:{note.key}"
        for what, links in (("superseded_by", note.links), ("replaces", note.replaces)):
            for link in links:
                key, why = resolver.resolve(link, note, what)
                if key is None:
                    problems.append(
                        problem(ProblemKind.DANGLING_SUPERSEDED_BY, why, note.path, doc_id)
                    )
                    if what == "superseded_by":
                        unresolved[note.key].append(link.shown())
                elif key == note.key:
                    problems.append(
                        problem(
                            ProblemKind.SELF_SUPERSESSION,
                            f"{what} names the note itself; ignored",
                            note.path,
                            doc_id,
                        )
                    )
                elif what == "superseded_by":
                    named = forward.setdefault(note.key, [])
                    if key not in named:
                        named.append(key)
                elif note.key not in reverse[key]:
                    reverse[key].append(note.key)
    successors: dict[str, list[str]] = {}
    for note in notes:
        # Forward links first, in the order written, then the versions declaring they
        # replace it: every one is a successor (several make a fan-out).
        named = list(dict.fromkeys([*forward.get(note.key, []), *reverse.get(note.key, [])]))
        if named and unresolved.get(note.key):
            # Its own superseded_by names something this scan could not take (a broken
            # note, say): the links it did resolve do not decide for it alone.
            problems.append(
                problem(
                    ProblemKind.CONFLICTING_LINKS,
                    f"superseded_by {', '.join(unresolved[note.key])} names no document taken "
                    f"this scan, beside {', '.join(named)}; no successor is taken this scan "
                    "(a registered one stands)",
                    note.path,
                    f"{name}:{note.key}",
                    field="superseded_by",
                )
            )
        elif named:
            successors[note.key] = named
    problems.extend(
        problem(ProblemKind.SUPERSESSION_CYCLE, message, paths[key], f"{name}:{key}")
        for key, message in break_graph_cycles(successors)
    )
    return {key: tuple(named) for key, named in successors.items()}, problems


def successor_fields(keys: Iterable[str], doc_id: Callable[[str], str]) -> dict[str, Any]:
    """``SourceDocument`` fields for a note's successors (their keys): ``superseded_by``,
    the first one, and ``successors``, all of them, as doc ids."""
    ids = tuple(doc_id(key) for key in keys)
    return {"superseded_by": ids[0] if ids else None, "successors": ids}


def break_graph_cycles(successors: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Drop every link between two versions on one cycle (a strongly connected component
    of more than one version); (key, message) for each version that lost a link, in key
    order. A version keeps its links that leave the cycle."""
    dropped: list[tuple[str, str]] = []
    for component, cycle in _cycles(successors):
        members = set(component)
        message = cycle_message(cycle)
        for key in component:
            kept = [target for target in successors[key] if target not in members]
            if kept:
                successors[key] = kept
            else:
                del successors[key]
            dropped.append((key, message))
    dropped.sort()
    return dropped


def _cycles(successors: Mapping[str, list[str]]) -> list[tuple[list[str], list[str]]]:
    """The strongly connected components of more than one version (Tarjan's algorithm,
    without recursion), sorted, each with a cycle through it (for the message)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[list[str], list[str]]] = []
    for root in sorted(successors):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = successors.get(node, [])
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    component.sort()
                    found.append((component, _a_cycle(component, successors)))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def _a_cycle(members: list[str], successors: Mapping[str, list[str]]) -> list[str]:
    """A cycle inside one strongly connected component (``members``, sorted), found by
    following the smallest link inside it from its first member."""
    inside = set(members)
    trail, node, seen = [members[0]], members[0], {members[0]}
    while True:
        following = [t for t in successors.get(node, []) if t in inside]
        node = min(following)
        if node in seen:
            return trail[trail.index(node) :]
        trail.append(node)
        seen.add(node)


def settle_notes(
    notes: list[Note],
    duplicates: Mapping[str, list[str]],
    *,
    refused: set[str],
    problems: list[SourceProblem],
    problem: ProblemFactory,
    doc_id: Callable[[str], str],
    name: str,
    place: str,
    vocabulary: Vocabulary,
) -> tuple[list[Note], dict[str, tuple[str, ...]]]:
    """What a file source does once its notes are read: refuse duplicate ids, resolve the
    links, and name each mapped field no note holds. Returns the notes taken and their
    successors; ``problems`` gains what was found."""
    notes = refuse_duplicates(
        notes, duplicates, refused=refused, problems=problems, problem=problem, doc_id=doc_id
    )
    successors, link_problems = resolve_links(
        notes, refused, name=name, problem=problem, place=place, vocabulary=vocabulary
    )
    problems.extend(link_problems)
    problems.extend(
        problem(ProblemKind.UNUSED_MAPPING, message, None, field=field)
        for field, message in unused_mappings(vocabulary, notes)
    )
    problems.extend(
        problem(ProblemKind.KEY_NOT_READ, message, path, doc_id(key), field=field)
        for path, key, field, message in keys_not_read(notes)
    )
    return notes, successors


def keys_not_read(notes: Iterable[Note]) -> list[tuple[str, str, str, str]]:
    """(path, key, field, message) for each document that writes a key mapped to a field no
    reader took from it, where other documents' readers took that field (where none did,
    ``unused_mappings`` names the field once): its block sits where the readers do not look,
    and the document would be read as if it said nothing of the field."""
    notes = list(notes)
    found: set[str] = set().union(*(note.found for note in notes)) if notes else set()
    return [
        (
            note.path,
            note.key,
            name,
            f"{name} is written but not read ({where}); the document is taken as if it said "
            f"nothing of {name}",
        )
        for note in notes
        for name, where in sorted(note.unread.items())
        if name in found
    ]
