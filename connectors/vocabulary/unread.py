"""What a document's text writes that its readers did not take: a mapped key that appears as
``Key: value`` in the raw text although no reader extracted it (a block the headers reader did
not find, a line outside the frontmatter), and an ``id`` body pattern that matched nothing in
a document that writes the id's line. Each is said with the reader and the likely cause, so
that a new configuration is mended from its first scan, not guessed at ("check its spelling"
is only said when no document writes the key at all).

Pure: the text and what was read in, messages out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from connectors.vocabulary.blocks import PREAMBLE_LINES

__all__ = ["id_pattern_missed", "unread_keys"]

#: How much of a text is searched for keys no reader took: metadata sits near the top, and
#: every scan pays for the search (a document that lacks a mapped field is searched).
SEARCHED_CHARS = 16_384
#: Readers whose fields are named by ``fields`` (the body reader's are named by its groups).
_KEYED_READERS = ("frontmatter", "headers", "sidecar")


def unread_keys(
    text: str,
    *,
    readers: tuple[str, ...],
    keys: Mapping[str, tuple[str, ...]],
    unfound: set[str],
    header_start: re.Pattern[str] | None,
    metas: Mapping[str, Mapping[str, Any]],
    cased: set[str] | frozenset[str] = frozenset(),
) -> dict[str, str]:
    """field -> where the raw text (its first ``SEARCHED_CHARS``) writes a key mapped to it
    (one of ``unfound``, the mapped fields no reader gave), and why no reader took it; and
    for the fields of ``unfound`` and ``cased``, a YAML key (front matter, sidecar) that is
    the mapped key in another case (YAML keys are exact: ``superseded-by`` is not
    ``Superseded-By``)."""
    if not any(reader in _KEYED_READERS for reader in readers):
        return {}
    out: dict[str, str] = {}
    text = text[:SEARCHED_CHARS]
    for name in sorted(unfound | cased):
        names = keys.get(name, ())
        match = (
            _key_line(names, "headers" in readers).search(text)
            if names and name in unfound
            else None
        )
        if match is None:
            other = _other_case(names, metas)
            if other is not None:
                out[name] = other
            continue
        line = text.count("\n", 0, match.start()) + 1
        written = match.group(0).strip()[:80]
        out[name] = f"line {line} writes {written!r}: {_cause(readers, header_start, metas)}"
    return out


def _cause(
    readers: tuple[str, ...],
    header_start: re.Pattern[str] | None,
    metas: Mapping[str, Mapping[str, Any]],
) -> str:
    if "headers" in readers:
        if header_start is not None:
            return (
                "the headers reader starts the block where header_start matches, and this "
                "line is outside that block (a blank or other line ends it): mend header_start"
            )
        if not metas.get("headers"):
            return (
                "the headers reader found no header block in the file (it looks at the top, "
                "inside <pre> or a fenced block, in indented lines, and after a notice of up "
                f"to {PREAMBLE_LINES} lines): set header_start to a pattern matching the "
                "block's first line, or read the line with the body reader (body_patterns)"
            )
        return (
            "the line is outside the header block the headers reader took (a blank or other "
            "line ends a block; a notice that itself reads as 'Name: value' at the top is "
            "taken for the block): set header_start to a pattern matching the block's first "
            "line"
        )
    if "frontmatter" in readers:
        return (
            "the frontmatter reader reads only YAML between '---' lines at the top, and this "
            "line is outside it: add 'headers' (a 'Name: value' block) or 'body' "
            "(body_patterns) to readers"
        )
    return (
        "the sidecar reader reads the sidecar file, and this key is written in the document "
        "itself: add 'headers' or 'body' to readers"
    )


def _other_case(names: tuple[str, ...], metas: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Where a YAML reader holds one of ``names`` in another case, what to map instead."""
    folded = {key.casefold() for key in names}
    for reader in ("frontmatter", "sidecar"):
        for key in metas.get(reader) or {}:
            if isinstance(key, str) and key not in names and key.casefold() in folded:
                return (
                    f"the {reader} writes the key {key!r}, and the configuration maps "
                    f"{list(names)!r}: YAML keys are read exactly as written (only header "
                    f"names are read in any case): write {names[0]!r} there, or map {key!r} "
                    "in fields (a list maps several spellings)"
                )
    return None


@lru_cache(maxsize=256)
def _key_line(keys: tuple[str, ...], fold: bool) -> re.Pattern[str]:
    names = "|".join(re.escape(key) for key in keys)
    return re.compile(
        rf"^[ \t>*#|-]*(?:{names})[ \t]*:.*$", re.MULTILINE | (re.IGNORECASE if fold else 0)
    )


def id_pattern_missed(body: str, patterns: tuple[re.Pattern[str], ...]) -> str | None:
    """When no body pattern gave an id but a loosened one finds the id's line: a message
    naming the line (its id falls back to its path)."""
    for pattern in patterns:
        loose = _loosened(pattern.pattern)
        if loose is None:
            continue
        match = loose.search(body)
        if match is not None:
            line = match.group(0).strip()[:80]
            return (
                f"body pattern {pattern.pattern!r} gives the id but matched nothing, while the "
                f"document writes {line!r}; its id is taken from its path, and changes when "
                "the line is mended: widen the pattern (or mend the line)"
            )
    return None


@lru_cache(maxsize=64)
def _loosened(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` up to its ``id`` group, that group taking the rest of the line."""
    at = pattern.find("(?P<id>")
    if at < 0 or not re.search(r"[A-Za-z0-9]", pattern[:at]):
        return None  # no literal text before the group: nothing says the line is the id's
    try:
        return re.compile(pattern[:at] + r"(?P<id>.*\S.*)$", re.MULTILINE)
    except re.error:
        return None
