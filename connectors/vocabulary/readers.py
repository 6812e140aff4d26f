"""Where a file source's metadata is written, each read into a plain mapping: an RFC 822
header block at the top (``header_block``), a sidecar file (``sidecar_mapping``), lines of
the body matched by patterns (``body_lines``); YAML frontmatter is ``connectors.frontmatter``.
Each returns the mapping and what is left of the body; a block that cannot be read raises
``NoteRefused``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from email import policy
from email.parser import HeaderParser
from typing import Any

import yaml

from connectors.frontmatter import NoteRefused, load_yaml, normalise_body, yaml_problem
from connectors.vocabulary.blocks import locate
from connectors.vocabulary.fields import STATE_FIELDS
from reconciler.model import ProblemKind

__all__ = ["body_lines", "decode", "header_block", "sidecar_mapping"]

_HEADER_LINE = re.compile(r"[!-9;-~]+:")


def decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NoteRefused(
            ProblemKind.UNDECODABLE, f"{what} (byte {exc.start}: {exc.reason})"
        ) from exc


def header_block(
    text: str,
    *,
    start: re.Pattern[str] | None = None,
    wanted: frozenset[str] | None = None,
) -> tuple[dict[str, Any], str]:
    """An RFC 822 header block of ``text``: (lower-cased name -> value, the text without it).

    Continuation lines are unfolded; a repeated name gives a list. The block is found where
    ``blocks.locate`` finds it (the top, a ``<pre>`` or fenced wrapper, indented lines, after
    a notice; below the top, only a block holding one of the ``wanted`` names) or where
    ``start`` says; text without one has no header block.
    """
    if start is None and _HEADER_LINE.match(text):
        message = HeaderParser(policy=policy.compat32).parsestr(text)
        payload = message.get_payload()
        return _headers(message.items()), payload if isinstance(payload, str) else ""
    located = locate(text, start=start, wanted=wanted)
    if located is None:
        return {}, text
    message = HeaderParser(policy=policy.compat32).parsestr(located.block)
    return _headers(message.items()), located.body


def _headers(items: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for name, value in items:
        clean = " ".join(str(value).split())
        key = name.strip().lower()
        if key in meta:
            previous = meta[key]
            meta[key] = [*previous, clean] if isinstance(previous, list) else [previous, clean]
        else:
            meta[key] = clean
    return meta


def sidecar_mapping(data: bytes | None, where: str) -> Mapping[str, Any]:
    """A sidecar file's mapping (YAML, which JSON is a subset of); {} when there is none."""
    if data is None:
        return {}
    text = decode(data, f"sidecar {where} is not UTF-8")
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


def body_lines(body: str, patterns: Sequence[re.Pattern[str]]) -> tuple[dict[str, Any], str]:
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
                    state = state or name in STATE_FIELDS
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
