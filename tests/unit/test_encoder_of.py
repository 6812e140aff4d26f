"""``encoder_of``: the text and the errors of ``JSONEncoder.encode`` with the same options, for
any value (the report's lines, the findings' columns and the audit chain's hashed texts go
through it; round 11 of issue 36 in docs/benchmarks.md)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import encoder_of

_KEYS = st.one_of(
    st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none(),
    st.floats(allow_nan=False, width=32),
)  # fmt: skip
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.text(
        alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=6
    ),
    st.just(datetime(2020, 1, 2, tzinfo=UTC)), st.just(object()),
)  # fmt: skip
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_KEYS, inner, max_size=4),
    ),
    max_leaves=20,
)
_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "skipkeys": st.booleans(),
        "ensure_ascii": st.booleans(),
        "check_circular": st.booleans(),
        "allow_nan": st.booleans(),
        "sort_keys": st.booleans(),
        "separators": st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]),
        "default": st.sampled_from([str, repr]),
    },
)


def _outcome(encode: Any, value: Any) -> tuple[str, str]:
    try:
        return "text", encode(value)
    except Exception as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, options=_OPTIONS)
def test_the_same_text_and_errors_as_encode(value: Any, options: dict[str, Any]) -> None:
    encoder = json.JSONEncoder(**options)
    fast = encoder_of(encoder)
    assert _outcome(fast, value) == _outcome(encoder.encode, value)
    # again: an error in the first call leaves nothing behind (fresh markers each call)
    assert _outcome(fast, value) == _outcome(encoder.encode, value)


def test_the_repos_encoders() -> None:
    value = {"b": [1.5, math.inf, None, "é\x00\ud800"], "a": {"t": datetime(2020, 1, 2)}}
    for options in (
        {"default": str},
        {"check_circular": False},
        {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False},
        {"ensure_ascii": False},
    ):
        encoder = json.JSONEncoder(**options)  # type: ignore[arg-type]
        assert _outcome(encoder_of(encoder), value) == _outcome(encoder.encode, value)
        assert encoder_of(encoder)("x\u2028") == encoder.encode("x\u2028")


def test_a_circular_value_is_refused_as_encode_refuses_it() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    encoder = json.JSONEncoder()
    assert _outcome(encoder_of(encoder), loop) == ("ValueError", "Circular reference detected")
    assert encoder_of(encoder)([loop[:1], loop[:1]]) == "[[1], [1]]"  # (no marker left)


def test_indent_is_the_python_encoders() -> None:
    encoder = json.JSONEncoder(indent=2)
    assert encoder_of(encoder) == encoder.encode
