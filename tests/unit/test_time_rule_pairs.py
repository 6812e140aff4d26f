"""``settle``'s shortcut for a linked pair of versions (``_linked_pair``: the family a
``declare`` of a supersession makes) gives what the rule in full gives (``_settle_full``), for
any two versions, links and instant (round 11 of issue 36 in docs/benchmarks.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import OPEN_END, Document, VersionState
from reconciler.rules.time_rule import _left_as_is, _linked_pair, _settle_full, settle

NOW = datetime(2026, 6, 1, tzinfo=UTC)
_INSTANTS = [NOW + timedelta(days=d) for d in (-400, -30, -1, 0, 1, 30)]
_STARTS = st.one_of(st.none(), st.sampled_from(_INSTANTS))
_ENDS = st.sampled_from([OPEN_END, *_INSTANTS])
_NAMES = st.sampled_from([None, "s:a", "s:b", "s:out"])


@st.composite
def _pair(draw: Any) -> tuple[list[Document], dict[str, tuple[str, ...]] | None, str]:
    docs = []
    for doc_id in ("s:a", "s:b"):
        docs.append(
            Document(
                doc_id=doc_id,
                source="s",
                source_key=doc_id[2:],
                doc_family_id="s:a",
                doc_version=draw(st.integers(1, 2)),
                # (current most often: the pairs the shortcut takes)
                version_state=draw(
                    st.sampled_from([VersionState.CURRENT] * 6 + list(VersionState))
                ),
                effective_from=draw(_STARTS),
                effective_to=draw(_ENDS),
                superseded_by=draw(_NAMES),
            )
        )
    if draw(st.booleans()):
        docs.reverse()
    links = None
    if draw(st.booleans()):
        links = {
            doc_id: tuple(draw(st.lists(st.sampled_from(["s:a", "s:b", "s:out"]), max_size=2)))
            for doc_id in draw(st.lists(st.sampled_from(["s:a", "s:b"]), unique=True))
        }
    return docs, links, draw(st.sampled_from(["supersede", "report"]))


@st.composite
def _near_pair(draw: Any) -> tuple[list[Document], dict[str, tuple[str, ...]] | None, str]:
    """Pairs near the shortcut's: ``s:a`` names ``s:b`` (by ``superseded_by`` or ``links``)
    most of the time, both current most of the time, dates on either side of each other."""
    docs, links, unknown = draw(_pair())
    near = []
    for doc in docs:
        state = draw(st.sampled_from([VersionState.CURRENT] * 4 + list(VersionState)))
        named, start, end = doc.superseded_by, doc.effective_from, doc.effective_to
        if doc.doc_id == "s:a":
            named = draw(st.sampled_from(["s:b", "s:b", "s:b", None, "s:out"]))
            start = draw(st.sampled_from([_INSTANTS[0], _INSTANTS[0], None, _INSTANTS[1]]))
            end = draw(st.sampled_from([OPEN_END, OPEN_END, _INSTANTS[1], *_INSTANTS]))
        else:
            named = None if draw(st.integers(0, 3)) else named
            start = draw(st.sampled_from(_INSTANTS[1:]))
            end = draw(st.sampled_from([OPEN_END, OPEN_END, *_INSTANTS]))
        near.append(Document(**{
            **{f: getattr(doc, f) for f in Document.__dataclass_fields__},
            "version_state": state, "superseded_by": named,
            "effective_from": start, "effective_to": end,
        }))  # fmt: skip
    if links is not None and draw(st.booleans()):
        links = {"s:a": ("s:b",)}
    return near, links, unknown


def _full(docs: list[Document], links: Any, unknown: str) -> dict[str, Document]:
    """``settle`` as it was before the shortcut."""
    if _left_as_is(docs, NOW, links):
        return {doc.doc_id: doc for doc in docs}
    return _settle_full(docs, NOW, unknown, links)


@settings(max_examples=3000, deadline=None)
@given(case=st.one_of(_pair(), _near_pair()))
def test_a_pair_settles_as_the_rule_in_full(case: Any) -> None:
    docs, links, unknown = case
    fast, full = (
        settle(docs, NOW, unknown_siblings=unknown, links=links),
        _full(docs, links, unknown),
    )
    assert list(fast.items()) == list(full.items())
    for doc in docs:  # (a version left as it is is the very object passed in, both ways)
        assert (fast[doc.doc_id] is doc) == (full[doc.doc_id] is doc)


def _declared(old_to: datetime, named: bool) -> tuple[Document, Document]:
    old = Document(
        doc_id="b:old", source="b", source_key="old", doc_family_id="b:old", doc_version=1,
        version_state=VersionState.CURRENT, effective_from=NOW - timedelta(days=400),
        effective_to=old_to, superseded_by="b:new" if named else None,
    )  # fmt: skip
    new = Document(
        doc_id="b:new", source="b", source_key="new", doc_family_id="b:old", doc_version=1,
        version_state=VersionState.CURRENT, effective_from=NOW - timedelta(days=30),
    )  # fmt: skip
    return old, new


def test_the_declare_pairs_take_the_shortcut() -> None:
    # (the rows as they are, and as the declaration leaves them: both are the shortcut's)
    for old, new in (_declared(OPEN_END, False), _declared(NOW - timedelta(days=30), True)):
        links = {"b:old": ("b:new",)}
        got = _linked_pair(new, old, NOW, links)
        assert got is not None
        assert got == _settle_full([new, old], NOW, "supersede", links)
        assert got["b:old"].version_state is VersionState.SUPERSEDED
        assert got["b:new"] is new
