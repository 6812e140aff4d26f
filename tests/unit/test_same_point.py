"""A move's confirm step (``moving.same_point``): the copy must read back as the point read.
Qdrant Edge rounds some 17-digit doubles of a payload to a neighbour on every write (up to 2
units in the last place), so a float within ``FLOAT_ULPS`` is the same; anything else is not:
another number, a key or an item lost or added, a vector moved (``==`` decides the rest, as
before: ``3 == 3.0``)."""

from __future__ import annotations

import math
import struct
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reconciler.ports.index import StoredPoint
from reconciler.writing.moving import FLOAT_ULPS, same_point

FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)


def _point(payload: dict[str, Any], vector: Any = (0.25, 0.5)) -> StoredPoint:
    return StoredPoint(1, list(vector), payload)


def _neighbour(value: float, ulps: int) -> float:
    """The double ``ulps`` steps away from ``value`` (towards zero when that is negative)."""
    bits = struct.unpack("<q", struct.pack("<d", value))[0] + ulps
    if not -(2**63) <= bits < 2**63:  # (past -0.0's bits: no neighbour of that sign)
        return math.inf
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


@given(value=FLOATS.filter(lambda v: abs(v) < 1e300), steps=st.integers(-FLOAT_ULPS, FLOAT_ULPS))
def test_a_float_a_few_units_away_is_the_same(value: float, steps: int) -> None:
    near = _neighbour(value, steps)
    if math.copysign(1, near) != math.copysign(1, value) or math.isinf(near):
        return  # (stepped across zero or out of range: not a neighbour)
    read = _point({"doc_id": "kb:a", "score": value, "nested": [{"x": value}]})
    back = _point({"doc_id": "kb:a", "score": near, "nested": [{"x": near}]})
    assert same_point(read, back)


@given(value=FLOATS.filter(lambda v: 1e-300 < abs(v) < 1e300))
def test_a_float_further_away_is_not(value: float) -> None:
    far = _neighbour(value, 2 * FLOAT_ULPS + 1)
    assert not same_point(_point({"score": value}), _point({"score": far}))
    assert not same_point(_point({"n": [[value]]}), _point({"n": [[far]]}))


def test_anything_else_changed_is_not_the_same() -> None:
    read = _point({"doc_id": "kb:a", "n": 3, "f": 1.5, "l": [1, "a"], "o": {"k": None}})
    assert same_point(read, _point(dict(read.payload)))
    for changed in (
        {"n": 4.0},
        {"f": 2},
        {"l": [1]},
        {"l": [1, "a", None]},
        {"o": {}},
        {"o": {"k": None, "j": 1}},
        {"doc_id": "kb:b"},
    ):
        assert not same_point(read, _point({**read.payload, **changed})), changed
    assert not same_point(read, _point({k: v for k, v in read.payload.items() if k != "o"}))
    assert not same_point(read, _point(dict(read.payload), vector=(0.25, 0.75)))
    assert not same_point(read, None)


def test_units_are_counted_in_bits_across_a_power_of_two() -> None:
    # (a review found 1.0 against 1.0 - 8 units of the binade below it read as the same: the
    # margin taken from the larger neighbour's unit spans 8 of the smaller's)
    below = _neighbour(1.0, -1)
    assert same_point(_point({"f": 1.0}), _point({"f": _neighbour(1.0, -FLOAT_ULPS)}))
    assert same_point(_point({"f": below}), _point({"f": _neighbour(below, FLOAT_ULPS)}))
    assert not same_point(_point({"f": 1.0}), _point({"f": 1.0 - 8 * 2**-53}))
    assert not same_point(_point({"f": [5e-324]}), _point({"f": [-5e-324]}))
    assert same_point(_point({"f": [0.0]}), _point({"f": [5e-324]}))
    assert same_point(_point({"f": [-0.0]}), _point({"f": [-5e-324]}))


def test_infinity_is_never_the_largest_double_nor_nan_itself() -> None:
    # (their bits are one apart: a review's)
    largest = 1.7976931348623157e308
    assert not same_point(_point({"f": largest}), _point({"f": math.inf}))
    assert not same_point(_point({"f": [-largest]}), _point({"f": [-math.inf]}))
    assert not same_point(_point({"f": [float("nan")]}), _point({"f": [float("nan")]}))
    assert same_point(_point({"f": [-0.0]}), _point({"f": [0.0]}))
