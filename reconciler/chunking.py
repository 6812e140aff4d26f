"""Markdown chunking for the reference ingestion: by heading, then by paragraph.

Each chunk carries its section's heading so that a passage read alone still says where it is
from. Fenced code blocks are never split or mistaken for headings.
"""

from __future__ import annotations

import re

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _sections(body: str) -> list[tuple[str, list[str]]]:
    """Split into (heading line, paragraphs) sections; text before any heading has ``""``."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    paragraph: list[str] = []
    in_fence = False

    def flush() -> None:
        text = "\n".join(paragraph).strip()
        if text:
            sections[-1][1].append(text)
        paragraph.clear()

    for line in body.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            paragraph.append(line)
            continue
        if not in_fence and _HEADING.match(line):
            flush()
            sections.append((line.strip(), []))
            continue
        if not in_fence and not line.strip():
            flush()
            continue
        paragraph.append(line)
    flush()
    return [(h, ps) for h, ps in sections if ps or h]


def _split_long(text: str, limit: int) -> list[str]:
    """Split one over-long paragraph on sentence ends, else on whitespace."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    current = ""
    for whole in re.split(r"(?<=[.!?])\s+", text):
        sentence = whole
        while len(sentence) > limit:
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > 0 else limit
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if current and len(current) + 1 + len(sentence) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if current:
        pieces.append(current)
    return pieces


def chunk_markdown(body: str, *, max_chars: int = 1200) -> list[str]:
    """Chunk a markdown body: sections by heading, paragraphs packed up to ``max_chars``."""
    chunks: list[str] = []
    for heading, paragraphs in _sections(body):
        budget = max(max_chars - len(heading) - 1, max_chars // 2)
        current: list[str] = []
        size = 0
        pieces = [piece for p in paragraphs for piece in _split_long(p, budget)]
        for piece in pieces:
            if current and size + len(piece) + 2 > budget:
                chunks.append("\n\n".join(([heading] if heading else []) + current))
                current, size = [], 0
            current.append(piece)
            size += len(piece) + 2
        if current:
            chunks.append("\n\n".join(([heading] if heading else []) + current))
        elif heading and not paragraphs:
            continue  # a heading with no text under it is not a chunk of its own
    return chunks
