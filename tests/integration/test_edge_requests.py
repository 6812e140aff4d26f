"""The Edge adapter's write requests (``stores/edge/requests.py``): a write's ids checked
together, and consecutive writes of the same payload sent as one ``set_payload``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("qdrant_edge")

from reconciler.model import PayloadWrite
from reconciler.payload import KeyMap
from reconciler.stores.chunking_rules import point_batches
from reconciler.stores.edge.requests import edge_id, edge_ids, merged, payload_batches

_UUIDS = [str(uuid.UUID(int=n)) for n in range(1, 5)]
_IDS = st.one_of(
    st.sampled_from(_UUIDS),
    st.sampled_from([u.upper() for u in _UUIDS]),  # (a UUID, not in canonical spelling)
    st.integers(min_value=0, max_value=3),
)


def _answer(convert: Any, ids: list[Any]) -> Any:
    try:
        return convert(ids)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


#: Ids that are not one canonical UUID but whose lines could pass for some (``edge_ids``
#: checks a write's ids joined by newlines), and one with a character past ASCII.
_ODD = [f"{_UUIDS[0]}\n{_UUIDS[1]}", f"{_UUIDS[0]}\n", _UUIDS[0][:-1], f"{_UUIDS[0][:-1]}é"]


@given(st.lists(st.one_of(_IDS, st.sampled_from(["x", "", -1, True, 1.5, *_ODD])), max_size=6))
def test_a_write_s_ids_are_converted_as_one_at_a_time(ids: list[Any]) -> None:
    """``edge_ids`` answers what ``edge_id`` of each id answers (the same ids, or the same
    error for the first bad one)."""
    assert _answer(edge_ids, ids) == _answer(lambda all_: [edge_id(p) for p in all_], ids)


_VALUES = st.sampled_from([1, True, 1.0, 0, False, "a", None, [1], [True]])
_WRITES = st.lists(
    st.tuples(
        st.lists(st.sampled_from(_UUIDS), min_size=1, max_size=3),
        st.dictionaries(st.sampled_from(["k", "j"]), _VALUES, min_size=1, max_size=2),
    ),
    max_size=8,
)


def _applied(writes: list[tuple[list[str], dict[str, Any]]]) -> dict[str, list[tuple[Any, ...]]]:
    """Each point's keys after the writes one after the other, values with their types."""
    points: dict[str, dict[str, Any]] = {}
    for ids, payload in writes:
        for pid in ids:
            points.setdefault(pid, {}).update(payload)
    return {
        pid: sorted((k, type(v).__name__, repr(v)) for k, v in held.items())
        for pid, held in points.items()
    }


@given(_WRITES)
def test_merged_writes_leave_the_points_as_the_writes_one_after_the_other(
    writes: list[tuple[list[str], dict[str, Any]]],
) -> None:
    """Joining neighbours of the same payload changes no point's values (``1`` is not
    ``True`` nor ``1.0``), and never adds a write."""
    expected = _applied(writes)
    joined = merged([(list(ids), dict(payload)) for ids, payload in writes])
    assert _applied(joined) == expected
    assert len(joined) <= len(writes)


def test_a_batch_of_documents_repaired_alike_is_one_set_payload() -> None:
    batch = [([_UUIDS[0]], {"version_state": "superseded"}),
             ([_UUIDS[1], _UUIDS[2]], {"version_state": "superseded"}),
             ([_UUIDS[3]], {"version_state": "current"})]  # fmt: skip
    assert merged(batch) == [
        ([_UUIDS[0], _UUIDS[1], _UUIDS[2]], {"version_state": "superseded"}),
        ([_UUIDS[3]], {"version_state": "current"}),
    ]


@given(
    _WRITES,
    st.integers(min_value=1, max_value=7),
    st.sampled_from([KeyMap(), KeyMap(prefix="metadata.")]),
)
def test_writes_joined_before_conversion_make_the_same_calls(
    writes: list[tuple[list[str], dict[str, Any]]], batch_size: int, keys: KeyMap
) -> None:
    """``payload_batches`` joins neighbours of the same payload before converting them: the
    calls, and each call's operations, are those of converting each write, then merging."""
    requested = [PayloadWrite(point_ids=tuple(ids), payload=p) for ids, p in writes]
    one_by_one = [merged(b) for b in point_batches(requested, batch_size, keys, edge_ids)]
    assert list(payload_batches(requested, batch_size, keys)) == one_by_one
