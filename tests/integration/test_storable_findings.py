"""A finding's JSON stored as ``_without_nul`` spells it, whether the C encoder's shortcut
(``runlog._storable_finding``: no ``\\u`` escape, nothing to spell out) takes it or not."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reconciler.stores.sql.runlog import _storable_finding, _without_nul

_TEXT = st.text(st.characters(codec=None, categories=None), max_size=8) | st.sampled_from(
    ["", "a\x00b", "\ud800", "é", "plain", "tab\there", "\x01"]
)
_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(_TEXT, _VALUE, max_size=6))
def test_the_shortcut_stores_what_the_walk_stores(finding: dict[str, Any]) -> None:
    assert _storable_finding(finding) == _without_nul(finding)


def test_an_object_json_does_not_take_is_walked() -> None:
    odd = {"expected": {"a\x00": object()}, "kind": "x\x00"}
    assert _storable_finding(odd) == _without_nul(odd)
    assert _storable_finding(odd)["kind"] == "x\\0"
