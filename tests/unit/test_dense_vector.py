"""Which vector of a point ``scan_vectors`` reads (``chunking_rules.dense_vector``): the one
dense vector a point has, never a guess among several."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.stores.chunking_rules import dense_vector


class Sparse:
    """A sparse vector as the clients hand one back (indices and values)."""

    indices = (3,)
    values = (1.0,)


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ([0.5, 2.0], [0.5, 2.0]),  # the unnamed vector
        ({"text-dense": [0.5, 2.0], "text-sparse": Sparse()}, [0.5, 2.0]),  # hybrid
        ({"": [1, 0]}, [1, 0]),
        ({"a": [1.0, 0.0], "b": [0.0, 1.0]}, None),  # two dense: which is meant is not known
        ([[1.0, 0.0], [0.0, 1.0]], None),  # a multivector
        ({"text-sparse": Sparse()}, None),
        ([], None),
        (None, None),
        ({}, None),
        ("1.0", None),
    ],
)
def test_the_one_dense_vector_of_a_point(stored: Any, read: Any) -> None:
    assert dense_vector(stored) == read
