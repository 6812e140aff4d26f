"""Header blocks where real corpora put them (connectors/vocabulary/blocks.py): inside
``<pre>``…``</pre>``, in a fenced block, indented, below a notice, or where ``header_start``
says; a mapped key a reader could see but did not take is a problem naming the reader and the
likely cause; an ``id`` body pattern that misses a document writing the id is a warning.

Parsing is tested on bytes; the problems through a real vault folder (VaultSource).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_vocabulary import PEP_OPTIONS, doc, entry, source, vocabulary, write

from connectors.vault import VaultSource
from connectors.vocabulary.readers import header_block
from reconciler.model import ProblemKind, VersionState

HEADERS = {"pep": "12", "title": "A title", "status": "Final"}
BLOCK = "PEP: 12\nTitle: A title\nStatus: Final\n"


def indented(text: str, by: str = "  ") -> str:
    return "".join(by + line if line.strip() else line for line in text.splitlines(True))


SHAPES = {
    "pre": f"<pre>\n{indented(BLOCK)}</pre>\n\nThe body.\n",
    "pre with attributes, one line each end": '<PRE class="x">PEP: 12\nTitle: A title\n'
    "Status: Final</pre>\nThe body.\n",
    "fence": f"```\n{BLOCK}```\n\nThe body.\n",
    "indented fence": indented(f"~~~~ text\n{BLOCK}~~~~\n") + "\nThe body.\n",
    "indented": indented(BLOCK) + "\nThe body.\n",
    "notice above": f"This page is archived.\nSee the new wiki.\n\n{BLOCK}\nThe body.\n",
    "notice above a pre": f"'''Archived'''\n\n<pre>\n{indented(BLOCK)}</pre>\nThe body.\n",
    "blank lines first": f"\n\n{indented(BLOCK)}\nThe body.\n",
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_block_is_found_where_real_corpora_put_it(shape: str) -> None:
    meta, body = header_block(SHAPES[shape])
    assert meta == HEADERS
    assert "The body." in body
    assert "PEP:" not in body
    assert "<pre>" not in body.lower()
    assert "```" not in body


def test_the_block_at_the_top_is_read_as_before() -> None:
    meta, body = header_block(f"{BLOCK}\nThe body.\nNote: not a header\n")
    assert meta == HEADERS
    assert body == "The body.\nNote: not a header\n"


@pytest.mark.parametrize(
    "text",
    [
        "# Title\n\nStatus: Final\n",  # one line below a title: prose, not a block
        "\nStatus: Final\n",
        "Some prose.\nSee http://example.com and 12:30.\n",
        "<pre>\nStatus: Final\n",  # a wrapper never closed
        "```\nprint('x')\n```\n",
    ],
)
def test_what_is_no_block_stays_none(text: str) -> None:
    assert header_block(text) == ({}, text)


def test_header_start_names_the_line_a_block_starts_on() -> None:
    text = "Notice: migrated\nBy: the bot\n\nIntro.\n\n  PEP: 12\n  Status: Final\n\nBody.\n"
    assert header_block(text)[0] == {"notice": "migrated", "by": "the bot"}
    meta, body = header_block(text, start=re.compile(r"^ *PEP:", re.MULTILINE))
    assert meta == {"pep": "12", "status": "Final"}
    assert "Notice: migrated" in body
    assert "Status" not in body


@given(
    values=st.lists(
        st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=12),
        min_size=2,
        max_size=6,
    ),
    shape=st.sampled_from(["pre", "fence", "indented fence", "indented", "notice above"]),
    indent=st.sampled_from(["", "  ", "    ", "\t"]),
)
def test_every_wrapping_reads_the_same_headers_as_the_bare_block(
    values: list[str], shape: str, indent: str
) -> None:
    """The promise: wrapping a block (any indentation) changes nothing of what it says."""
    bare = "".join(f"Key{i}: {value}\n" for i, value in enumerate(values))
    block = "".join(indent + line for line in bare.splitlines(True))
    wrapped = {
        "pre": f"<pre>\n{block}</pre>\n\nBody.\n",
        "fence": f"{indent}```\n{block}{indent}```\n\nBody.\n",
        "indented fence": f"{indent}~~~\n{block}{indent}~~~\nBody.\n",
        "indented": f"{block}\nBody.\n"
        if indent
        else f"  {bare.replace(chr(10), chr(10) + '  ')}\nBody.\n",
        "notice above": f"A notice.\n\n{block}\nBody.\n",
    }[shape]
    assert header_block(wrapped)[0] == header_block(bare)[0]


def test_below_the_top_a_block_of_keys_nobody_reads_is_content() -> None:
    """A ``Note:``/``Warning:`` paragraph below a title is text: taking it out would change
    the content hash of documents that never had a header block (an in-place edit on
    upgrade). Only a block holding a key the vocabulary reads is metadata."""
    text = "# Deploying\n\nNote: read this first\nWarning: it is long\n\nThe body.\n"
    vocab = vocabulary(readers=["frontmatter", "headers"], fields={"status": "Status"})
    note = vocab.read("x.md", text.encode())
    assert "Note: read this first" in note.body
    assert header_block(text, wanted=frozenset({"status"})) == ({}, text)
    wrapped = "<pre>\nNote: x\nAuthor: y\n</pre>\nBody.\n"
    assert header_block(wrapped, wanted=frozenset({"status"})) == ({}, wrapped)
    meta, _ = header_block(text.replace("Warning", "Status"), wanted=frozenset({"status"}))
    assert meta == {"note": "read this first", "status": "it is long"}


# -- through a vault: states, and the problems of a config that misses ---------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


def pre_pep(number: int, status: str, *, notice: bool = False) -> str:
    head = "{{Archived}}\nThis page was migrated.\n\n" if notice else ""
    block = f"PEP: {number}\nTitle: PEP {number}\nStatus: {status}\nCreated: 01-Jan-2001\n"
    return f"{head}<pre>\n{indented(block)}</pre>\n\nThe text of PEP {number}.\n"


def test_pre_wrapped_peps_are_read_with_the_preset_unchanged(root: Path) -> None:
    write(root, "peps/pep-0001.rst", pre_pep(1, "Active"))
    write(root, "peps/pep-0002.rst", pre_pep(2, "Withdrawn", notice=True))
    snapshot = source(root, PEP_OPTIONS).scan()
    assert doc(snapshot, "pep-0001").state is VersionState.CURRENT
    assert doc(snapshot, "pep-0002").state is VersionState.RETIRED
    assert [p for p in snapshot.problems if p.kind is ProblemKind.UNUSED_MAPPING] == []


def test_a_key_written_but_not_read_names_the_reader_and_the_cause(root: Path) -> None:
    # the block sits below prose, one key a paragraph of its own: no default place finds it
    text = "# PEP 1\n\nSome prose first.\n\nStatus: Final\n\nThe body.\n"
    write(root, "peps/pep-0001.rst", text)
    options: dict[str, Any] = {**PEP_OPTIONS, "fields": {"status": "Status"}}
    snapshot = source(root, options).scan()
    (problem,) = [p for p in snapshot.problems if p.kind is ProblemKind.UNUSED_MAPPING]
    assert problem.field == "status"
    assert "the headers reader" in problem.message
    assert "peps/pep-0001.rst line 5 writes 'Status: Final'" in problem.message
    assert "header_start" in problem.message
    assert "spelling" not in problem.message
    fixed = source(root, {**options, "header_start": "^Status:"}).scan()
    assert doc(fixed, "peps/pep-0001.rst").state is VersionState.CURRENT


def test_a_key_outside_the_frontmatter_says_so(root: Path) -> None:
    write(root, "a.md", "---\ntitle: A\n---\nStatus: current\n")
    snapshot = source(root, {"fields": {"title": "title", "status": "Status"}}).scan()
    (problem,) = [p for p in snapshot.problems if p.kind is ProblemKind.UNUSED_MAPPING]
    assert "frontmatter reader" in problem.message
    assert "outside it" in problem.message


def test_a_key_no_document_writes_is_still_a_spelling_question(root: Path) -> None:
    write(root, "peps/pep-0001.rst", pre_pep(1, "Active"))
    options = {**PEP_OPTIONS, "fields": {**PEP_OPTIONS["fields"], "doc_class": "Typ"}}
    (problem,) = [
        p for p in source(root, options).scan().problems if p.kind is ProblemKind.UNUSED_MAPPING
    ]
    assert problem.field == "doc_class"
    assert "spelling" in problem.message


def test_an_id_pattern_that_misses_a_written_id_is_a_warning(root: Path) -> None:
    options = {
        "include": ["*.txt"],
        "readers": ["body"],
        "body_patterns": ["^Number: (?P<id>[0-9]+)$", "^State: (?P<status>\\w+)$"],
        "id_template": "doc-{}",
    }
    write(root, "a.txt", "Number: 7\nState: current\n\nBody.\n")
    write(root, "b.txt", "Number: RFC-8\nState: current\n\nBody.\n")
    write(root, "c.txt", "State: current\n\nNo number at all.\n")
    snapshot = source(root, options).scan()
    assert {d.source_key for d in snapshot.documents} == {"doc-7", "b.txt", "c.txt"}
    (missed,) = [p for p in snapshot.problems if p.kind is ProblemKind.ID_NOT_READ]
    assert missed.path == "b.txt"
    assert "'Number: RFC-8'" in missed.message
    assert "taken from its path" in missed.message


def test_header_start_needs_the_headers_reader() -> None:
    problems = dict(VaultSource.config_problems(entry({"header_start": "^PEP:"})))
    assert "header_start" in problems["options.readers"]
    assert vocabulary(readers=["headers"], header_start="^ *PEP:").header_start is not None
