"""``[sources.options]`` of a file source's vocabulary, declared with pydantic and checked when
the config loads (every mistake listed at once); ``VocabularyOptions.vocabulary`` compiles them
into the ``Vocabulary`` that reads documents (``document.py``)."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import Field, PlainValidator

from connectors.options import ConnectorOptions, Loc, invalid, refuse
from connectors.records import shown
from connectors.vocabulary.document import Vocabulary
from connectors.vocabulary.fields import (
    FIELDS,
    READERS,
    SIDECAR_PLACEHOLDERS,
    format_id,
    glob_problem,
)
from reconciler.model import VersionState

__all__ = ["VocabularyOptions", "vocabulary_rules"]

#: A date each format must read back once written (with an offset, for ``%z``).
_SAMPLE_DATE = datetime(2001, 7, 5, 13, 45, 30, tzinfo=UTC)


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
        format_id(template, "600")
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


def _header_start(value: Any) -> str:
    if not _filled(value):
        raise invalid("a regular expression matching the block's first line, like '^ *PEP:'")
    try:
        re.compile(str(value), re.MULTILINE)
    except re.error as exc:
        raise invalid(f"is not a valid regular expression: {exc}") from None
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
    empty_values: Annotated[list[str], PlainValidator(_empty_values)] = Field(default_factory=list)
    header_start: Annotated[str, PlainValidator(_header_start)] | None = None

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
            header_start=(
                re.compile(self.header_start, re.MULTILINE) if self.header_start else None
            ),
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
    if options.get("header_start") and "headers" not in readers:
        problems.append(
            (("options", "readers"), "header_start is set but 'headers' is not among the readers")
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
