"""``replaced``: the document ``dataclasses.replace`` makes, for any fields changed (the time
rule and the planner copy rows through it; round 11 of issue 36 in docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import OPEN_END, Document, VersionState, replaced

_NAMES = [f.name for f in dataclasses.fields(Document)]
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=5),
    st.sampled_from(list(VersionState)), st.datetimes(timezones=st.just(UTC)),
)  # fmt: skip
_ROW = Document(
    doc_id="s:a", source="s", source_key="a", doc_family_id="s:a", doc_version=2,
    version_state=VersionState.CURRENT, effective_to=OPEN_END,
    effective_from=datetime(2020, 1, 1, tzinfo=UTC), title="A", source_hash="h", chunk_count=3,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=len(_NAMES)))
def test_the_same_document_as_replace(changes: dict[str, Any]) -> None:
    fast, slow = replaced(_ROW, **changes), dataclasses.replace(_ROW, **changes)
    assert type(fast) is Document
    assert fast == slow
    assert all(getattr(fast, n) is getattr(slow, n) for n in _NAMES)


def test_no_change_is_an_equal_copy() -> None:
    assert replaced(_ROW) == _ROW


def test_a_name_that_is_no_field_is_replaces_error() -> None:
    with pytest.raises(TypeError):
        replaced(_ROW, colour="red")
