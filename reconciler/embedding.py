"""Embedders for the reference ingestion. The reconciler itself never embeds.

``HashingEmbedder`` is the default: deterministic feature hashing of words and word pairs into a
fixed-size, L2-normalised vector. It is **lexical** (no semantics), needs no model download, and
is meant for demos and tests. ``SentenceTransformerEmbedder`` (extra ``sentence-transformers``)
is the semantic option.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension."""

    dim: int

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """One vector per text."""
        ...


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


#: How many features' buckets an embedder remembers before it starts over (a few tens of MB).
BUCKETS_KEPT = 1 << 18


class HashingEmbedder:
    """Deterministic lexical embedder (feature hashing of unigrams and bigrams).

    A feature's bucket (its hash) was most of an ingestion's time, and a corpus's words and word
    pairs repeat: each embedder remembers the buckets it has hashed (up to ``BUCKETS_KEPT``), and
    adds a text's features up by bucket in one ``bincount``. The vector is the one the plain
    definition gives (``_bucket`` of each feature, ``+= sign`` in turn): its entries are sums of
    whole numbers, exact in any order, and ``tests/unit/test_chunking_embedding.py`` holds the
    two equal.
    """

    def __init__(self, dim: int = 384) -> None:
        if dim <= 0:
            raise ValueError("dim must be positive")
        self.dim = dim
        self._buckets: dict[str, tuple[int, float]] = {}

    def _vector(self, text: str) -> tuple[float, ...]:
        words = _WORD.findall(text.lower())
        counts = Counter(words)
        counts.update(map(" ".join, itertools.pairwise(words)))
        indices, weights = [], []
        buckets = self._buckets
        for feature, count in counts.items():
            bucket = buckets.get(feature)
            if bucket is None:
                if len(buckets) >= BUCKETS_KEPT:
                    buckets.clear()
                bucket = buckets[feature] = _bucket(feature, self.dim)
            indices.append(bucket[0])
            weights.append(bucket[1] * count)
        if not indices:  # Qdrant's cosine distance rejects a zero vector
            return (1.0,) + (0.0,) * (self.dim - 1)
        vec = np.bincount(indices, weights=weights, minlength=self.dim)
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            norm = 1.0
        return tuple((vec / norm).tolist())

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """One unit vector per text."""
        return [self._vector(text) for text in texts]


class SentenceTransformerEmbedder:
    """Semantic embeddings from a sentence-transformers model (loaded lazily)."""

    def __init__(self, model: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415 (optional)
        except ImportError:  # pragma: no cover - depends on the optional extra
            raise RuntimeError(
                "the sentence-transformers embedder needs the extra: "
                "pip install 'corpus-reconciler[sentence-transformers]'"
            ) from None
        self._model: Any = SentenceTransformer(model)
        dim = self._model.get_sentence_embedding_dimension()
        if dim is None:  # typed Optional by sentence-transformers; every encoder has one
            raise RuntimeError(f"model {model!r} does not report its embedding dimension")
        self.dim = int(dim)

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """One normalised vector per text."""
        vectors = self._model.encode(list(texts), normalize_embeddings=True)
        return [tuple(float(x) for x in v) for v in vectors]


def make_embedder(kind: str, *, dim: int, model: str) -> Embedder:
    """Build the configured embedder."""
    if kind == "hashing":
        return HashingEmbedder(dim)
    if kind == "sentence-transformers":
        return SentenceTransformerEmbedder(model)
    raise ValueError(f"unknown embedder {kind!r}")
