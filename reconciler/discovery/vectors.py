"""Chunk vectors as evidence: the vectors already in the index, read once and never re-embedded,
reduced to one small vector per document, and the pairs of documents they put close together.

**Reduction** (``ChunkVectors``): each chunk's vector, as the index streams it, is added to
its document's sum (float32, ``4 * dim`` bytes a document while reading). At the end each sum
becomes a unit vector, the corpus's mean direction is taken out of it (**centred**), and it is
kept quantised to int8 (``DocVector``: ``dim`` bytes, and ``2 * BANDS`` of signature). Centring
is what makes one floor serve every embedder: raw cosines depend on the model (two unrelated
PEPs are 0.41 alike by all-MiniLM-L6-v2, 0.65 by the hashing embedder, since every document
shares the corpus's common words and topic), while centred ones are near 0 for unrelated
documents whatever the model, and high only for documents closer to each other than to the
rest of the corpus.

**Likeness** (``vectors_alike``): the cosine of two documents' centred vectors, counted only
between documents whose signatures share a band. A signature is ``BANDS`` keys of ``BITS``
bits, the signs of the centred vector against ``BANDS * BITS`` random hyperplanes (a seed of
its own, so it is the same every run): two documents at an angle ``t`` agree on a bit with
probability ``1 - t / pi``, so on a band with ``(1 - t / pi) ** BITS``. Documents 0.9 alike
share a band all but once in 70,000 times, 0.8 alike 96 % of the time, 0.7 alike 70 %, 0.6
alike (the floor of the evidence, ``scoring.VECTORS_FLOOR``) 38 %; two unrelated ones (0
alike) once in 512.

**Candidates** (``vector_neighbours``): the pairs sharing a band, found by sorting each band's
keys (no pair compared that shares none: sub-quadratic), kept when their likeness reaches the
floor. Since the likeness itself counts only for pairs sharing a band, the candidates are
exactly the pairs whose vectors give evidence: blocking misses none (the unit property holds
it to that).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Bands of a signature and bits a band (random hyperplanes: BANDS * BITS).
BANDS, BITS = 128, 16
#: The random hyperplanes' seed (any fixed one: a run must find what the last one found).
SEED = 25
#: Documents whose vectors are reduced at a time (bounds the reduction's scratch memory).
BLOCK = 4096
#: Candidate pairs whose likeness is computed at a time (two float64 copies of their vectors:
#: 25 MB at 384 dimensions).
PAIRS_AT_ONCE = 1 << 12
#: Fewer documents with vectors than this have no mean worth taking out: no likeness at all
#: (two centred vectors are each other's opposite; three, nearly so).
MIN_DOCUMENTS = 4


@dataclass(frozen=True, slots=True)
class DocVector:
    """One document's chunk vectors reduced: their mean direction, centred on the corpus's,
    quantised to int8 (``dim`` bytes), its Euclidean length, and its signature's band keys
    (``BANDS`` uint16)."""

    values: bytes
    norm: float
    bands: bytes


class ChunkVectors:
    """Chunk vectors streamed in (``add``), one ``DocVector`` per document out (``reduce``).

    Only the documents named at the start are kept; a chunk of any other document, or one
    whose vector is not of the collection's size, is counted and dropped."""

    def __init__(self, doc_ids: Iterable[str]) -> None:
        self._rows = {doc_id: n for n, doc_id in enumerate(doc_ids)}
        self._sums: np.ndarray | None = None
        self._dim: int | None = None
        self._counts = np.zeros(len(self._rows), dtype=np.int64)
        #: Chunks added to a document, chunks of other documents, chunks of another size.
        self.chunks = 0
        self.outside = 0
        self.mismatched = 0

    @property
    def dim(self) -> int | None:
        """The vectors' size (None before the first)."""
        return self._dim

    def add(self, doc_ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Add one page of chunks: each vector to its document's sum, as a unit vector."""
        if self._sums is None:
            if not vectors:
                return
            self._dim = len(vectors[0])
            self._sums = np.zeros((len(self._rows), self._dim), dtype=np.float32)
        dim = self._dim
        rows: list[int] = []
        kept: list[Sequence[float]] = []
        for doc_id, vector in zip(doc_ids, vectors, strict=True):
            row = self._rows.get(doc_id)
            if row is None:
                self.outside += 1
            elif len(vector) != dim:
                self.mismatched += 1
            else:
                rows.append(row)
                kept.append(vector)
        if not kept:
            return
        matrix = np.asarray(kept, dtype=np.float32)
        lengths = np.linalg.norm(matrix, axis=1)
        good = lengths > 0
        at = np.asarray(rows, dtype=np.int64)[good]
        np.add.at(self._sums, at, matrix[good] / lengths[good, None])
        np.add.at(self._counts, at, 1)
        self.chunks += len(at)

    def reduce(self) -> dict[str, DocVector]:
        """Each document that had chunks, as a ``DocVector`` (none below ``MIN_DOCUMENTS``)."""
        if self._sums is None:
            return {}
        sums, self._sums = self._sums, None
        has = np.flatnonzero(self._counts > 0)
        if len(has) < MIN_DOCUMENTS:
            return {}
        mean = np.zeros(sums.shape[1], dtype=np.float64)
        for block in _blocks(has):
            mean += _unit(sums[block]).sum(axis=0, dtype=np.float64)
        mean /= len(has)
        planes = hyperplanes(sums.shape[1])
        names = list(self._rows)
        reduced: dict[str, DocVector] = {}
        for block in _blocks(has):
            centred = _unit(sums[block]) - mean.astype(np.float32)
            for row, vector in zip(block.tolist(), reduce_rows(centred, planes), strict=True):
                if vector is not None:
                    reduced[names[row]] = vector
        return reduced


def _blocks(rows: np.ndarray) -> Iterator[np.ndarray]:
    for start in range(0, len(rows), BLOCK):
        yield rows[start : start + BLOCK]


def _unit(matrix: np.ndarray) -> np.ndarray:
    lengths = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(lengths > 0, lengths, 1)


def hyperplanes(dim: int) -> np.ndarray:
    """The signature's ``BANDS * BITS`` random hyperplanes for vectors of ``dim`` (float32,
    ``dim`` x ``BANDS * BITS``; the same for a dimension every run)."""
    return np.random.default_rng(SEED).standard_normal((dim, BANDS * BITS), dtype=np.float32)


def reduce_rows(centred: np.ndarray, planes: np.ndarray) -> list[DocVector | None]:
    """Centred vectors (float, one a row) as ``DocVector`` (None for a zero vector: a document
    that is the corpus's mean, which nothing can be alike)."""
    signs = (centred @ planes) > 0
    weights = (1 << np.arange(BITS, dtype=np.uint32)).astype(np.uint32)
    keys = (signs.reshape(len(centred), BANDS, BITS) * weights).sum(axis=2).astype(np.uint16)
    scale = np.abs(centred).max(axis=1)
    out: list[DocVector | None] = []
    for vector, top, key in zip(centred, scale, keys, strict=True):
        if not top > 1e-6:
            out.append(None)
            continue
        quantised = np.rint(vector / top * 127).astype(np.int8)
        norm = math.sqrt(float(np.dot(quantised.astype(np.float64), quantised)))
        out.append(DocVector(quantised.tobytes(), norm, key.tobytes()) if norm > 0 else None)
    return out


def share_band(a: DocVector, b: DocVector) -> bool:
    """Whether two signatures agree on a whole band."""
    return bool(np.any(np.frombuffer(a.bands, np.uint16) == np.frombuffer(b.bands, np.uint16)))


def vectors_alike(a: DocVector | None, b: DocVector | None) -> float | None:
    """The cosine of two documents' centred chunk vectors, -1 to 1; None when either has none,
    or their signatures share no band (the likeness counts only where blocking can find it)."""
    if a is None or b is None or len(a.values) != len(b.values) or not share_band(a, b):
        return None
    dot = float(np.dot(np.frombuffer(a.values, np.int8).astype(np.float64),
                       np.frombuffer(b.values, np.int8).astype(np.float64)))  # fmt: skip
    return float(_cosine(dot, a.norm, b.norm))


def _cosine(dot: Any, norm_a: Any, norm_b: Any) -> Any:
    """(floats or numpy arrays alike: one product, one division)"""
    return dot / (norm_a * norm_b)


def vector_neighbours(vectors: Sequence[DocVector | None], *, floor: float) -> dict[int, list[int]]:
    """For each document, the others whose chunk vectors are at least ``floor`` alike
    (``vectors_alike``): the pairs sharing a band of their signatures, band by band (each
    band's keys sorted, equal runs read off), kept when alike enough."""
    near: dict[int, list[int]] = defaultdict(list)
    ids = [n for n, v in enumerate(vectors) if v is not None]
    if len(ids) < 2:
        return near
    dims = {len(vectors[n].values) for n in ids}  # type: ignore[union-attr]
    if len(dims) != 1:
        return near  # (vectors of one collection are of one size)
    index = np.asarray(ids)
    values = np.frombuffer(b"".join(vectors[n].values for n in ids), np.int8)  # type: ignore[union-attr]
    values = values.reshape(len(ids), -1)
    norms = np.fromiter((vectors[n].norm for n in ids), np.float64, len(ids))  # type: ignore[union-attr]
    keys = np.frombuffer(b"".join(vectors[n].bands for n in ids), np.uint16)  # type: ignore[union-attr]
    keys = keys.reshape(len(ids), BANDS)
    found: set[tuple[int, int]] = set()
    for band in range(BANDS):
        for left, right in _colliding(keys[:, band]):
            for i, j in _alike_enough(values, norms, left, right, floor):
                found.add((int(index[i]), int(index[j])))
    for i, j in found:
        near[i].append(j)
        near[j].append(i)
    return near


def _colliding(keys: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every pair of rows with equal keys, ``PAIRS_AT_ONCE`` at a time: the keys sorted, and
    each position paired with the ones ``k`` after it while they stay in its run."""
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    alive = np.arange(len(order) - 1)
    k = 1
    while len(alive):
        alive = alive[alive + k < len(order)]
        alive = alive[ranked[alive + k] == ranked[alive]]
        for start in range(0, len(alive), PAIRS_AT_ONCE):
            part = alive[start : start + PAIRS_AT_ONCE]
            yield order[part], order[part + k]
        k += 1


def _alike_enough(
    values: np.ndarray, norms: np.ndarray, left: np.ndarray, right: np.ndarray, floor: float
) -> Iterator[tuple[int, int]]:
    """The pairs of rows at least ``floor`` alike, by the arithmetic of ``vectors_alike``
    (an exact integer dot product, then one division: the same float either way)."""
    dots = np.einsum("ij,ij->i", values[left].astype(np.float64), values[right].astype(np.float64))
    alike = _cosine(dots, norms[left], norms[right]) >= floor
    for i, j in zip(left[alike].tolist(), right[alike].tolist(), strict=True):
        yield (i, j) if i < j else (j, i)
