"""One document of a file source, read in its source's vocabulary: which files are documents
(``Vocabulary.selects``), and a file's bytes (and its sidecar's) as a ``Note`` whose fields
come from the readers in their stated precedence (``Vocabulary.read``). Links stay as written;
``connectors.linking`` resolves them across the source."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote

from wcmatch import glob as wcglob

from connectors.frontmatter import SUFFIX, NoteRefused, normalise_body, split
from connectors.records import read_date, shown
from connectors.vocabulary.fields import FIELDS, GLOB_FLAGS, LINK_FIELDS, format_id
from connectors.vocabulary.readers import body_lines, decode, header_block, sidecar_mapping
from connectors.vocabulary.unread import id_pattern_missed, unread_keys
from reconciler.model import ProblemKind, VersionState

__all__ = ["Link", "Note", "Vocabulary"]

_DIGITS = re.compile(r"[0-9]+")
_WIKILINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, slots=True)
class Link:
    """A link as the source wrote it: a plain id or path, a wikilink, or a markdown link."""

    target: str
    #: ``plain``, ``wikilink`` or ``markdown``.
    kind: str = "plain"
    #: The id ``link_pattern`` finds: in a plain link, tried (through ``id_template``) before
    #: the link as written; in a markdown link's text (``9. Use X`` -> ``9``), tried when the
    #: link's target names no document (a file renamed since).
    fallback: str | None = None

    def shown(self) -> str:
        """The link as it reads in messages."""
        if self.kind == "wikilink":
            return f"[[{self.target}]]"
        if self.kind == "markdown":
            return f"({self.target})"
        return repr(self.target)


@dataclass(slots=True)
class Note:
    """One parsed document, before its links are resolved across the source."""

    path: str
    key: str
    body: str
    family: str | None = None
    version: int | None = None
    state: VersionState | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    #: Forward links (``superseded_by``): the successors it names.
    links: tuple[Link, ...] = ()
    #: Reverse links (``replaces``): the versions it declares superseded by itself.
    replaces: tuple[Link, ...] = ()
    title: str | None = None
    doc_class: str | None = None
    #: (``SourceDocument`` field, message) of each field taken as absent.
    invalid: list[tuple[str, str]] = field(default_factory=list)
    #: The logical fields the document's metadata holds (for mappings no document uses).
    found: frozenset[str] = frozenset()
    #: field -> where the raw text writes a key mapped to it that no reader took, and why.
    unread: Mapping[str, str] = field(default_factory=dict)
    #: Why no body pattern gave the id of a document that writes one (its path is its id).
    id_missed: str | None = None
    #: field -> reader -> what each reader holds for it (``reconciler vocabulary check``).
    readings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """A compiled ``VocabularyOptions``: which files are documents and how each is read."""

    include: tuple[str, ...] = ("**/*.md",)
    exclude: tuple[str, ...] = ()
    readers: tuple[str, ...] = ("frontmatter",)
    sidecar: str | None = None
    body_patterns: tuple[re.Pattern[str], ...] = ()
    #: logical field -> the source's key names, tried in turn.
    keys: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({name: (name,) for name in FIELDS})
    )
    #: The fields the configuration maps (each is checked against what documents hold).
    mapped: frozenset[str] = frozenset()
    status_map: Mapping[str, VersionState] = field(default_factory=lambda: MappingProxyType({}))
    status_default: VersionState | None = None
    date_formats: tuple[str, ...] = ()
    id_template: str | None = None
    link_pattern: re.Pattern[str] | None = None
    #: Values that mean "none" in any field (``n/a``, ``TBD``), compared without case.
    empty_values: frozenset[str] = frozenset()
    #: Where the header block starts when no default place finds it (``blocks.locate``).
    header_start: re.Pattern[str] | None = None

    def without_empty(self, value: Any) -> Any:
        """``value`` with the items that mean "none" taken out (None when nothing is left)."""
        if not self.empty_values:
            return value
        if isinstance(value, str):
            return None if value.strip().lower() in self.empty_values else value
        if isinstance(value, list):
            kept = [item for item in value if self.without_empty(item) is not None]
            return kept or None
        return value

    # -- which files -----------------------------------------------------------------------

    def selects(self, rel: str) -> bool:
        """Whether the file at ``rel`` (relative to the source's root) is a document."""
        return bool(_matcher(self.include, self.exclude).match(rel))

    @staticmethod
    def default_key(rel: str) -> str:
        """A document's identity when its metadata names none: its path, without ``.md``."""
        return rel.removesuffix(SUFFIX)

    def sidecar_path(self, rel: str) -> str | None:
        """Where the sidecar of the document at ``rel`` lies, relative to the root."""
        if self.sidecar is None or "sidecar" not in self.readers:
            return None
        folder, name = posixpath.split(rel)
        stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
        made = self.sidecar.format(dir=folder, name=name, stem=stem, path=rel)
        return posixpath.normpath(made.lstrip("/")) if made else None

    # -- one document ----------------------------------------------------------------------

    def body(self, data: bytes) -> str | None:
        """The normalised body of a file (its metadata blocks and lines taken out), or None
        when it cannot be parsed."""
        try:
            return self.read("", data, default_key="").body
        except NoteRefused:
            return None

    def read(
        self,
        rel: str,
        data: bytes,
        *,
        default_key: str | None = None,
        sidecar: bytes | None = None,
    ) -> Note:
        """Parse the document at ``rel``; raise NoteRefused when its identity is unknown.

        ``sidecar`` is the content of its sidecar file (None: there is none). The key is the
        ``id`` field (through ``id_template``), else ``default_key``, else ``rel`` without
        ``.md``.
        """
        text = decode(data, "not UTF-8")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        metas: dict[str, Mapping[str, Any]] = {}
        body = text
        if "frontmatter" in self.readers:
            metas["frontmatter"], body = split(body)
        if "headers" in self.readers:
            metas["headers"], body = header_block(
                body,
                start=self.header_start,
                wanted=frozenset(k.lower() for keys in self.keys.values() for k in keys),
            )
        body = normalise_body(body)
        if "sidecar" in self.readers:
            metas["sidecar"] = sidecar_mapping(sidecar, self.sidecar_path(rel) or "")
        before_lines = body
        if "body" in self.readers:
            metas["body"], body = body_lines(body, self.body_patterns)
        reading = _Reading(self, metas)
        if default_key is None:
            default_key = self.default_key(rel)
        identity = reading.identity()
        note = Note(path=rel, key=identity or default_key, body=body)
        if identity is None and "body" in self.readers:
            note.id_missed = id_pattern_missed(before_lines, self.body_patterns)
        note.family = reading.text("family")
        note.title = reading.text("title")
        note.doc_class = reading.text("doc_class")
        note.version = reading.version()
        note.state = reading.state()
        note.effective_from = reading.instant("effective_from")
        note.effective_to = reading.instant("effective_to")
        note.links = reading.links("superseded_by")
        note.replaces = reading.links("replaces")
        note.invalid = reading.invalid
        note.found = frozenset(reading.found)
        note.readings = reading.every_reader()
        # (a configuration that maps nothing reads the project's own key names: a note whose
        # front matter sits below the top or in a wrapper is read as saying nothing; its keys
        # are looked for then, as a mapped field's are)
        looked_for = self.mapped or (frozenset(self.keys) if not metas.get("frontmatter") else None)
        note.unread = unread_keys(
            text,
            readers=self.readers,
            keys=self.keys,
            unfound=set((looked_for or frozenset()) - reading.found),
            header_start=self.header_start,
            metas=metas,
            # (a key in another case is looked for in the YAML the readers hold, also where
            # the front matter was found: `Status:` is not `status:`)
            cased=set((self.mapped or frozenset(self.keys)) - reading.found),
        )
        return note

    def id_of(self, token: str) -> str | None:
        """A link token or an id value through ``id_template`` (None when it does not fit)."""
        if self.id_template is None:
            return token
        try:
            return format_id(self.id_template, token)
        except (ValueError, TypeError, IndexError, KeyError, OverflowError):
            return None


class _Reading:
    """One document's metadata from every reader, looked up field by field in precedence."""

    def __init__(self, vocabulary: Vocabulary, metas: Mapping[str, Mapping[str, Any]]) -> None:
        self.vocabulary = vocabulary
        self.metas = metas
        self.invalid: list[tuple[str, str]] = []
        self.found: set[str] = set()

    def raw(self, name: str) -> tuple[Any, str]:
        """(value, the key it was read under) from the first reader that holds the field."""
        value, key, _ = self.read_raw(name)
        return value, key

    def read_raw(self, name: str) -> tuple[Any, str, str | None]:
        """(value, key, the reader that gave it) from the first reader holding the field."""
        for reader in self.vocabulary.readers:
            held = self.held(reader, name)
            if held is None:
                continue
            value, key = held
            if reader == "body" and name not in LINK_FIELDS:
                value = value[0]  # a single field: the first line that gives it
            self.found.add(name)
            return value, key, reader
        return None, (*self.vocabulary.keys.get(name, ()), name)[0], None

    def held(self, reader: str, name: str) -> tuple[Any, str] | None:
        """(value, key) of the field in one reader's metadata, or None when it holds none."""
        meta = self.metas.get(reader, {})
        keys = (name,) if reader == "body" else self.vocabulary.keys.get(name, (name,))
        for key in keys:
            value = meta.get(key.lower() if reader == "headers" else key)
            value = self.vocabulary.without_empty(value)
            if value is None or value == "" or (value == [] and name in LINK_FIELDS):
                continue  # an empty list is no link; elsewhere it is no single value
            return value, key
        return None

    def every_reader(self) -> dict[str, dict[str, Any]]:
        """field -> reader -> the value each reader holds for it (not only the first)."""
        out: dict[str, dict[str, Any]] = {}
        for name in FIELDS:
            for reader in self.vocabulary.readers:
                held = self.held(reader, name)
                if held is not None:
                    out.setdefault(name, {})[reader] = held[0]
        return out

    def single(self, name: str, field: str | None = None) -> tuple[str | None, str]:
        value, key = self.raw(name)
        if value is None:
            return None, key
        if not isinstance(value, str):
            self.invalid.append(
                (
                    field or name,
                    f"{key} must be a single value, got {shown(value)}; taken as absent",
                )
            )
            return None, key
        return value.strip() or None, key

    def identity(self) -> str | None:
        value, key = self.raw("id")
        if value is None:
            return None
        if not isinstance(value, str):
            raise NoteRefused(
                ProblemKind.INVALID_FIELD,
                f"{key} must be a string, got {shown(value)}; note ignored",
            )
        token = value.strip()
        if not token:
            return None
        made = self.vocabulary.id_of(token)
        if made is None:
            raise NoteRefused(
                ProblemKind.INVALID_FIELD,
                f"{key} {token!r} does not fit id_template {self.vocabulary.id_template!r}; "
                "note ignored",
            )
        return made

    def text(self, name: str) -> str | None:
        return self.single(name)[0]

    def version(self) -> int | None:
        value, key = self.single("version")
        if value is None:
            return None
        if not _DIGITS.fullmatch(value):
            self.invalid.append(
                ("version", f"{key} must be a non-negative integer, got {value!r}; taken as absent")
            )
            return None
        return int(value)

    def state(self) -> VersionState | None:
        value, key = self.single("status", "state")
        if value is None:
            return None
        mapped = self.vocabulary.status_map
        if value in mapped:
            return mapped[value]
        folded = {k.lower(): v for k, v in mapped.items()}
        if value.lower() in folded:
            return folded[value.lower()]
        try:
            return VersionState(value.lower())
        except ValueError:
            pass
        if self.vocabulary.status_default is not None:
            return self.vocabulary.status_default
        allowed = "|".join([*(s.value for s in VersionState), *mapped])
        self.invalid.append(
            (
                "state",
                f"{key} {value!r} has no entry in status_map and no status_default (known: "
                f"{allowed}); taken as absent",
            )
        )
        return None

    def instant(self, name: str) -> datetime | None:
        value, key = self.single(name)
        return read_date(value, key, self.invalid, field=name, formats=self.vocabulary.date_formats)

    def links(self, name: str) -> tuple[Link, ...]:
        value, key, reader = self.read_raw(name)
        if value is None:
            return ()
        # YAML writes several values as a list; a header or a line of text as "345, 376".
        split = reader in {"headers", "body"}
        found: list[Link] = []
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, list) and len(item) == 1 and isinstance(item[0], str):
                item = f"[[{item[0]}]]"  # YAML reads an unquoted [[x]] as a nested list
            if not isinstance(item, str):
                self.invalid.append(
                    (name, f"{key} must name documents, got {shown(item)}; taken as absent")
                )
                continue
            found.extend(self._parse_links(item, name, key, split=split))
        unique: list[Link] = []
        for link in found:
            if link not in unique:
                unique.append(link)
        return tuple(unique)

    def _parse_links(self, text: str, name: str, key: str, *, split: bool) -> list[Link]:
        links: list[Link] = []
        for token in _split_links(text) if split else [text.strip()]:
            wikilink = _WIKILINK.fullmatch(token)
            if wikilink is not None:
                target = re.split(r"[|#^]", wikilink.group(1), maxsplit=1)[0].strip()
                if not target:
                    self.invalid.append(
                        (name, f"{key} {token!r} is an empty wikilink; taken as absent")
                    )
                    continue
                links.append(Link(target, "wikilink"))
                continue
            markdown = _MARKDOWN_LINK.search(token)
            if markdown is not None:
                target = unquote(markdown.group(2).split("#", 1)[0]).strip()
                if target and not _SCHEME.match(target):
                    label = self._by_pattern(markdown.group(1))
                    links.append(Link(target, "markdown", fallback=label))
                    continue
            links.append(Link(token.strip(), "plain", fallback=self._by_pattern(token)))
        return [link for link in links if link.target]

    def _by_pattern(self, text: str) -> str | None:
        """The id ``link_pattern`` finds in ``text`` (its ``id`` group, else the match)."""
        pattern = self.vocabulary.link_pattern
        match = pattern.search(text) if pattern is not None else None
        if match is None or pattern is None:
            return None
        return match.group("id") if "id" in pattern.groupindex else match.group(0)


def _split_links(text: str) -> list[str]:
    """A link value's items: split at commas and semicolons outside brackets."""
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth = max(0, depth - 1)
        if char in ",;" and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


@lru_cache(maxsize=64)
def _matcher(include: tuple[str, ...], exclude: tuple[str, ...]) -> wcglob.WcMatcher[str]:
    """``include`` less ``exclude`` compiled once (``globmatch`` compiles them again for each
    path: 26 µs a file of a vault's walk, against 1 µs)."""
    return wcglob.compile(list(include), flags=GLOB_FLAGS, exclude=list(exclude) or None)
