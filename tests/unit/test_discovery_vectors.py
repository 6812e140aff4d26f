"""Chunk vectors as evidence (``reconciler.discovery.vectors``): chunks streamed in and reduced
to one centred vector a document, their likeness counted only where blocking can find it, the
candidates found band by band exactly, and the likeness read in words in a proposal."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.discovery import discover, profile, score_pair
from reconciler.discovery.scoring import VECTORS, VECTORS_FLOOR
from reconciler.discovery.vectors import (
    BANDS,
    MIN_DOCUMENTS,
    ChunkVectors,
    DocVector,
    hyperplanes,
    reduce_rows,
    share_band,
    vector_neighbours,
    vectors_alike,
)

DIM = 48


def named(name: str, title: str):  # type: ignore[no-untyped-def]
    return profile(
        doc_id=f"s:{name}", source="s", family=name, doc_class=None, title=title, path=None,
        effective_from=None, body=None,
    )  # fmt: skip


def reduced(chunks: dict[str, list[list[float]]], page: int = 3) -> ChunkVectors:
    """The chunks added a few at a time, interleaved across documents as a scroll hands them."""
    vectors = ChunkVectors(chunks)
    flat = [(doc, v) for n in range(max(map(len, chunks.values()))) for doc, vs in chunks.items()
            if n < len(vs) for v in [vs[n]]]  # fmt: skip
    for start in range(0, len(flat), page):
        part = flat[start : start + page]
        vectors.add([d for d, _ in part], [v for _, v in part])
    return vectors


def corpus(rng: np.random.Generator, documents: int = 12) -> dict[str, list[list[float]]]:
    return {f"s:d{n}": rng.standard_normal((3, DIM)).tolist() for n in range(documents)}


def test_a_documents_chunks_reduce_to_their_mean_direction_centred_on_the_corpus() -> None:
    rng = np.random.default_rng(1)
    chunks = corpus(rng)
    # a copy of d0 whose chunks are rescaled and come in another order: the same direction
    chunks["s:copy"] = [list(np.asarray(v) * 3.0) for v in reversed(chunks["s:d0"])]
    got = reduced(chunks).reduce()

    units = {d: np.sum([np.asarray(v) / np.linalg.norm(v) for v in vs], axis=0)
             for d, vs in chunks.items()}  # fmt: skip
    means = {d: v / np.linalg.norm(v) for d, v in units.items()}
    centre = np.mean(list(means.values()), axis=0)
    expected = {d: (m - centre) / np.linalg.norm(m - centre) for d, m in means.items()}
    assert vectors_alike(got["s:d0"], got["s:copy"]) == pytest.approx(1.0, abs=1e-9)
    for a, b in [("s:d0", "s:d1"), ("s:d2", "s:d5"), ("s:d3", "s:copy")]:
        alike = vectors_alike(got[a], got[b])
        if alike is not None:  # (counted only where their signatures share a band)
            assert alike == pytest.approx(float(expected[a] @ expected[b]), abs=0.02)
        assert share_band(got[a], got[b]) == (alike is not None)
    assert len(got["s:d0"].values) == DIM
    assert len(got["s:d0"].bands) == 2 * BANDS


def test_chunks_of_other_documents_or_sizes_are_counted_and_dropped() -> None:
    rng = np.random.default_rng(2)
    vectors = ChunkVectors([f"s:d{n}" for n in range(MIN_DOCUMENTS)])
    vectors.add(
        ["s:d0", "s:other", "s:d1", "s:d2", "s:d3", "s:d3"],
        [*rng.standard_normal((5, DIM)).tolist(), [1.0, 2.0]],
    )
    vectors.add(["s:d0"], [[0.0] * DIM])  # a zero vector has no direction

    assert (vectors.chunks, vectors.outside, vectors.mismatched, vectors.dim) == (4, 1, 1, DIM)
    assert sorted(vectors.reduce()) == [f"s:d{n}" for n in range(MIN_DOCUMENTS)]


def test_too_few_documents_or_one_direction_for_all_give_no_likeness() -> None:
    rng = np.random.default_rng(3)
    few = reduced({f"s:d{n}": rng.standard_normal((2, DIM)).tolist()
                   for n in range(MIN_DOCUMENTS - 1)})  # fmt: skip
    assert few.reduce() == {}
    # a collection whose every chunk has the same vector (a placeholder): nothing to compare
    same = reduced({f"s:d{n}": [[1.0] + [0.0] * (DIM - 1)] * 2 for n in range(6)})
    assert same.reduce() == {}
    assert ChunkVectors(["s:d0"]).reduce() == {}


def doc_vector(values: list[int], bands: list[int]) -> DocVector:
    array = np.asarray(values, dtype=np.int8)
    norm = math.sqrt(float(np.dot(array.astype(np.float64), array)))
    return DocVector(array.tobytes(), norm, np.asarray(bands, dtype=np.uint16).tobytes())


def test_likeness_counts_only_between_signatures_sharing_a_band() -> None:
    keys = list(range(BANDS))
    a = doc_vector([100, 20, -5], keys)
    b = doc_vector([90, 30, -5], [k + 1000 for k in keys])  # no band equal
    c = doc_vector([90, 30, -5], [k + 1000 if k else 0 for k in keys])  # band 0 equal

    assert vectors_alike(a, b) is None
    alike = vectors_alike(a, c)
    assert alike == pytest.approx((9000 + 600 + 25) / (a.norm * c.norm))
    # (b and c share the bands b has, and are the same vector)
    near = vector_neighbours([a, b, c], floor=0.9)
    assert {i: sorted(js) for i, js in near.items()} == {0: [2], 1: [2], 2: [0, 1]}
    assert dict(vector_neighbours([a, b, c], floor=0.9999)) == {1: [2], 2: [1]}
    assert vectors_alike(a, None) is None


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.sampled_from([0.0, 0.3, 0.6, 0.9]))
def test_candidates_are_exactly_the_pairs_alike_enough(seed: int, size: int, floor: float) -> None:
    # documents near a few directions, so that many share bands and some runs are long
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((3, 16))
    chunks = {f"s:d{n}": (centres[n % 3] + rng.choice([0.05, 0.5, 3.0])
                          * rng.standard_normal((2, 16))).tolist() for n in range(size)}  # fmt: skip
    got = reduced(chunks).reduce()
    vectors = [got.get(f"s:d{n}") for n in range(size)]

    near = vector_neighbours(vectors, floor=floor)

    for i in range(size):
        expected = [j for j in range(size) if j != i
                    and (vectors_alike(vectors[i], vectors[j]) or -2.0) >= floor]  # fmt: skip
        assert sorted(near.get(i, [])) == expected


def test_a_signature_band_is_shared_as_the_angle_says() -> None:
    # the rates the module's docstring gives: 0.9 alike nearly always, 0.7 alike 70 % of the
    # time, unrelated documents 1 in 512
    rng = np.random.default_rng(4)
    planes = hyperplanes(DIM)
    for cosine, low, high in [(0.9, 0.99, 1.0), (0.7, 0.62, 0.78), (0.0, 0.0, 0.01)]:
        shared = 0
        for _ in range(500):
            x = rng.standard_normal(DIM)
            x /= np.linalg.norm(x)
            other = rng.standard_normal(DIM)
            other -= (other @ x) * x
            other /= np.linalg.norm(other)
            a, b = reduce_rows(np.stack([x, cosine * x + math.sqrt(1 - cosine**2) * other]), planes)
            assert a is not None
            assert b is not None
            shared += share_band(a, b)
        assert low <= shared / 500 <= high, (cosine, shared)


def test_chunk_vectors_alike_read_in_words_and_weigh_as_documented() -> None:
    rng = np.random.default_rng(5)
    chunks = corpus(rng, 8)
    chunks["s:twin"] = [list(np.asarray(v) + 0.01) for v in chunks["s:d0"]]
    got = reduced(chunks).reduce()
    a = replace(named("d0", "Quarterly figures"), doc_id="s:d0", vector=got["s:d0"])
    b = replace(named("twin", "Budget outlook"), doc_id="s:twin", vector=got["s:twin"])

    scored = score_pair(a, b)

    assert scored.vectors is not None
    assert scored.vectors > 0.99
    assert f"chunk vectors {scored.vectors:.2f} alike" in scored.evidence
    expected = VECTORS * (scored.vectors - VECTORS_FLOOR) / (1 - VECTORS_FLOOR)
    assert scored.score == pytest.approx(expected, abs=1e-4)
    # alone, chunk vectors never reach the default score: proposed only below it
    assert discover([a, b]).links == ()
    assert len(discover([a, b], min_score=0.5).links) == 1
    without = score_pair(replace(a, vector=None), b)
    assert (without.vectors, without.score) == (None, 0.0)
    assert "chunk vectors" not in without.evidence
