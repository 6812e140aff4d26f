"""Frontmatter YAML parsed by libyaml reads exactly as the pure-Python parser reads it: the same
mapping, or the same refusal in the same words (aliases, duplicate keys, broken YAML), on
random frontmatter-like texts."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from connectors import frontmatter
from connectors.frontmatter import _StringLoader, load_yaml

pytestmark = pytest.mark.skipif(
    frontmatter._CStringLoader is None, reason="PyYAML built without libyaml: one parser only"
)

KEYS = ["id", "title", "status", "tags", "a", "b", "superseded_by"]
SCALARS = [
    "current", "0123", "no", "yes", "~", "null", "NULL", "", "'null'", '"x: y"', "2024-01-01",
    "1.5", "[a, b]", "[]", "{}", "{a: 1}", "&x v", "*x", "&x [1, *x]", "|\n  text", ">\n  folded",
    "'it''s'", '"\\u00e9"', "a # comment", "- item", "[unclosed", "'open", "!!str 12", "!tag x",
    "@at", "`tick`", "%directive", "é", "\t", "a: b", "? k", "*", "&",
]  # fmt: skip


@st.composite
def frontmatters(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        key = draw(st.sampled_from(KEYS))
        value = draw(st.sampled_from(SCALARS))
        indent = draw(st.sampled_from(["", "", "  ", "\t"]))
        if draw(st.booleans()):
            nested = draw(st.sampled_from(KEYS))
            lines.append(f"{indent}{key}:\n{indent}  {nested}: {value}")
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n...\n", "\n---\nb: 1\n"]))


#: Characters YAML gives a meaning to, and the Unicode breaks and marks the parsers disagree on.
NOISE = "ab1:-[]{}&*!|>'\"#,?~ \n\t\r%@`.\\\u00e9\u2028\u2029\ufeff\x85"


def read(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "read", parse(text)
    except (yaml.YAMLError, RecursionError) as exc:
        return "refused", f"{type(exc).__name__}: {exc}"


def pure_python(text: str) -> Any:
    return yaml.load(text, Loader=_StringLoader)


@settings(max_examples=400, deadline=None)
@given(st.one_of(frontmatters(), st.text(alphabet=NOISE, max_size=40)))
@example("a: &x [1]\nb: *x\n")  # an alias: refused with the pure-Python parser's words
@example("a: &x\n  b: *x\n")  # a recursive one
@example("a: 1\na: 2\n")  # a duplicate key
@example("a: ~\nb: 'null'\nc: 0123\nd: no\ne: 2024-01-01\n")  # nothing resolved but null
@example("")
@example("::\t")  # libyaml takes a tab where PyYAML's own parser refuses it
@example("title: Foo\t\n")
@example("tags: [why?]\n")
@example("a: !\n")  # None for PyYAML, "" for libyaml
@example("a: >#\n")
@example("a\u2028b: \ufeffc\x85")
def test_libyaml_reads_frontmatter_as_the_pure_python_parser_does(text: str) -> None:
    assert read(load_yaml, text) == read(pure_python, text)


def test_an_alias_is_refused_before_anything_is_expanded() -> None:
    laughs = "a: &a [x, x]\n" + "".join(
        f"{chr(98 + n)}: &{chr(98 + n)} [*{chr(97 + n)}, *{chr(97 + n)}]\n" for n in range(20)
    )
    kind, message = read(load_yaml, laughs)
    assert (kind, message.splitlines()[0]) == (
        "refused",
        "ComposerError: found the alias *a: aliases are not allowed in frontmatter",
    )
