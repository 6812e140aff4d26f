"""A reviewed file read as data a person wrote and nobody vouches for: YAML (or JSON, which is
YAML) parsed event by event, with the limits checked while it is read, so a hostile file costs
time and memory in proportion to its size and is refused with every problem named by line.

Refused: a file over ``MAX_BYTES``; bytes that are not UTF-8 text (a NUL byte, an invalid
sequence); an alias or an anchor (``&a``/``*a``: a 740-byte "billion laughs" would expand to
gigabytes); a mapping with a key twice (YAML would keep the last one silently); a key that is
not a plain value; nesting deeper than ``MAX_DEPTH``; a tag not YAML's own (``!!python/...``); more
than one document.

The events come from libyaml (PyYAML's C parser) where PyYAML was built with it, else from the
pure-Python parser: the same events either way, so what is refused and why do not depend on
it. The values are built here, iteratively (no recursion: a 20,000-deep nesting is one error,
not a ``RecursionError``); plain scalars are resolved as YAML 1.1 does (``0.7`` a number,
``true`` a boolean, ``~`` null), quoted ones stay strings, timestamps stay strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml import events as ev
from yaml.nodes import ScalarNode

__all__ = ["MAX_BYTES", "MAX_DEPTH", "Loaded", "UnsafeYaml", "load_text"]

#: The largest file read (a reviewed file of 100,000 proposals is about 15 MB).
MAX_BYTES = 64 * 1024 * 1024
#: The deepest nesting of mappings and lists read (a proposals file needs 3).
MAX_DEPTH = 32
#: At most this many problems are listed (then how many more there were).
MAX_LISTED = 50

_Loader: type[Any] = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
#: The plain scalars turned into values; any other tag a plain scalar resolves to (a timestamp,
#: ``<<``, ``=``) stays the string it is; an explicit YAML tag is applied.
_BUILT = {
    "tag:yaml.org,2002:null": lambda node: None,
    "tag:yaml.org,2002:bool": _CONSTRUCTOR.construct_yaml_bool,
    "tag:yaml.org,2002:int": _CONSTRUCTOR.construct_yaml_int,
    "tag:yaml.org,2002:float": _CONSTRUCTOR.construct_yaml_float,
}

#: The explicit tags read (``!!str 12``); any other (``!!python/object``) is refused.
_STANDARD = {
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq")
}

Path = tuple[str | int, ...]


class UnsafeYaml(ValueError):
    """A file refused as it was read; ``problems`` lists every one found (``line N: ...``)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass
class Loaded:
    """What a file held, and (when asked for) the line each key and list item is on."""

    data: Any
    #: path (keys and list indexes from the top) -> its 1-based line.
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The line of ``path``, or of the nearest enclosing thing the file holds."""
        at = tuple(path)
        while at:
            if at in self.lines:
                return self.lines[at]
            at = at[:-1]
        return None


def text_of(raw: bytes, *, max_bytes: int = MAX_BYTES) -> str:
    """``raw`` as text: ``UnsafeYaml`` for a file too large, binary or not UTF-8 (by line)."""
    if len(raw) > max_bytes:
        raise UnsafeYaml([f"the file is {len(raw):,} bytes; at most {max_bytes:,} are read"])
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise UnsafeYaml([f"line {line}: a NUL byte (offset {nul}): a binary file, not text"])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UnsafeYaml(
            [f"line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"]
        ) from None


def load_text(text: str, *, lines: bool = False, max_depth: int = MAX_DEPTH) -> Loaded:
    """The one document ``text`` holds, read under the limits above (``lines``: with the line
    of every key and list item). ``UnsafeYaml`` lists every problem found."""
    problems: list[str] = []
    found: dict[Path, int] = {}
    # the open containers: (the container, its path, the pending key of a mapping or None,
    # the keys seen in a mapping)
    stack: list[tuple[Any, Path, list[Any], set[Any] | None]] = []
    top: list[Any] = []
    documents = 0
    skipping = 0  # containers opened past the depth limit, still to be closed
    loader = _Loader(text)
    plain: dict[str, Any] = {}  # a plain scalar's text -> its value (``_untagged``)
    try:
        while True:
            event = loader.get_event()
            if (  # the usual event, first: an untagged scalar with no anchor, in the document
                event.__class__ is ev.ScalarEvent
                and event.tag is None
                and event.anchor is None
                and documents == 1
                and not skipping
            ):
                if lines and stack and stack[-1][3] is None:  # a list's next item
                    found[(*stack[-1][1], len(stack[-1][0]))] = _number(event)
                value = _untagged(event, plain)
                _place(value, stack, top, problems, found if lines else None, event)
                continue
            if isinstance(event, ev.StreamEndEvent):
                break
            if isinstance(event, ev.DocumentStartEvent):
                documents += 1
                if documents == 2:
                    problems.append(f"{_line(event)}: a second YAML document: one is read")
                continue
            if isinstance(event, ev.StreamStartEvent | ev.DocumentEndEvent) or documents > 1:
                continue
            if skipping:
                if isinstance(event, ev.CollectionStartEvent):
                    skipping += 1
                elif isinstance(event, ev.CollectionEndEvent):
                    skipping -= 1
                    if not skipping:  # the branch not read stands as nothing
                        _place(None, stack, top, problems, None, event)
                continue
            if isinstance(event, ev.CollectionEndEvent):
                value, path, _, _ = stack.pop()
                _place(value, stack, top, problems, found if lines else None, event)
                continue
            if lines and stack and stack[-1][3] is None:  # a list's next item starts here
                found[(*stack[-1][1], len(stack[-1][0]))] = _number(event)
            if isinstance(event, ev.AliasEvent):
                problems.append(f"{_line(event)}: the alias *{event.anchor}: aliases are refused")
                _place(None, stack, top, problems, None, event)
                continue
            if getattr(event, "anchor", None) is not None:
                problems.append(
                    f"{_line(event)}: the anchor &{event.anchor}: anchors and aliases are refused"
                )
            tag = getattr(event, "tag", None)
            if tag is not None and not _implicit(event) and tag not in _STANDARD:
                problems.append(f"{_line(event)}: the tag {tag}: only YAML's own are read")
            if isinstance(event, ev.ScalarEvent):
                _place(_scalar(event), stack, top, problems, found if lines else None, event)
                continue
            if len(stack) >= max_depth:
                problems.append(
                    f"{_line(event)}: nested deeper than {max_depth} levels; the rest of this "
                    "branch was not read"
                )
                skipping = 1
                continue
            path = _path_of(stack)
            if isinstance(event, ev.MappingStartEvent):
                stack.append(({}, path, [], set()))
            else:
                stack.append(([], path, [], None))
    except yaml.YAMLError as exc:
        problems.append(_yaml_problem(exc))
    if problems:
        listed = problems[:MAX_LISTED]
        if len(problems) > MAX_LISTED:
            listed.append(f"... and {len(problems) - MAX_LISTED} more problem(s)")
        raise UnsafeYaml(listed)
    return Loaded(top[0] if top else None, found)


def _implicit(event: Any) -> bool:
    implicit = event.implicit
    return bool(implicit[0] or implicit[1]) if isinstance(implicit, tuple) else bool(implicit)


def _scalar(event: ev.ScalarEvent) -> Any:
    tag = event.tag if event.tag in _STANDARD and not _implicit(event) else None
    if tag is None and event.style:  # quoted or a block: a string
        return event.value
    if tag is None:
        tag = _RESOLVER.resolve(ScalarNode, event.value, (True, False))  # type: ignore[no-untyped-call]
    build = _BUILT.get(tag)
    if build is None:
        return event.value
    try:
        return build(ScalarNode(tag, event.value))
    except (ValueError, OverflowError, yaml.YAMLError):
        return event.value


def _untagged(event: ev.ScalarEvent, plain: dict[str, Any]) -> Any:
    """``_scalar`` of a scalar with no tag: a quoted or block one is its text; a plain one's
    value depends on its text alone (YAML 1.1's resolution, then the value built: ``None``, a
    bool, a number or the text), so a text is resolved once while ``plain`` remembers it: a
    proposals file repeats its keys and most of its values on every proposal. ``plain`` is
    emptied at ``_PLAIN_KEPT`` texts: a file of distinct values costs no more memory."""
    text = event.value
    if event.style:
        return text
    if text in plain:
        return plain[text]
    if len(plain) >= _PLAIN_KEPT:
        plain.clear()
    value = plain[text] = _scalar(event)
    return value


#: How many plain scalars' values ``_untagged`` remembers at most.
_PLAIN_KEPT = 4096


def _path_of(stack: list[tuple[Any, Path, list[Any], set[Any] | None]]) -> Path:
    """The path of the value about to be placed in the innermost open container."""
    if not stack:
        return ()
    container, path, pending, _ = stack[-1]
    if isinstance(container, dict):
        return (*path, pending[0]) if pending else path
    return (*path, len(container))


def _place(
    value: Any,
    stack: list[tuple[Any, Path, list[Any], set[Any] | None]],
    top: list[Any],
    problems: list[str],
    lines: dict[Path, int] | None,
    event: ev.Event,
) -> None:
    """``value`` put where it belongs: the document, a list's next item, a mapping's key or
    the value of its pending key."""
    if not stack:
        top.append(value)
        return
    container, path, pending, seen = stack[-1]
    if seen is None:  # a list
        container.append(value)
        return
    if pending:  # the value of the pending key
        key = pending.pop()
        if key is not _REFUSED:
            container[key] = value
        return
    # a key
    if isinstance(value, list | dict):
        problems.append(f"{_line(event)}: a key that is a list or a mapping: keys are plain values")
        pending.append(_REFUSED)
        return
    if not isinstance(value, str | int | float | bool) and value is not None:
        value = str(value)
    if value in seen:
        problems.append(f"{_line(event)}: the key {value!r} a second time in one mapping")
        pending.append(_REFUSED)
        return
    seen.add(value)
    if lines is not None:
        lines[(*path, value)] = _number(event)
    pending.append(value)


#: The pending key of a mapping whose key was refused (its value is read and dropped).
_REFUSED = object()


def _number(event: ev.Event) -> int:
    mark = event.start_mark
    return mark.line + 1 if mark is not None else 0


def _line(event: ev.Event) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}" if mark is not None else "(no line)"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return (
        f"line {mark.line + 1}: not valid YAML: {problem}" if mark else f"not valid YAML: {problem}"
    )
