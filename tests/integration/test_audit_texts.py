"""The audit body's texts (``stores/sql/audit_body.texts_of``): an entry of a plain kind (a
page of intents, a move's entries, a confirmation) encoded in C as it is gives the text the
``jsonable`` walk gives, whatever it holds (a value JSON cannot encode falls back to the walk)."""

from __future__ import annotations

import enum
import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import AuditEntry, AuditKind, jsonable
from reconciler.stores.sql.audit_body import _field_text, canonical_plain, texts_of


class _Colour(enum.StrEnum):
    RED = "red"


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.sampled_from([_Colour.RED, datetime(2026, 1, 2, tzinfo=UTC)]),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
    ),
    max_leaves=8,
)


@given(
    st.sampled_from(
        [AuditKind.MOVE, AuditKind.MOVE_COPIED, AuditKind.MOVE_DONE, AuditKind.CONFIRM,
         AuditKind.PAYLOAD_PAGE, AuditKind.PAYLOAD]
    ),
    _VALUES,
    _VALUES,
)  # fmt: skip
def test_a_plain_kind_s_text_is_the_walk_s_text(kind: AuditKind, before: Any, after: Any) -> None:
    entry = AuditEntry("r", datetime(2026, 1, 1, tzinfo=UTC), "a", "x", kind, "t", before, after)
    assert texts_of(entry) == (
        canonical_plain(jsonable(before)),
        canonical_plain(jsonable(after)),
    )


@given(st.one_of(_VALUES.map(jsonable), st.text()))
def test_the_canonical_text_is_json_dumps_s(plain: Any) -> None:
    """``canonical_plain`` and an entry's field texts come from encoders made once: the text
    (hashed into the chain) is the one ``json.dumps`` gives with the same arguments."""
    assert canonical_plain(plain) == json.dumps(
        plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    if isinstance(plain, str):
        assert _field_text(plain) == json.dumps(plain, ensure_ascii=False)
