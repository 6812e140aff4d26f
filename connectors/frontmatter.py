"""YAML frontmatter, read strictly: the default metadata reader of the file sources (the vault
folder, the git repository; ``connectors.vocabulary`` combines it with the other readers).

Pure: text in, a mapping and the normalised body out; no file system, no subprocess. Every
scalar is loaded as a string and converted on purpose (no YAML 1.1 surprises such as ``0123``
becoming 83 or ``no`` becoming False); aliases and duplicate keys are refused. Frontmatter
that cannot be read raises ``NoteRefused``: the note's identity is then unknown.
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
    """YAML as strings, lists, mappings and None only (``_StringLoader``): safe to load."""
    return yaml.load(text, Loader=_StringLoader)


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
