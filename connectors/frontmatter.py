"""Markdown notes with YAML frontmatter, read strictly: shared by the connectors whose documents
are such notes (the vault folder, the git repository).

Pure: bytes in, parsed notes and supersession links out; no file system, no subprocess. Every
scalar is loaded as a string and converted on purpose (no YAML 1.1 surprises such as ``0123``
becoming 83 or ``no`` becoming False). A note whose identity cannot be known raises
``NoteRefused``; a single invalid field is recorded in ``Note.invalid`` (with the
``SourceDocument`` field it would have filled) and taken as absent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node

from connectors.records import cycles, read_date, shown
from reconciler.model import ProblemKind, SourceProblem, VersionState

__all__ = [
    "SUFFIX",
    "Link",
    "Note",
    "NoteRefused",
    "ProblemFactory",
    "content_hash",
    "cycles",
    "normalise_body",
    "one_line",
    "parse_note",
    "resolve_links",
    "shown",
    "split",
]

#: The suffix of a note; a note's default id is its relative path without it.
SUFFIX = ".md"
_HANDLER = YAMLHandler()
_DIGITS = re.compile(r"[0-9]+")
_WIKILINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")

#: Builds a connector's ``SourceProblem``: (kind, message, path, doc_id).
ProblemFactory = Callable[[ProblemKind, str, str | None, str | None], SourceProblem]


class _StringLoader(yaml.BaseLoader):
    """``yaml.BaseLoader`` (every scalar stays a string) that knows null and refuses duplicates
    and aliases.

    Only a *plain* ``~``, ``null`` or empty value is null (a quoted ``"null"`` stays a string);
    nothing else is resolved, so ``0123``, ``no`` and ``2024-01-01`` all arrive as strings. An
    alias (``*name``) is refused before anything is expanded: frontmatter never needs one, and
    a few nested aliases ("billion laughs") would expand a kilobyte into gigabytes.
    """

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(
                None,
                None,
                f"found the alias *{event.anchor}: aliases are not allowed in frontmatter",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node.value, str):
                if key_node.value in seen:
                    raise ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key_node.value!r}",
                        key_node.start_mark,
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def _construct_null(loader: yaml.BaseLoader, node: Node) -> None:
    return None


_StringLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_StringLoader.add_constructor("tag:yaml.org,2002:null", _construct_null)


class NoteRefused(Exception):
    """A note whose identity cannot be known: it becomes a problem, never a document."""

    def __init__(self, kind: ProblemKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True, slots=True)
class Link:
    """A raw ``superseded_by`` value: a plain id/path or the target of an Obsidian wikilink."""

    target: str
    wikilink: bool


@dataclass(slots=True)
class Note:
    """One parsed note, before supersession links are resolved across the source."""

    path: str
    key: str
    body: str
    family: str | None = None
    version: int | None = None
    state: VersionState | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    link: Link | None = None
    title: str | None = None
    doc_class: str | None = None
    #: (``SourceDocument`` field, message) of each field taken as absent.
    invalid: list[tuple[str, str]] = field(default_factory=list)


# -- one note ------------------------------------------------------------------------------


def parse_note(rel: str, data: bytes, *, default_key: str | None = None) -> Note:
    """Parse one note at relative path ``rel``; raise NoteRefused when its identity is unknown.

    The key is the frontmatter ``id``, else ``default_key``, else ``rel`` without ``.md``.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NoteRefused(
            ProblemKind.UNDECODABLE, f"not UTF-8 (byte {exc.start}: {exc.reason})"
        ) from exc
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    meta, body = split(text)
    if default_key is None:
        default_key = rel.removesuffix(SUFFIX)
    raw_id = meta.get("id")
    if raw_id is not None and not isinstance(raw_id, str):
        raise NoteRefused(
            ProblemKind.INVALID_FIELD, f"id must be a string, got {shown(raw_id)}; note ignored"
        )
    key = raw_id.strip() if raw_id is not None and raw_id.strip() else default_key
    note = Note(path=rel, key=key, body=body)
    note.family = _text(meta, "family", note.invalid)
    note.title = _text(meta, "title", note.invalid)
    note.doc_class = _text(meta, "doc_class", note.invalid)
    note.version = _version(meta, note.invalid)
    note.state = _state(meta, note.invalid)
    note.effective_from = _instant(meta, "effective_from", note.invalid)
    note.effective_to = _instant(meta, "effective_to", note.invalid)
    note.link = _link(meta, note.invalid)
    return note


def split(text: str) -> tuple[dict[str, Any], str]:
    """Return (frontmatter mapping, normalised body); a note without frontmatter has ``{}``."""
    if not _HANDLER.detect(text):
        return {}, normalise_body(text)
    try:
        raw, content = _HANDLER.split(text)
    except ValueError as exc:
        raise NoteRefused(
            ProblemKind.INVALID_FRONTMATTER, "frontmatter opened with '---' is never closed"
        ) from exc
    try:
        loaded = yaml.load(raw, Loader=_StringLoader)  # strings and None only: safe
    except (yaml.YAMLError, RecursionError) as exc:
        raise NoteRefused(
            ProblemKind.INVALID_FRONTMATTER, f"frontmatter is not valid YAML: {yaml_problem(exc)}"
        ) from exc
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise NoteRefused(
            ProblemKind.FRONTMATTER_NOT_MAPPING,
            f"frontmatter must be a mapping of keys to values, got a {_kind(loaded)}",
        )
    return loaded, normalise_body(content)


def normalise_body(text: str) -> str:
    """Drop leading blank lines and trailing whitespace: neither is an edit of the content."""
    return _LEADING_BLANK_LINES.sub("", text).rstrip()


def content_hash(body: str) -> str:
    """The ``sha256:`` hash of a normalised body: what the hash check compares."""
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def _text(
    meta: Mapping[str, Any], key: str, invalid: list[tuple[str, str]], field: str | None = None
) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        invalid.append(
            (field or key, f"{key} must be a single value, got {shown(value)}; taken as absent")
        )
        return None
    return value.strip() or None


def _version(meta: Mapping[str, Any], invalid: list[tuple[str, str]]) -> int | None:
    value = _text(meta, "version", invalid)
    if value is None:
        return None
    if not _DIGITS.fullmatch(value):
        invalid.append(
            ("version", f"version must be a non-negative integer, got {value!r}; taken as absent")
        )
        return None
    return int(value)


def _state(meta: Mapping[str, Any], invalid: list[tuple[str, str]]) -> VersionState | None:
    value = _text(meta, "status", invalid, "state")
    if value is None:
        return None
    try:
        return VersionState(value.lower())
    except ValueError:
        allowed = "|".join(state.value for state in VersionState)
        invalid.append(
            ("state", f"status must be one of {allowed}, got {value!r}; taken as absent")
        )
        return None


def _instant(meta: Mapping[str, Any], key: str, invalid: list[tuple[str, str]]) -> datetime | None:
    return read_date(_text(meta, key, invalid), key, invalid)


def _link(meta: Mapping[str, Any], invalid: list[tuple[str, str]]) -> Link | None:
    value = meta.get("superseded_by")
    # Obsidian list properties and unquoted wikilinks (YAML reads [[Name]] as a nested list).
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None or value == []:
        return None
    if not isinstance(value, str):
        invalid.append(
            (
                "superseded_by",
                f"superseded_by must name one note, got {shown(meta['superseded_by'])}; "
                "taken as absent",
            )
        )
        return None
    text = value.strip()
    if not text:
        return None
    nested = isinstance(meta["superseded_by"], list) and isinstance(meta["superseded_by"][0], list)
    match = _WIKILINK.fullmatch(text)
    if match is None and not nested:
        return Link(text, wikilink=False)
    inner = match.group(1) if match is not None else text
    target = re.split(r"[|#^]", inner, maxsplit=1)[0].strip()
    if not target:
        invalid.append(
            ("superseded_by", f"superseded_by {text!r} is an empty wikilink; taken as absent")
        )
        return None
    return Link(target, wikilink=True)


# -- supersession across a source ----------------------------------------------------------


def admit_note(
    note: Note,
    rel: str,
    *,
    doc_id: str,
    kept: dict[str, Note],
    refused: set[str],
    problems: list[SourceProblem],
    problem: Callable[..., SourceProblem],
    duplicates: dict[str, list[str]],
) -> bool:
    """Record a parsed note's field problems; keep it unless its id is already taken (then
    ``duplicates`` records both paths, for ``refuse_duplicates``)."""
    problems.extend(
        problem(ProblemKind.INVALID_FIELD, message, rel, doc_id, field=name)
        for name, message in note.invalid
    )
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
    problem: Callable[..., SourceProblem],
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


def resolve_links(
    notes: list[Note],
    refused: set[str],
    *,
    name: str,
    problem: ProblemFactory,
    place: str = "the source",
) -> tuple[dict[str, str], list[SourceProblem]]:
    """Map each note's key to its successor's key; dangling, self and cyclic links dropped.

    ``refused`` holds the paths of notes that were not taken (a link to one is named so);
    ``name`` is the source's name (a full ``<name>:<id>`` doc id is accepted as a target);
    ``place`` names the source in messages ("the vault").
    Returns the successors and the problems found, in note order then cycle order.
    """
    problems: list[SourceProblem] = []
    by_id = {note.key: note.key for note in notes}
    by_path: dict[str, str] = {}
    for note in notes:
        by_path[note.path] = note.key
        by_path.setdefault(note.path.removesuffix(SUFFIX), note.key)
    successors: dict[str, str] = {}
    for note in notes:
        if note.link is None:
            continue
        doc_id = f"{name}:{note.key}"
        key, why = _resolve(note.link, name, by_id, by_path, refused, place)
        if key is None:
            problems.append(problem(ProblemKind.DANGLING_SUPERSEDED_BY, why, note.path, doc_id))
        elif key == note.key:
            problems.append(
                problem(
                    ProblemKind.SELF_SUPERSESSION,
                    "superseded_by names the note itself; ignored",
                    note.path,
                    doc_id,
                )
            )
        else:
            successors[note.key] = key
    paths = {note.key: note.path for note in notes}
    for cycle in cycles(successors):
        chain = " -> ".join([*cycle, cycle[0]])
        for key in cycle:
            del successors[key]
            problems.append(
                problem(
                    ProblemKind.SUPERSESSION_CYCLE,
                    f"superseded_by forms a cycle ({chain}); ignored",
                    paths[key],
                    f"{name}:{key}",
                )
            )
    return successors, problems


def _resolve(
    link: Link,
    name: str,
    by_id: Mapping[str, str],
    by_path: Mapping[str, str],
    refused: set[str],
    place: str,
) -> tuple[str | None, str]:
    """Return (successor key, "") or (None, why it names nothing)."""
    target = link.target.removeprefix("./")
    stem = target.removesuffix(SUFFIX)
    unqualified = target.removeprefix(f"{name}:")  # a full doc_id is accepted too
    if link.wikilink:  # Obsidian resolves links by path first
        candidates = [by_path.get(target), by_path.get(stem), by_id.get(target)]
    else:  # the design says "the successor's path or id": ids first
        candidates = [by_id.get(target), by_id.get(unqualified)]
        candidates += [by_path.get(target), by_path.get(stem)]
    for key in candidates:
        if key is not None:
            return key, ""
    shown_link = f"[[{link.target}]]" if link.wikilink else repr(link.target)
    if link.wikilink:
        # Obsidian resolves [[Name]] and [[folder/Name]] by the end of the path, if unique.
        matches = sorted(
            {key for path, key in by_path.items() if path.endswith(f"/{stem}{SUFFIX}")}
        )
        if len(matches) == 1:
            return matches[0], ""
        if len(matches) > 1:
            return (
                None,
                f"superseded_by {shown_link} is ambiguous: {', '.join(matches)}; ignored",
            )
    if f"{stem}{SUFFIX}" in refused or target in refused:
        return None, f"superseded_by {shown_link} names a note that was not taken; ignored"
    return None, f"superseded_by {shown_link} names no note in {place}; ignored"


# -- small helpers -------------------------------------------------------------------------


def yaml_problem(exc: Exception) -> str:
    """A YAML error as a person reads it: where (the line of the note, counting the opening
    ``---``), what, and in what context; without PyYAML's echo of the text and its caret."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem is None:
        return one_line(exc)
    mark = exc.problem_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = f" ({exc.context})" if exc.context else ""
    return one_line(Exception(f"{where}{exc.problem}{context}"))


def one_line(exc: Exception) -> str:
    """An exception's message on one line, at most 200 characters."""
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _kind(value: object) -> str:
    return "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else "scalar"
