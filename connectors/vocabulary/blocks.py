"""Where a header block sits in a file: real corpora rarely open with it. A wiki export wraps
it in ``<pre>``…``</pre>``, a markdown page in a fenced block, many indent every line, and
some put a notice above it. ``locate`` finds the block's lines (dedented, so that the RFC 822
parser reads them) and what remains of the file around it; ``readers.header_block`` parses
them.

Found, in this order:

- the file opens with ``Name: value`` (unchanged: the whole text is parsed as RFC 822, the
  block ends at its first blank or non-header line);
- the first non-blank line opens a ``<pre>``, an HTML comment (``<!--``, its block between
  ``---`` lines or not), a fence or a ``---`` line, or is an indented ``Name: value``:
  the block is the wrapper's first paragraph of header lines, or the indented run;
- a notice before it: within the first ``PREAMBLE_LINES`` lines, the first paragraph (or
  wrapper) made of at least two ``Name: value`` lines and nothing else;
- ``header_start`` (a source option) names the line the block starts on, when none of these
  finds it; then only that is tried.

Below the top, a block counts only when it holds a key the vocabulary reads (``wanted``): a
paragraph such as ``Note: …`` / ``Warning: …`` in a document's text is content, and taking it
out would change the document's content hash.

Pure text in, lines out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PREAMBLE_LINES", "Located", "locate"]

#: How far below the top a notice may push the block (lines).
PREAMBLE_LINES = 60
#: A header line at the top of the file, as RFC 822 allows it (the parser's own rule).
_TOP_HEADER = re.compile(r"[!-9;-~]+:")
#: A header line anywhere else: a word, a colon, then a space or the line's end (so that
#: ``http://…`` and ``12:30`` are no header).
_HEADER = re.compile(r"(?P<indent>[ \t]*)[A-Za-z][A-Za-z0-9_.-]*:(?:[ \t]|$)")
_NAME = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_.-]*):", re.MULTILINE)
_PRE_OPEN = re.compile(
    r"[ \t]*(?:<pre(?:[ \t][^>]*)?>|(?P<comment><!--))(?P<rest>.*)$", re.IGNORECASE
)
_PRE_CLOSE = re.compile(r"</pre\s*>", re.IGNORECASE)
_COMMENT_CLOSE = re.compile(r"-->")
#: A fenced block, or a YAML-style block between ``---`` lines (below the top: the
#: frontmatter reader reads the one that opens the file).
_FENCE = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,}|-{3}(?=[ \t]*$))[^`]*$")
#: The ``---`` line that may open a block inside a wrapper (YAML in an HTML comment).
_DASHES = re.compile(r"[ \t]*---[ \t]*$")


@dataclass(frozen=True, slots=True)
class Located:
    """A header block found in a file: its text to parse, the file without it, and where it
    was (1-based line numbers, for messages)."""

    block: str
    body: str
    first_line: int
    last_line: int


def locate(
    text: str,
    *,
    start: re.Pattern[str] | None = None,
    wanted: frozenset[str] | None = None,
) -> Located | None:
    """The header block of ``text`` (newlines already ``\\n``), or None when it has none.

    ``wanted``: lower-cased key names; below the top, a block holding none of them is none
    (None: any block counts)."""
    lines = text.split("\n")
    if start is not None:
        match = start.search(text)
        if match is None:
            return None
        at = text.count("\n", 0, match.start())
        return _block_at(lines, at, least=1)
    if _TOP_HEADER.match(text):
        return Located(block=text, body="", first_line=1, last_line=_top_end(lines))
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    if _wrapped_or_indented(lines[first]):
        found = _block_at(lines, first, least=1)
        if found is not None and _holds(found, wanted):
            return found
    for at in range(first, min(len(lines), PREAMBLE_LINES)):
        opens = _PRE_OPEN.match(lines[at]) or _FENCE.match(lines[at])
        if opens or (lines[at].strip() and (at == first or not lines[at - 1].strip())):
            found = _block_at(lines, at, least=2)
            if found is not None and _holds(found, wanted):
                return found
    return None


def _holds(found: Located, wanted: frozenset[str] | None) -> bool:
    if wanted is None:
        return True
    names = {match.group("name").lower() for match in _NAME.finditer(found.block)}
    return bool(names & wanted)


def _wrapped_or_indented(line: str) -> bool:
    return bool(_PRE_OPEN.match(line) or _FENCE.match(line) or line[:1] in {" ", "\t"})


def _top_end(lines: list[str]) -> int:
    """The last line of a block that opens the file (at its first blank or other line)."""
    for index, line in enumerate(lines):
        if not line.strip() or not (_TOP_HEADER.match(line) or line[:1] in {" ", "\t"}):
            return max(index, 1)
    return len(lines)


def _block_at(lines: list[str], at: int, *, least: int) -> Located | None:
    """The block that starts on line ``at``: inside the wrapper it opens, or the run of
    header lines from there; None when it holds fewer than ``least`` header lines."""
    pre = _PRE_OPEN.match(lines[at])
    fence = _FENCE.match(lines[at]) if pre is None else None
    if pre is None and fence is None:
        run = _header_run(lines, at)
        if _count(run) < least:
            return None
        end = at + len(run)
        return Located(
            block=_dedent(run),
            body="\n".join([*lines[:at], *lines[end:]]),
            first_line=at + 1,
            last_line=end,
        )
    inside: list[str] = []
    close = len(lines)
    closer = _COMMENT_CLOSE if pre is not None and pre.group("comment") else _PRE_CLOSE
    if pre is not None:
        rest = pre.group("rest")
        closing = closer.search(rest)
        head = rest[: closing.start()] if closing is not None else rest
        if head.strip():
            inside.append(head)
        if closing is not None:
            close = at
    if close == len(lines):
        for index in range(at + 1, len(lines)):
            line = lines[index]
            if pre is not None and closer.search(line):
                head = closer.split(line, maxsplit=1)[0]
                if head.strip():
                    inside.append(head)
                close = index
                break
            if fence is not None and _closes(line, fence.group("fence")):
                close = index
                break
            inside.append(line)
        else:
            return None  # a wrapper never closed is no block
    skip = next((i for i, line in enumerate(inside) if line.strip()), len(inside))
    dashes = pre is not None and skip < len(inside) and bool(_DASHES.match(inside[skip]))
    skip += dashes  # (YAML between '---' lines inside the wrapper: the block is between)
    run = _header_run(inside, skip) if skip < len(inside) else []
    if _count(run) < least:
        return None
    rest = inside[skip + len(run) :]
    if dashes and rest and _DASHES.match(rest[0]):
        rest.pop(0)
    while rest and not rest[0].strip():
        rest.pop(0)
    return Located(
        block=_dedent(run),
        body="\n".join([*lines[:at], *rest, *lines[close + 1 :]]),
        first_line=at + 1 + skip,
        last_line=at + skip + len(run),
    )


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) == {fence[0]} and len(stripped) >= len(fence)


def _header_run(lines: list[str], at: int) -> list[str]:
    """The header lines from ``at`` (each at the first one's indentation) with their
    continuation lines (indented further), up to the first blank or other line."""
    first = _HEADER.match(lines[at])
    if first is None:
        return []
    indent = first.group("indent")
    run = [lines[at]]
    for line in lines[at + 1 :]:
        header = _HEADER.match(line)
        if (header is not None and header.group("indent") == indent) or (
            line.strip()
            and line.startswith(indent)
            and line[len(indent) : len(indent) + 1]
            in {
                " ",
                "\t",
            }
        ):
            run.append(line)
        else:
            break
    return run


def _count(run: list[str]) -> int:
    return sum(1 for line in run if _HEADER.match(line))


def _dedent(run: list[str]) -> str:
    indent = len(run[0]) - len(run[0].lstrip(" \t"))
    return "\n".join(line[indent:] for line in run) + "\n"
