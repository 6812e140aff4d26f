"""A source's own vocabulary, read by configuration alone: which files are documents, where
their metadata is written, in which words, and how their links are spelled.

Shared by the connectors whose documents are files (the vault folder, the git repository).
Real systems of record do not speak the project's frontmatter: the PEPs open with an RFC 822
header block (``Status: Superseded``, ``Superseded-By: 600``, ``Created: 05-Jul-2001``),
Kubernetes KEPs keep a ``kep.yaml`` beside each ``README.md``, ADRs write ``Superseded by
[ADR-0012](0012-....md)`` in the body. ``VocabularyOptions`` declares how to read one of them
(docs/connectors/mapping.md); ``Vocabulary`` is its compiled, immutable form, and
``Vocabulary.read`` turns one file's bytes (and its sidecar's) into a ``Note``. Without options,
a vault or git source reads YAML frontmatter under the project's own key names, as always.

Pure: bytes in, notes out; no file system, no subprocess. A note whose identity cannot be
known raises ``NoteRefused``; one invalid field is recorded in ``Note.invalid`` and taken as
absent (a registered document keeps its registered value). Links are kept raw here and
resolved across the source by ``connectors.linking``.
"""

from __future__ import annotations

import posixpath
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import policy
from email.parser import HeaderParser
from types import MappingProxyType
from typing import Annotated, Any
from urllib.parse import unquote

import yaml
from pydantic import Field, PlainValidator
from wcmatch import glob as wcglob

from connectors.frontmatter import (
    SUFFIX,
    NoteRefused,
    load_yaml,
    normalise_body,
    split,
    yaml_problem,
)
from connectors.options import ConnectorOptions, Loc, invalid, refuse
from connectors.records import FIELDS as RECORD_FIELDS
from connectors.records import read_date, shown
from reconciler.model import ProblemKind, VersionState

__all__ = [
    "FIELDS",
    "READERS",
    "Link",
    "Note",
    "Vocabulary",
    "VocabularyOptions",
    "glob_problem",
    "vocabulary_rules",
]

#: The logical fields a document's metadata fills: a registry record's (less its
#: ``content_hash``: a file's is taken of its body) and ``replaces``, the reverse link.
FIELDS: tuple[str, ...] = (*(f for f in RECORD_FIELDS if f != "content_hash"), "replaces")
#: Where metadata can be written: YAML frontmatter, an RFC 822 header block at the top, a
#: sidecar file beside the document, lines of the body matched by patterns.
READERS: tuple[str, ...] = ("frontmatter", "headers", "sidecar", "body")
#: Placeholders of a sidecar path template.
SIDECAR_PLACEHOLDERS = frozenset({"dir", "name", "stem", "path"})

#: wcmatch flags of ``include``/``exclude``: ``**`` spans folders, ``{a,b}`` alternatives,
#: ``*`` never matches a name starting with a dot unless the pattern spells it.
_GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.FORCEUNIX
_DIGITS = re.compile(r"[0-9]+")
_WIKILINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADER_LINE = re.compile(r"[!-9;-~]+:")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SAMPLE_DATE = datetime(2001, 7, 5, 13, 45, 30, tzinfo=UTC)
_LINK_FIELDS = frozenset({"superseded_by", "replaces"})
#: Fields whose lines in a body are taken out of its content (``_body_meta``).
_STATE_FIELDS = frozenset({"status", "effective_from", "effective_to", *_LINK_FIELDS})


# -- options -------------------------------------------------------------------------------


def _strings(value: Any, what: str, *, empty: bool = True) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or (not value and not empty):
        raise invalid(f"a list of {what}")
    wrong = [((i,), f"must be {what[:-1]}") for i, v in enumerate(value) if not _filled(v)]
    if wrong:
        raise refuse(wrong)
    return [str(v) for v in value]


def _filled(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def glob_problem(pattern: str) -> str | None:
    """What is wrong with a path glob of ``include``/``exclude`` (or git's ``glob``), or None."""
    if pattern.startswith("/") or ".." in pattern.split("/"):
        return "must be relative to the source folder, like '**/*.md'"
    try:
        wcglob.globmatch("x", pattern, flags=_GLOB_FLAGS)
    except (ValueError, re.error) as exc:
        return f"is not a valid glob: {exc}"
    return None


def _globs(value: Any) -> list[str]:
    patterns = _strings(value, "path globs")  # include = [] is refused by the rules
    wrong: list[tuple[Loc, str]] = [
        ((index,), problem)
        for index, pattern in enumerate(patterns)
        if (problem := glob_problem(pattern)) is not None
    ]
    if wrong:
        raise refuse(wrong)
    return patterns


def _readers(value: Any) -> list[str]:
    names = _strings(value, "reader names", empty=False)
    wrong: list[tuple[Loc, str]] = [
        ((i,), f"must be one of {', '.join(READERS)}, got {name!r}")
        for i, name in enumerate(names)
        if name not in READERS
    ]
    wrong += [
        ((i,), f"{name!r} is listed twice")
        for i, name in enumerate(names)
        if name in READERS and name in names[:i]
    ]
    if wrong:
        raise refuse(wrong)
    return names


def _sidecar(value: Any) -> str:
    if not _filled(value):
        raise invalid("a path template such as '{dir}/kep.yaml'")
    template = str(value)
    if template.startswith("/") or ".." in template.split("/"):
        raise invalid("must stay inside the source folder: no leading '/' and no '..'")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise invalid(f"is not a valid template: {exc}") from None
    unknown = sorted(names - SIDECAR_PLACEHOLDERS)
    if unknown:
        raise invalid(
            f"unknown placeholder {{{unknown[0]}}}: use "
            + ", ".join(f"{{{n}}}" for n in sorted(SIDECAR_PLACEHOLDERS))
        )
    return template


def _patterns(value: Any) -> list[str]:
    patterns = _strings(value, "regular expressions")
    wrong: list[tuple[Loc, str]] = []
    for index, pattern in enumerate(patterns):
        try:
            compiled = re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            wrong.append(((index,), f"is not a valid regular expression: {exc}"))
            continue
        names = set(compiled.groupindex)
        if not names:
            wrong.append(((index,), "needs a named group for a field, such as (?P<status>\\w+)"))
        unknown = sorted(names - set(FIELDS))
        if unknown:
            wrong.append(
                (
                    (index,),
                    f"group {unknown[0]!r} names no field; name groups after one of "
                    + ", ".join(FIELDS),
                )
            )
    if wrong:
        raise refuse(wrong)
    return patterns


def _fields(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, Mapping):
        raise invalid("a table mapping fields to the source's key names, like status = 'Status'")
    wrong: list[tuple[Loc, str]] = []
    out: dict[str, list[str]] = {}
    for name, keys in value.items():
        if name not in FIELDS:
            wrong.append(((str(name),), f"is not a field; the fields are {', '.join(FIELDS)}"))
            continue
        listed = [keys] if isinstance(keys, str) else keys
        if not isinstance(listed, list) or not all(_filled(k) for k in listed):
            wrong.append(
                (
                    (str(name),),
                    "must be a key name, a list of key names to try in turn, or [] for a "
                    "field the source does not write",
                )
            )
            continue
        out[str(name)] = [str(k).strip() for k in listed]
    if wrong:
        raise refuse(wrong)
    return out


def _status_words(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise invalid("a table mapping source status values to version states")
    wrong: list[tuple[Loc, str]] = []
    seen: dict[str, tuple[str, str]] = {}
    for word, state in value.items():
        try:
            _state(state)
        except Exception:
            allowed = "|".join(s.value for s in VersionState)
            wrong.append(((str(word),), f"must be one of {allowed}, got {shown(state)}"))
            continue
        other = seen.get(str(word).lower())
        if other is not None and other[1] != str(state).lower():
            wrong.append(
                (
                    (str(word),),
                    f"{word!r} and {other[0]!r} differ only in case (matched without case "
                    "when no word matches exactly) but map to different states",
                )
            )
        seen[str(word).lower()] = (str(word), str(state).lower())
    if wrong:
        raise refuse(wrong)
    return {str(word): str(state) for word, state in value.items()}


def _state(value: Any) -> str:
    allowed = [state.value for state in VersionState]
    if not isinstance(value, str) or value.lower() not in allowed:
        raise invalid(f"must be one of {'|'.join(allowed)}, got {shown(value)}")
    return value.lower()


def _date_formats(value: Any) -> list[str]:
    formats = _strings(value, "strptime formats")
    wrong: list[tuple[Loc, str]] = []
    for index, form in enumerate(formats):
        if "%" not in form:
            wrong.append(((index,), f"{form!r} has no % directive, like '%d-%b-%Y'"))
            continue
        try:
            datetime.strptime(_SAMPLE_DATE.strftime(form), form)
        except ValueError as exc:
            wrong.append(((index,), f"{form!r} cannot read back a date it writes: {exc}"))
    if wrong:
        raise refuse(wrong)
    return formats


def _id_template(value: Any) -> str:
    if not _filled(value):
        raise invalid("a format string such as 'pep-{:04d}'")
    template = str(value)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise invalid(f"is not a valid format string: {exc}") from None
    if len(fields) != 1 or fields[0] not in {"", "0", "id"}:
        raise invalid("needs exactly one placeholder, {} or {id} (e.g. 'pep-{:04d}')")
    try:
        _format(template, "600")
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        raise invalid(f"cannot format the id 600: {exc}") from None
    return template


def _link_pattern(value: Any) -> str:
    if not _filled(value):
        raise invalid("a regular expression such as 'ADR-(?P<id>[0-9]+)'")
    try:
        compiled = re.compile(str(value))
    except re.error as exc:
        raise invalid(f"is not a valid regular expression: {exc}") from None
    if set(compiled.groupindex) - {"id"}:
        raise invalid("its only named group, if any, is (?P<id>...)")
    return str(value)


def _empty_values(value: Any) -> list[str]:
    return _strings(value, "values that mean none, like 'n/a'")


class VocabularyOptions(ConnectorOptions):
    """How a file source's documents are found and read (docs/connectors/mapping.md)."""

    include: Annotated[list[str], PlainValidator(_globs)] | None = None
    exclude: Annotated[list[str], PlainValidator(_globs)] = Field(default_factory=list)
    readers: Annotated[list[str], PlainValidator(_readers)] = Field(
        default_factory=lambda: ["frontmatter"]
    )
    sidecar: Annotated[str, PlainValidator(_sidecar)] | None = None
    body_patterns: Annotated[list[str], PlainValidator(_patterns)] = Field(default_factory=list)
    fields: Annotated[dict[str, list[str]], PlainValidator(_fields)] = Field(default_factory=dict)
    status_map: Annotated[dict[str, str], PlainValidator(_status_words)] | None = None
    status_default: Annotated[str, PlainValidator(_state)] | None = None
    date_formats: Annotated[list[str], PlainValidator(_date_formats)] = Field(default_factory=list)
    id_template: Annotated[str, PlainValidator(_id_template)] | None = None
    link_pattern: Annotated[str, PlainValidator(_link_pattern)] | None = None
    empty_values: Annotated[list[str], PlainValidator(_empty_values)] = Field(
        default_factory=list
    )

    def vocabulary(self, default_include: Sequence[str]) -> Vocabulary:
        """The compiled vocabulary; ``default_include`` when ``include`` is not given."""
        keys: dict[str, tuple[str, ...]] = {name: (name,) for name in FIELDS}
        keys.update({name: tuple(given) for name, given in self.fields.items()})
        return Vocabulary(
            include=tuple(self.include or default_include),
            exclude=tuple(self.exclude),
            readers=tuple(self.readers),
            sidecar=self.sidecar,
            body_patterns=tuple(re.compile(p, re.MULTILINE) for p in self.body_patterns),
            keys=MappingProxyType(keys),
            mapped=frozenset(name for name, given in self.fields.items() if given),
            status_map=MappingProxyType(
                {str(k): VersionState(v.lower()) for k, v in (self.status_map or {}).items()}
            ),
            status_default=VersionState(self.status_default) if self.status_default else None,
            date_formats=tuple(self.date_formats),
            id_template=self.id_template,
            link_pattern=re.compile(self.link_pattern) if self.link_pattern else None,
            empty_values=frozenset(v.strip().lower() for v in self.empty_values),
        )


def vocabulary_rules(options: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """Problems across the vocabulary's options, read from the raw ``[sources.options]``."""
    problems: list[tuple[Loc, str]] = []
    if options.get("include") == []:
        problems.append((("options", "include"), "names no file: give at least one glob"))
    readers = options.get("readers", ["frontmatter"])
    readers = [readers] if isinstance(readers, str) else readers
    if not isinstance(readers, list):
        return problems
    if "sidecar" in readers and not options.get("sidecar"):
        problems.append(
            (
                ("options", "sidecar"),
                "the sidecar reader needs sidecar, a path template such as '{dir}/kep.yaml'",
            )
        )
    if options.get("sidecar") and "sidecar" not in readers:
        problems.append(
            (("options", "readers"), "sidecar is set but 'sidecar' is not among the readers")
        )
    if "body" in readers and not options.get("body_patterns"):
        problems.append(
            (
                ("options", "body_patterns"),
                "the body reader needs body_patterns, regular "
                "expressions with named groups such as '^Status: (?P<status>\\w+)'",
            )
        )
    if options.get("body_patterns") and "body" not in readers:
        problems.append(
            (("options", "readers"), "body_patterns are set but 'body' is not among the readers")
        )
    fields = options.get("fields")
    if isinstance(fields, Mapping) and "body" in readers and readers == ["body"]:
        problems.append(
            (
                ("options", "fields"),
                "the body reader fills fields by its groups' names; "
                "fields applies to the frontmatter, headers and sidecar readers",
            )
        )
    return problems


# -- one document --------------------------------------------------------------------------


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

    @property
    def wikilink(self) -> bool:
        """Whether Obsidian's rules resolve it (path first, then a unique end of path)."""
        return self.kind == "wikilink"

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
        return bool(
            wcglob.globmatch(
                rel, list(self.include), flags=_GLOB_FLAGS, exclude=list(self.exclude) or None
            )
        )

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
        text = _decode(data, "not UTF-8")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        metas: dict[str, Mapping[str, Any]] = {}
        body = text
        if "frontmatter" in self.readers:
            metas["frontmatter"], body = split(body)
        if "headers" in self.readers:
            metas["headers"], body = _headers(body)
        body = normalise_body(body)
        if "sidecar" in self.readers:
            metas["sidecar"] = _sidecar_meta(sidecar, self.sidecar_path(rel) or "")
        if "body" in self.readers:
            metas["body"], body = _body_meta(body, self.body_patterns)
        reading = _Reading(self, metas)
        if default_key is None:
            default_key = self.default_key(rel)
        note = Note(path=rel, key=reading.identity() or default_key, body=body)
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
        return note

    def id_of(self, token: str) -> str | None:
        """A link token or an id value through ``id_template`` (None when it does not fit)."""
        if self.id_template is None:
            return token
        try:
            return _format(self.id_template, token)
        except (ValueError, TypeError, IndexError, KeyError, OverflowError):
            return None


def _format(template: str, token: str) -> str:
    value: int | str = int(token) if _DIGITS.fullmatch(token) else token
    return template.format(value, id=value)


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
            meta = self.metas.get(reader, {})
            keys = (name,) if reader == "body" else self.vocabulary.keys.get(name, (name,))
            for key in keys:
                value = meta.get(key.lower() if reader == "headers" else key)
                value = self.vocabulary.without_empty(value)
                if value is None or value == "" or (value == [] and name in _LINK_FIELDS):
                    continue  # an empty list is no link; elsewhere it is no single value
                if reader == "body" and name not in _LINK_FIELDS:
                    value = value[0]  # a single field: the first line that gives it
                self.found.add(name)
                return value, key, reader
        return None, (*self.vocabulary.keys.get(name, ()), name)[0], None

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


# -- the readers ---------------------------------------------------------------------------


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NoteRefused(
            ProblemKind.UNDECODABLE, f"{what} (byte {exc.start}: {exc.reason})"
        ) from exc


def _headers(text: str) -> tuple[dict[str, Any], str]:
    """An RFC 822 header block at the top of ``text``: (lower-cased name -> value, body).

    Continuation lines are unfolded; a repeated name gives a list. Text that does not open
    with ``Name: value`` has no header block.
    """
    if not _HEADER_LINE.match(text):
        return {}, text
    message = HeaderParser(policy=policy.compat32).parsestr(text)
    meta: dict[str, Any] = {}
    for name, value in message.items():
        clean = " ".join(str(value).split())
        key = name.strip().lower()
        if key in meta:
            previous = meta[key]
            meta[key] = [*previous, clean] if isinstance(previous, list) else [previous, clean]
        else:
            meta[key] = clean
    payload = message.get_payload()
    return meta, payload if isinstance(payload, str) else ""


def _sidecar_meta(data: bytes | None, where: str) -> Mapping[str, Any]:
    """A sidecar file's mapping (YAML, which JSON is a subset of); {} when there is none."""
    if data is None:
        return {}
    text = _decode(data, f"sidecar {where} is not UTF-8")
    try:
        loaded = load_yaml(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise NoteRefused(
            ProblemKind.INVALID_FRONTMATTER,
            f"sidecar {where} is not valid YAML or JSON: {yaml_problem(exc)}",
        ) from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise NoteRefused(
            ProblemKind.FRONTMATTER_NOT_MAPPING,
            f"sidecar {where} must be a mapping of keys to values",
        )
    return loaded


def _body_meta(body: str, patterns: Sequence[re.Pattern[str]]) -> tuple[dict[str, Any], str]:
    """Fields the body patterns capture (a list per group), and the body without the lines
    that gave a version's state (status, links, dates), each with the blank line that set it
    apart: those change when a version is cut or replaced (adr-tools adds a "Superseded by"
    paragraph), and are no in-place edit of its content. Lines that give only an id, a title
    or a class stay in the content."""
    meta: dict[str, list[str]] = {}
    spans: list[tuple[int, int]] = []
    for pattern in patterns:
        for match in pattern.finditer(body):
            state = False
            for name, value in match.groupdict().items():
                if value is not None and value.strip():
                    meta.setdefault(name, []).append(value.strip())
                    state = state or name in _STATE_FIELDS
            if state and match.end() > match.start():
                spans.append(match.span())
    if not spans:
        return dict(meta), body
    lines = body.split("\n")
    dropped: set[int] = set()
    offset = 0
    for index, line in enumerate(lines):
        start, end = offset, offset + len(line)
        offset = end + 1
        if any(a <= end and b > start for a, b in spans):
            dropped.add(index)
    for index in sorted(dropped):  # and the blank line that set it apart, after or else before
        for near in (index + 1, index - 1):
            if 0 <= near < len(lines) and near not in dropped and not lines[near].strip():
                dropped.add(near)
                break
    kept = [line for index, line in enumerate(lines) if index not in dropped]
    return dict(meta), normalise_body("\n".join(kept))
