"""The system of record for a markdown / Obsidian vault: one note per document version.

A note declares its version state in YAML frontmatter (DESIGN.md §7). This module reads the
vault strictly: every scalar is loaded as a string and converted on purpose (no YAML 1.1
surprises such as ``0123`` becoming 83 or ``no`` becoming False), and every note that cannot
be taken as it is becomes a ``SourceProblem`` rather than a crash or a silent default.

What a bad note costs, deliberately:

- the note's identity is unknown (unreadable, undecodable, unparsable frontmatter, frontmatter
  that is not a mapping, an ``id`` that is not a string, a symlink out of the vault): the note
  is *not* yielded, only its problem (with its path);
- one field is invalid (``status: yes``, ``version: 1.5``, an unparsable date): the note *is*
  yielded with that field taken as absent (``None``), and the problem names the field;
- ``superseded_by`` dangles, names the note itself, or is part of a cycle: the note is yielded
  without ``superseded_by``;
- two notes share an id: the first by path order is yielded, the other only as a problem.

Symlinks are never followed: a link (file or directory) whose target lies outside the vault
root is refused with ``LINK_OUTSIDE_ROOT``; a link inside the root is skipped, since its
target is scanned under its own path (following it would count the same note twice).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from reconciler.model import (
    ProblemKind,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    VersionState,
    parse_instant,
)

__all__ = ["VaultSource"]

log = logging.getLogger(__name__)

_SUFFIX = ".md"
_HANDLER = YAMLHandler()
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DIGITS = re.compile(r"[0-9]+")
_WIKILINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")


class _StringLoader(yaml.BaseLoader):
    """``yaml.BaseLoader`` (every scalar stays a string) that knows null and refuses duplicates.

    Only a *plain* ``~``, ``null`` or empty value is null (a quoted ``"null"`` stays a string);
    nothing else is resolved, so ``0123``, ``no`` and ``2024-01-01`` all arrive as strings.
    """

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


class _NoteRefused(Exception):
    """A note whose identity cannot be known: it becomes a problem, never a document."""

    def __init__(self, kind: ProblemKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True, slots=True)
class _Link:
    """A raw ``superseded_by`` value: a plain id/path or the target of an Obsidian wikilink."""

    target: str
    wikilink: bool


@dataclass(slots=True)
class _Note:
    """One parsed note, before supersession links are resolved across the vault."""

    path: str
    key: str
    body: str
    family: str | None = None
    version: int | None = None
    state: VersionState | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    link: _Link | None = None
    title: str | None = None
    doc_class: str | None = None
    invalid: list[str] = field(default_factory=list)


class VaultSource:
    """A folder of markdown notes with YAML frontmatter (Obsidian-compatible)."""

    def __init__(
        self,
        name: str,
        path: Path | str,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.name = name
        self.path = Path(path)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._paths: dict[str, str] = {}  # source_key -> relative path, from the last scan

    def __repr__(self) -> str:
        return f"VaultSource(name={self.name!r}, path={str(self.path)!r})"

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with a vault source's settings (checked when the config loads)."""
        problems = []
        if not settings.path:
            problems.append(("path", "a vault source needs path (the vault folder)"))
        if settings.url:
            problems.append(("url", "a vault source reads a folder: set path, not url"))
        for key in sorted(settings.options):
            problems.append((f"options.{key}", "unknown option for a vault source"))
        return problems

    @classmethod
    def from_settings(cls, settings: Any) -> VaultSource:
        """Build from a ``[[sources]]`` entry (type "vault")."""
        problems = cls.config_problems(settings)
        if problems:
            raise ConnectorConfigError(
                f"source {settings.name!r}: " + "; ".join(f"{k}: {m}" for k, m in problems)
            )
        return cls(settings.name, settings.path)

    # -- the SystemOfRecord contract -------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """Read every note's frontmatter and body hash; raise SourceUnavailable if the vault is."""
        scanned_at = self._clock()
        root = self._root()
        problems: list[SourceProblem] = []
        notes: list[_Note] = []
        refused: set[str] = set()
        kept: dict[str, _Note] = {}
        for rel in self._walk(root, problems):
            try:
                note = _parse_note(rel, _read_bytes(root / rel))
            except OSError as exc:
                refused.add(rel)
                problems.append(
                    self._problem(ProblemKind.UNREADABLE, f"cannot read note: {_reason(exc)}", rel)
                )
                continue
            except _NoteRefused as exc:
                refused.add(rel)
                problems.append(self._problem(exc.kind, exc.message, rel))
                continue
            doc_id = self._doc_id(note.key)
            problems.extend(
                self._problem(ProblemKind.INVALID_FIELD, message, rel, doc_id)
                for message in note.invalid
            )
            first = kept.get(note.key)
            if first is not None:
                problems.append(
                    self._problem(
                        ProblemKind.DUPLICATE_ID,
                        f"id {note.key!r} is already used by {first.path}; this note is ignored",
                        rel,
                        doc_id,
                    )
                )
                refused.add(rel)
                continue
            kept[note.key] = note
            notes.append(note)

        successors = self._resolve_links(notes, refused, problems)
        documents = tuple(
            SourceDocument(
                source=self.name,
                source_key=note.key,
                doc_id=self._doc_id(note.key),
                content_hash=_content_hash(note.body),
                path=note.path,
                family=note.family,
                version=note.version,
                state=note.state,
                effective_from=note.effective_from,
                effective_to=note.effective_to,
                superseded_by=(
                    self._doc_id(successors[note.key]) if note.key in successors else None
                ),
                title=note.title,
                doc_class=note.doc_class,
            )
            for note in notes
        )
        self._paths = {note.key: note.path for note in notes}
        log.info(
            "vault %s: %d document(s), %d problem(s)", self.name, len(documents), len(problems)
        )
        return SourceSnapshot(
            source=self.name,
            documents=documents,
            problems=tuple(problems),
            scanned_at=scanned_at,
        )

    def read_body(self, source_key: str) -> str:
        """Return the body of the note with id ``source_key`` (the text its hash is taken of)."""
        body = self._read_known(source_key)
        if body is None:
            self.scan()  # the note may have moved or been created since the last scan
            body = self._read_known(source_key)
        if body is None:
            raise DocumentUnreadable(f"{self.name}: no readable note with id {source_key!r}")
        return body

    # -- walking ---------------------------------------------------------------------------

    def _root(self) -> Path:
        try:
            if not self.path.exists():
                raise SourceUnavailable(f"vault {self.name!r}: {self.path} does not exist")
            if not self.path.is_dir():
                raise SourceUnavailable(f"vault {self.name!r}: {self.path} is not a directory")
            root = self.path.resolve(strict=True)
            with os.scandir(root):
                pass
        except OSError as exc:
            raise SourceUnavailable(
                f"vault {self.name!r}: cannot read {self.path}: {_reason(exc)}"
            ) from exc
        return root

    def _walk(self, root: Path, problems: list[SourceProblem]) -> list[str]:
        """Relative posix paths of every note under ``root``, sorted; problems appended."""
        found: list[str] = []
        pending: list[tuple[Path, str]] = [(root, "")]
        while pending:
            directory, prefix = pending.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = list(listing)
            except OSError as exc:
                if not prefix:
                    raise SourceUnavailable(
                        f"vault {self.name!r}: cannot list {self.path}: {_reason(exc)}"
                    ) from exc
                problems.append(
                    self._problem(
                        ProblemKind.UNREADABLE,
                        f"cannot list folder, its notes are not scanned: {_reason(exc)}",
                        _printable(prefix),
                    )
                )
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue  # .obsidian, .git, .trash, editor temp files: never notes
                rel = prefix + entry.name
                try:
                    if entry.is_symlink():
                        self._check_link(root, Path(entry.path), rel, problems)
                    elif entry.is_dir(follow_symlinks=False):
                        pending.append((Path(entry.path), rel + "/"))
                    elif entry.name.endswith(_SUFFIX) and entry.is_file(follow_symlinks=False):
                        found.append(rel)
                except OSError as exc:
                    problems.append(
                        self._problem(
                            ProblemKind.UNREADABLE, f"cannot stat: {_reason(exc)}", _printable(rel)
                        )
                    )
        notes: list[str] = []
        for rel in sorted(found):
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                problems.append(
                    self._problem(
                        ProblemKind.UNDECODABLE, "file name is not valid UTF-8", _printable(rel)
                    )
                )
                continue
            notes.append(rel)
        return notes

    def _check_link(self, root: Path, link: Path, rel: str, problems: list[SourceProblem]) -> None:
        target = Path(os.path.realpath(link))
        if target.is_relative_to(root):
            log.debug(
                "vault %s: skipping symlink %s (its target is scanned itself)", self.name, rel
            )
            return
        if rel.endswith(_SUFFIX) or target.is_dir():
            problems.append(
                self._problem(
                    ProblemKind.LINK_OUTSIDE_ROOT,
                    f"symlink to {target}, outside the vault root; not read",
                    _printable(rel),
                )
            )

    # -- supersession ----------------------------------------------------------------------

    def _resolve_links(
        self, notes: list[_Note], refused: set[str], problems: list[SourceProblem]
    ) -> dict[str, str]:
        """Map each note's key to its successor's key; dangling, self and cyclic links dropped."""
        by_id = {note.key: note.key for note in notes}
        by_path: dict[str, str] = {}
        for note in notes:
            by_path[note.path] = note.key
            by_path.setdefault(note.path[: -len(_SUFFIX)], note.key)
        successors: dict[str, str] = {}
        for note in notes:
            if note.link is None:
                continue
            doc_id = self._doc_id(note.key)
            key, why = self._resolve(note.link, by_id, by_path, refused)
            if key is None:
                problems.append(
                    self._problem(ProblemKind.DANGLING_SUPERSEDED_BY, why, note.path, doc_id)
                )
            elif key == note.key:
                problems.append(
                    self._problem(
                        ProblemKind.SELF_SUPERSESSION,
                        "superseded_by names the note itself; ignored",
                        note.path,
                        doc_id,
                    )
                )
            else:
                successors[note.key] = key
        paths = {note.key: note.path for note in notes}
        for cycle in _cycles(successors):
            chain = " -> ".join([*cycle, cycle[0]])
            for key in cycle:
                del successors[key]
                problems.append(
                    self._problem(
                        ProblemKind.SUPERSESSION_CYCLE,
                        f"superseded_by forms a cycle ({chain}); ignored",
                        paths[key],
                        self._doc_id(key),
                    )
                )
        return successors

    def _resolve(
        self, link: _Link, by_id: Mapping[str, str], by_path: Mapping[str, str], refused: set[str]
    ) -> tuple[str | None, str]:
        """Return (successor key, "") or (None, why it names nothing)."""
        target = link.target.removeprefix("./")
        stem = target.removesuffix(_SUFFIX)
        unqualified = target.removeprefix(f"{self.name}:")  # a full doc_id is accepted too
        if link.wikilink:  # Obsidian resolves links by path first
            candidates = [by_path.get(target), by_path.get(stem), by_id.get(target)]
        else:  # the design says "the successor's path or id": ids first
            candidates = [by_id.get(target), by_id.get(unqualified)]
            candidates += [by_path.get(target), by_path.get(stem)]
        for key in candidates:
            if key is not None:
                return key, ""
        shown = f"[[{link.target}]]" if link.wikilink else repr(link.target)
        if link.wikilink:
            # Obsidian resolves [[Name]] and [[folder/Name]] by the end of the path, if unique.
            matches = sorted(
                {key for path, key in by_path.items() if path.endswith(f"/{stem}{_SUFFIX}")}
            )
            if len(matches) == 1:
                return matches[0], ""
            if len(matches) > 1:
                return None, f"superseded_by {shown} is ambiguous: {', '.join(matches)}; ignored"
        if f"{stem}{_SUFFIX}" in refused or target in refused:
            return None, f"superseded_by {shown} names a note that was not taken; ignored"
        return None, f"superseded_by {shown} names no note in the vault; ignored"

    # -- helpers ---------------------------------------------------------------------------

    def _read_known(self, source_key: str) -> str | None:
        rel = self._paths.get(source_key)
        if rel is None:
            return None
        try:
            note = _parse_note(rel, _read_bytes(self.path / rel))
        except (OSError, _NoteRefused):
            return None
        return note.body if note.key == source_key else None

    def _doc_id(self, key: str) -> str:
        return f"{self.name}:{key}"

    def _problem(
        self, kind: ProblemKind, message: str, path: str | None, doc_id: str | None = None
    ) -> SourceProblem:
        log.debug("vault %s: %s %s: %s", self.name, kind.value, path, message)
        if doc_id is not None:
            key: str | None = doc_id[len(self.name) + 1 :]
        else:  # a refused note: its default id, which matches its row unless it declared one
            key = path[: -len(_SUFFIX)] if path and path.endswith(_SUFFIX) else None
        return SourceProblem(
            source=self.name, kind=kind, message=message, path=path, doc_id=doc_id, source_key=key
        )


# -- one note ------------------------------------------------------------------------------


def _read_bytes(path: Path) -> bytes:
    """Read a file without following a symlink swapped in since the walk."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _parse_note(rel: str, data: bytes) -> _Note:
    """Parse one note; raise _NoteRefused when its identity cannot be known."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _NoteRefused(
            ProblemKind.UNDECODABLE, f"not UTF-8 (byte {exc.start}: {exc.reason})"
        ) from exc
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    meta, body = _split(text)
    default_key = rel.removesuffix(_SUFFIX)
    raw_id = meta.get("id")
    if raw_id is not None and not isinstance(raw_id, str):
        raise _NoteRefused(
            ProblemKind.INVALID_FIELD, f"id must be a string, got {_shown(raw_id)}; note ignored"
        )
    key = raw_id.strip() if raw_id is not None and raw_id.strip() else default_key
    note = _Note(path=rel, key=key, body=body)
    note.family = _text(meta, "family", note.invalid)
    note.title = _text(meta, "title", note.invalid)
    note.doc_class = _text(meta, "doc_class", note.invalid)
    note.version = _version(meta, note.invalid)
    note.state = _state(meta, note.invalid)
    note.effective_from = _instant(meta, "effective_from", note.invalid)
    note.effective_to = _instant(meta, "effective_to", note.invalid)
    note.link = _link(meta, note.invalid)
    return note


def _split(text: str) -> tuple[dict[str, Any], str]:
    """Return (frontmatter mapping, normalised body); a note without frontmatter has ``{}``."""
    if not _HANDLER.detect(text):
        return {}, _normalise_body(text)
    try:
        raw, content = _HANDLER.split(text)
    except ValueError as exc:
        raise _NoteRefused(
            ProblemKind.INVALID_FRONTMATTER, "frontmatter opened with '---' is never closed"
        ) from exc
    try:
        loaded = yaml.load(raw, Loader=_StringLoader)  # strings and None only: safe
    except (yaml.YAMLError, RecursionError) as exc:
        raise _NoteRefused(
            ProblemKind.INVALID_FRONTMATTER, f"frontmatter is not valid YAML: {_one_line(exc)}"
        ) from exc
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise _NoteRefused(
            ProblemKind.FRONTMATTER_NOT_MAPPING,
            f"frontmatter must be a mapping of keys to values, got a {_kind(loaded)}",
        )
    return loaded, _normalise_body(content)


def _normalise_body(text: str) -> str:
    """Drop leading blank lines and trailing whitespace: neither is an edit of the content."""
    return _LEADING_BLANK_LINES.sub("", text).rstrip()


def _content_hash(body: str) -> str:
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def _text(meta: Mapping[str, Any], key: str, invalid: list[str]) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        invalid.append(f"{key} must be a single value, got {_shown(value)}; taken as absent")
        return None
    return value.strip() or None


def _version(meta: Mapping[str, Any], invalid: list[str]) -> int | None:
    value = _text(meta, "version", invalid)
    if value is None:
        return None
    if not _DIGITS.fullmatch(value):
        invalid.append(f"version must be a non-negative integer, got {value!r}; taken as absent")
        return None
    return int(value)


def _state(meta: Mapping[str, Any], invalid: list[str]) -> VersionState | None:
    value = _text(meta, "status", invalid)
    if value is None:
        return None
    try:
        return VersionState(value.lower())
    except ValueError:
        allowed = "|".join(state.value for state in VersionState)
        invalid.append(f"status must be one of {allowed}, got {value!r}; taken as absent")
        return None


def _instant(meta: Mapping[str, Any], key: str, invalid: list[str]) -> datetime | None:
    value = _text(meta, key, invalid)
    if value is None:
        return None
    try:
        if _DATE.fullmatch(value):
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        return parse_instant(value)
    except (ValueError, OverflowError):
        invalid.append(
            f"{key} must be a date or an ISO 8601 date-time, got {value!r}; taken as absent"
        )
        return None


def _link(meta: Mapping[str, Any], invalid: list[str]) -> _Link | None:
    value = meta.get("superseded_by")
    # Obsidian list properties and unquoted wikilinks (YAML reads [[Name]] as a nested list).
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None or value == []:
        return None
    if not isinstance(value, str):
        invalid.append(
            f"superseded_by must name one note, got {_shown(meta['superseded_by'])}; "
            "taken as absent"
        )
        return None
    text = value.strip()
    if not text:
        return None
    nested = isinstance(meta["superseded_by"], list) and isinstance(meta["superseded_by"][0], list)
    match = _WIKILINK.fullmatch(text)
    if match is None and not nested:
        return _Link(text, wikilink=False)
    inner = match.group(1) if match is not None else text
    target = re.split(r"[|#^]", inner, maxsplit=1)[0].strip()
    if not target:
        invalid.append(f"superseded_by {text!r} is an empty wikilink; taken as absent")
        return None
    return _Link(target, wikilink=True)


# -- small helpers -------------------------------------------------------------------------


def _cycles(successors: Mapping[str, str]) -> Iterator[list[str]]:
    """Yield every cycle of a graph where each node has at most one successor, in key order."""
    done: set[str] = set()
    for start in sorted(successors):
        trail: list[str] = []
        on_trail: set[str] = set()
        node: str | None = start
        while node is not None and node not in done and node not in on_trail:
            trail.append(node)
            on_trail.add(node)
            node = successors.get(node)
        if node is not None and node in on_trail:
            yield trail[trail.index(node) :]
        done.update(trail)


def _reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _printable(rel: str) -> str:
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _kind(value: object) -> str:
    return "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else "scalar"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
