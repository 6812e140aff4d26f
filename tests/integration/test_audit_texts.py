"""The audit body's texts (``stores/sql/audit_body.texts_of``): an entry of a plain kind (a
page of intents, a move's entries, a confirmation) encoded in C as it is, by ``orjson`` where
its values allow, and any other (a row's, made plain first, then ``orjson`` where its values
allow: issue 36 round 11), gives the text the ``jsonable`` walk gives, whatever it holds (a
value JSON cannot encode, or a key that is not text, falls back to the walk; one ``orjson``
spells otherwise or refuses, to ``json``)."""

from __future__ import annotations

import enum
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reconciler.model import AuditEntry, AuditKind, jsonable, page_entry
from reconciler.stores.sql import audit_body
from reconciler.stores.sql.audit_body import _field_text, canonical_plain, texts_of


class _Colour(enum.StrEnum):
    RED = "red"


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**65),  # (orjson stops at 64 bits)
    st.floats(allow_nan=False),
    st.sampled_from([1e16, 1e-05, 0.0001, -0.0, 1e300]),  # (exponents spelt otherwise)
    st.text(max_size=5),
    # Any code point: controls, quotes, backslashes, U+2028, astral ones, lone surrogates.
    st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None), max_size=5),
    st.sampled_from([_Colour.RED, datetime(2026, 1, 2, tzinfo=UTC)]),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        # Keys that are not text: ``jsonable`` spells them with ``str`` (``None`` as "None").
        st.dictionaries(st.one_of(st.none(), st.booleans(), st.integers(-3, 3)), inner, max_size=2),
    ),
    max_leaves=8,
)


@given(
    st.sampled_from(
        [AuditKind.MOVE, AuditKind.MOVE_COPIED, AuditKind.MOVE_DONE, AuditKind.CONFIRM,
         AuditKind.PAYLOAD_PAGE, AuditKind.PAYLOAD, AuditKind.ROW, AuditKind.REINGEST,
         AuditKind.RUN]
    ),
    _VALUES,
    _VALUES,
)  # fmt: skip
@example(AuditKind.PAYLOAD_PAGE, {"a": {"\x1f\u2028": ["\ud800"]}}, {"b": 2**64})
@example(AuditKind.MOVE, {None: 1}, {True: 0.5})
@example(AuditKind.CONFIRM, {"z": 1, "\U0001f600": True, "\uffff": None, "é": "\x7f"}, [])
@example(
    AuditKind.ROW,
    {"version_state": "current", "effective_to": datetime(9999, 12, 31, tzinfo=UTC), "n": 1},
    {"version_state": _Colour.RED, "superseded_by": "b:n\u00e9", "quarantined": False},
)
@example(AuditKind.ROW, None, {"score": 0.86, "at": datetime(2026, 1, 2, tzinfo=UTC)})
def test_a_plain_kind_s_text_is_the_walk_s_text(kind: AuditKind, before: Any, after: Any) -> None:
    entry = AuditEntry("r", datetime(2026, 1, 1, tzinfo=UTC), "a", "x", kind, "t", before, after)
    assert texts_of(entry) == (
        canonical_plain(jsonable(before)),
        canonical_plain(jsonable(after)),
    )


def _page(documents: int) -> AuditEntry:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    payload = {"doc_id": "d", "doc_version": 3, "is_latest": False, "superseded_by": None}
    return page_entry(
        [
            AuditEntry(
                "r", at, "a", "payload/version_state", AuditKind.PAYLOAD, f"doc {n} «ü»",
                {"points": [f"{n:08x}-0000-4000-8000-000000000000", n], "payload": payload},
                {"payload": {**payload, "version_state": "superseded"}},
            )
            for n in range(documents)
        ]
    )  # fmt: skip


def test_a_page_of_plain_values_is_encoded_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """The usual page (strings, integers, booleans, nulls) takes the fast encoder, and gives
    the text ``json`` gives; one float anywhere sends it to ``json``."""
    page = _page(40)
    expected = (canonical_plain(page.before), canonical_plain(page.after))
    encoded: list[Any] = []
    fast = audit_body.orjson.dumps

    def counted(value: Any, **options: Any) -> bytes:
        encoded.append(value)
        return fast(value, **options)

    monkeypatch.setattr(audit_body.orjson, "dumps", counted)
    assert texts_of(page) == expected
    assert encoded == [page.before, page.after]
    page.after["payloads"][7]["score"] = 1e16  # (json writes 1e+16, orjson 1e16)
    encoded.clear()
    assert texts_of(page) == (canonical_plain(page.before), canonical_plain(page.after))
    assert encoded == []


@given(st.one_of(_VALUES.map(jsonable), st.text()))
def test_the_canonical_text_is_json_dumps_s(plain: Any) -> None:
    """``canonical_plain`` and an entry's field texts come from encoders made once: the text
    (hashed into the chain) is the one ``json.dumps`` gives with the same arguments."""
    assert canonical_plain(plain) == json.dumps(
        plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    if isinstance(plain, str):
        assert _field_text(plain) == json.dumps(plain, ensure_ascii=False)
