"""The fields a file source's metadata fills, and the names every part of the vocabulary
shares (``connectors.vocabulary``)."""

from __future__ import annotations

import re

from wcmatch import glob as wcglob

from connectors.records import FIELDS as RECORD_FIELDS

__all__ = [
    "FIELDS",
    "GLOB_FLAGS",
    "LINK_FIELDS",
    "READERS",
    "SIDECAR_PLACEHOLDERS",
    "STATE_FIELDS",
    "format_id",
    "glob_problem",
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
GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.FORCEUNIX
#: The fields that name other documents (several values allowed).
LINK_FIELDS = frozenset({"superseded_by", "replaces"})
#: Fields whose lines in a body are taken out of its content (``readers.body_lines``).
STATE_FIELDS = frozenset({"status", "effective_from", "effective_to", *LINK_FIELDS})
_DIGITS = re.compile(r"[0-9]+")


def format_id(template: str, token: str) -> str:
    """``token`` through ``id_template`` (a value of digits is formatted as a number)."""
    value: int | str = int(token) if _DIGITS.fullmatch(token) else token
    return template.format(value, id=value)


def glob_problem(pattern: str) -> str | None:
    """What is wrong with a path glob of ``include``/``exclude`` (or git's ``glob``), or None."""
    if pattern.startswith("/") or ".." in pattern.split("/"):
        return "must be relative to the source folder, like '**/*.md'"
    try:
        wcglob.globmatch("x", pattern, flags=GLOB_FLAGS)
    except (ValueError, re.error) as exc:
        return f"is not a valid glob: {exc}"
    return None
