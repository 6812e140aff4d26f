"""YAML frontmatter, read strictly: the default metadata reader of the file sources (the vault
folder, the git repository; ``connectors.vocabulary`` combines it with the other readers).

Pure: text in, a mapping and the normalised body out; no file system, no subprocess. Every
scalar is loaded as a string and converted on purpose (no YAML 1.1 surprises such as ``0123``
becoming 83 or ``no`` becoming False); aliases and duplicate keys are refused. Frontmatter
that cannot be read raises ``NoteRefused``: the note's identity is then unknown.

YAML is parsed by libyaml (PyYAML's C parser) where PyYAML was built with it: the pure-Python
parser took 0.45 ms of a note's 0.6 ms scan, the C one takes 0.05 ms (a vault of 100k notes is
scanned in seconds, not a minute). Anything the C parser does not take as it is, an alias or
an error, is parsed again by the pure-Python one, so that what is refused, and the message
saying why, are the same either way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node

from reconciler.model import ProblemKind

__all__ = [
    "SUFFIX",
    "NoteRefused",
    "content_hash",
    "load_yaml",
    "normalise_body",
    "one_line",
    "split",
    "yaml_problem",
]

#: The suffix of a note; a note's default id is its relative path without it.
SUFFIX = ".md"
_HANDLER = YAMLHandler()
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")


class _NoDuplicates:
    """A constructor that refuses a mapping with a key twice (both loaders below)."""

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
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc, no-any-return]


class _StringLoader(_NoDuplicates, yaml.BaseLoader):
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


#: ``_StringLoader`` over libyaml's parser, where PyYAML has it (its composer is libyaml's, so
#: an alias is found afterwards, as a node reached twice: ``_reached_twice``).
_CStringLoader: type[Any] | None = None
if yaml.__with_libyaml__:

    class _CStringLoaderType(_NoDuplicates, yaml.CBaseLoader):
        """``_StringLoader``'s resolver and constructor over libyaml's parser."""

    _CStringLoader = _CStringLoaderType


def _construct_null(loader: yaml.BaseLoader, node: Node) -> None:
    return None


for _loader in (_StringLoader, _CStringLoader):
    if _loader is not None:
        _loader.add_implicit_resolver(
            "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
        )
        _loader.add_constructor("tag:yaml.org,2002:null", _construct_null)


class NoteRefused(Exception):
    """A note whose identity cannot be known: it becomes a problem, never a document."""

    def __init__(self, kind: ProblemKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


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
        loaded = load_yaml(raw)
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


def load_yaml(text: str) -> Any:
    """YAML as strings, lists, mappings and None only (``_StringLoader``): safe to load.

    Parsed by libyaml when PyYAML has it and the text has none of what the two parsers read
    differently (``_PARSERS_DIFFER``); a text libyaml refuses, or one with an alias, is parsed
    again by the pure-Python parser, whose result or error is then the answer."""
    if _CStringLoader is not None and not _parsers_differ(text):
        loader = _CStringLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if not _reached_twice(node):
                return loader.construct_document(node)
        except yaml.YAMLError:
            pass  # the pure-Python parser's own words for it, below
        finally:
            loader.dispose()
    return yaml.load(text, Loader=_StringLoader)


#: What libyaml reads and PyYAML's own parser refuses, or reads otherwise (found by comparing
#: the two on random texts, ``tests/unit/test_frontmatter.py``): tabs (``title: Foo<TAB>``,
#: refused by PyYAML), ``!`` tags (``a: !`` is None for PyYAML, "" for libyaml), a byte-order
#: mark or a Unicode line break inside the text, a block scalar's header followed by ``#``,
#: and a ``?`` in a flow collection (``tags: [why?]``, refused by PyYAML). A text with any of
#: them is read by PyYAML's own parser, so that a note is read or refused as it always was.
_PARSERS_DIFFER = re.compile("[\t!\ufeff\x85\u2028\u2029]|[|>][-+0-9]*#")


def _parsers_differ(text: str) -> bool:
    return bool(_PARSERS_DIFFER.search(text)) or ("?" in text and ("[" in text or "{" in text))


def _reached_twice(root: Node) -> bool:
    """Whether a node is reached twice from ``root``: libyaml's composer makes an alias the
    very node its anchor names (and a recursive one, a cycle). Each node is visited once."""
    seen: set[int] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if isinstance(node, MappingNode):
            for key, value in node.value:
                pending += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            pending += node.value
    return False


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
