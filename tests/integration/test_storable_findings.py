"""A finding's JSON stored as ``_without_nul`` spells it, whether the C encoder's shortcut
(``runlog._storable_finding``: no ``\\u`` escape, nothing to spell out) takes it or not; on
SQLite's driver (``_with_texts``), its JSON columns as the text their bind processor makes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import create_engine

from reconciler.stores.sql.runlog import _storable_finding, _with_texts, _without_nul
from reconciler.stores.sql.schema import FindingRow

_TEXT = st.text(st.characters(codec=None, categories=None), max_size=8) | st.sampled_from(
    ["", "a\x00b", "\ud800", "é", "plain", "tab\there", "\x01"]
)
_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


_FINDING = st.fixed_dictionaries(
    {"check": _TEXT, "kind": _TEXT, "family": st.none() | _TEXT, "expected": _VALUE},
    optional={"actual": _VALUE, "action": st.none() | _TEXT},
)
_SQLITE = create_engine("sqlite://").dialect


def _bound(column: str, value: Any) -> Any:
    processor = FindingRow.__table__.c[column].type.dialect_impl(_SQLITE).bind_processor(_SQLITE)
    return processor(value)


@given(_FINDING)
def test_the_texts_made_once_are_what_the_columns_bind(finding: dict[str, Any]) -> None:
    finding = {"actual": None, **finding}
    core = _storable_finding(finding)
    direct = _with_texts(finding)
    assert direct == {
        **core,
        "expected": _bound("expected", core["expected"]),
        "actual": _bound("actual", core["actual"]),
    }


@given(st.dictionaries(_TEXT, _VALUE, max_size=6))
def test_the_shortcut_stores_what_the_walk_stores(finding: dict[str, Any]) -> None:
    assert _storable_finding(finding) == _without_nul(finding)


def test_an_object_json_does_not_take_is_walked() -> None:
    odd = {"expected": {"a\x00": object()}, "kind": "x\x00"}
    assert _storable_finding(odd) == _without_nul(odd)
    assert _storable_finding(odd)["kind"] == "x\\0"
