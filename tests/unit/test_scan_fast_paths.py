"""Issue 38, round 8: the check's scan takes a page's values and keys the rows and chunks in C
or with one ``get`` a value; each fast path gives exactly what the plain definition gives,
for any values (absent keys, a payload that is ``None``, versions and flags of other types,
unhashable values, doc ids with lone surrogates), so no finding can change."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import MANAGED_KEYS
from reconciler.pipeline import chunk_tally
from reconciler.pipeline.chunk_tally import check_key, content_key
from reconciler.stores import chunking_rules
from reconciler.stores.chunking_rules import managed_page

#: Doc ids of any text, lone surrogates included (``str.encode`` refuses those).
DOC_IDS = st.text(st.characters(blacklist_categories=()), max_size=8)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=4)
)
#: Any stored value: scalars, and now and then a list (unhashable).
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=2))
NAMES = ("doc_id", *MANAGED_KEYS)


def scan_rows(doc_ids: st.SearchStrategy[Any] = DOC_IDS) -> st.SearchStrategy[list[tuple]]:
    """Scan rows ``(doc_id, *managed values)``, mostly well typed, any value now and then."""
    typed = st.tuples(
        doc_ids,
        st.text(max_size=3),
        st.one_of(st.integers(0, 3), st.booleans(), st.floats(0, 3), st.text(max_size=1)),
        *[st.one_of(st.none(), st.text(max_size=3))] * 5,
        st.one_of(st.booleans(), st.integers(0, 1), st.none()),
        st.one_of(st.none(), VALUES),
    )
    return st.lists(typed, max_size=12)


@settings(max_examples=300, deadline=None)
@given(scan_rows())
def test_fingerprints_of_a_page_are_each_rows(rows: list[tuple]) -> None:
    """``_fingerprints`` (types counted, the page hashed in C) equals ``_fingerprint`` a row."""
    page = chunk_tally._fingerprints(rows).tolist()
    assert page == [chunk_tally._fingerprint(row) for row in rows]


@settings(max_examples=300, deadline=None)
@given(st.lists(DOC_IDS, max_size=12))
def test_check_keys_of_rows_are_each_ids(doc_ids: list[str]) -> None:
    """``_check_keys`` (CRC-32 in C) equals ``check_key`` an id, lone surrogates included."""
    rows = [(doc_id, 1) for doc_id in doc_ids]
    assert chunk_tally._check_keys(rows) == [check_key(doc_id) for doc_id in doc_ids]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=6), VALUES), max_size=12))
def test_content_keys_are_each_hashes_key(contents: list[Any]) -> None:
    """``_content_keys`` (as ``expect_rows`` now registers them) equals ``content_key`` each."""
    keys = chunk_tally._content_keys(contents).tolist()
    assert keys == [content_key(content) for content in contents]


class Point:
    """A scroll record as Qdrant Edge and qdrant-client give one: an id and a payload."""

    def __init__(self, point_id: int, payload: dict[str, Any] | None) -> None:
        self.id, self.payload = point_id, payload


PAYLOADS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from((*NAMES, "content_hash", "text")), VALUES, max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PAYLOADS, max_size=10), st.booleans())
def test_managed_page_takes_each_value_as_get_does(
    payloads: list[dict[str, Any] | None], renamed: bool
) -> None:
    """The usual page (a doc id and the managed keys: one ``get`` a value) holds each point's
    values as ``tuple(map(node.get, names))`` reads them, an absent key and a point without a
    payload as ``None``, and its content hash beside; so does a page of other names."""
    points = [Point(n, payload) for n, payload in enumerate(payloads)]
    names = NAMES[::-1] if renamed else NAMES  # (other stored names: any order of keys)
    page = managed_page(points, (), names, int, "content_hash")
    nodes = [payload or {} for payload in payloads]
    assert page.rows == [tuple(map(node.get, names)) for node in nodes]
    assert page.contents == [node.get("content_hash") for node in nodes]
    assert [page.point_id(n) for n in range(len(points))] == list(range(len(points)))
    short = managed_page(points, (), names[:4], int, "content_hash")  # (the general path)
    assert short.rows == [tuple(map(node.get, names[:4])) for node in nodes]
    assert len(names) == chunking_rules._SCAN_WIDTH
