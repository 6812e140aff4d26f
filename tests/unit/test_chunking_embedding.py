"""Reference ingestion parts: markdown chunking and the deterministic hashing embedder."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import embedding
from reconciler.chunking import chunk_markdown
from reconciler.embedding import HashingEmbedder


def test_chunks_follow_headings_and_carry_them() -> None:
    body = (
        "Intro line.\n\n# Travel\n\nMeals up to 55 EUR.\n\nHotels up to 150 EUR.\n\n"
        "## Claims\n\nWithin 30 days.\n"
    )
    chunks = chunk_markdown(body, max_chars=1200)
    assert chunks == [
        "Intro line.",
        "# Travel\n\nMeals up to 55 EUR.\n\nHotels up to 150 EUR.",
        "## Claims\n\nWithin 30 days.",
    ]


def test_paragraphs_pack_up_to_the_limit_and_long_ones_split() -> None:
    para = "word " * 60  # ~300 chars
    body = "# H\n\n" + "\n\n".join([para.strip()] * 5) + "\n\n" + ("Sentence here. " * 100)
    chunks = chunk_markdown(body, max_chars=400)
    assert all(len(c) <= 400 for c in chunks)
    assert all(c.startswith("# H") for c in chunks)
    joined = " ".join(c.replace("# H\n\n", "") for c in chunks)
    assert joined.count("word") == 300
    assert joined.count("Sentence") == 100


def test_fenced_code_is_not_a_heading_or_split_on_blank_lines() -> None:
    body = "# Real\n\n```bash\n# not a heading\n\necho hi\n```\n"
    chunks = chunk_markdown(body)
    assert chunks == ["# Real\n\n```bash\n# not a heading\n\necho hi\n```"]


def test_empty_body_has_no_chunks() -> None:
    assert chunk_markdown("") == []
    assert chunk_markdown("# Only a heading\n") == []


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=3000))
def test_chunking_never_loses_words(body: str) -> None:
    chunks = chunk_markdown(body, max_chars=300)
    words = [w for w in body.split() if not w.startswith("#")]
    chunk_words = [w for c in chunks for w in c.split() if not w.startswith("#")]
    # Headings repeat per chunk; body words appear at least once each, in order.
    it = iter(chunk_words)
    assert all(any(w == x for x in it) for w in words)


def test_hashing_embedder_is_deterministic_normalised_and_lexical() -> None:
    embedder = HashingEmbedder(dim=256)
    a, b, c, empty = embedder.embed(
        [
            "meals reimbursed up to 55 EUR",
            "meals reimbursed up to 55 EUR",
            "deploy rollback job",
            "",
        ]
    )
    assert a == b
    assert len(a) == 256
    assert math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-9)
    assert math.isclose(sum(x * x for x in empty), 1.0, rel_tol=1e-9)

    def cos(u: tuple[float, ...], v: tuple[float, ...]) -> float:
        return sum(x * y for x, y in zip(u, v, strict=True))

    query = embedder.embed(["how much are meals reimbursed"])[0]
    assert cos(query, a) > cos(query, c)


def _plain(text: str, dim: int) -> tuple[float, ...]:
    """The hashing embedder's definition, feature by feature (as it was written before the
    buckets were remembered): each word and word pair's bucket (``_bucket``) gets its sign
    added in turn, then the vector is made unit length."""
    words = embedding._WORD.findall(text.lower())
    vec = np.zeros(dim, dtype=np.float64)
    for feature in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
        index, sign = embedding._bucket(feature, dim)
        vec[index] += sign
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        vec[0], norm = 1.0, 1.0
    return tuple(float(x) for x in vec / norm)


WORDS = st.sampled_from(["meals", "up", "to", "55", "EUR", "it's", "ÉTÉ", "a", "b", "-", "\n"])


@settings(max_examples=200)
@given(
    texts=st.lists(st.lists(WORDS, max_size=60).map(" ".join) | st.text(max_size=200), max_size=8),
    dim=st.sampled_from([1, 2, 8, 384]),
    kept=st.sampled_from([1, 3, embedding.BUCKETS_KEPT]),
)
def test_hashing_embedder_is_its_definition(texts: list[str], dim: int, kept: int) -> None:
    """The remembered buckets and the ``bincount`` change no vector (whatever the embedder has
    remembered before, and when it starts over), to the last bit: the sums are of whole
    numbers, and the norm is of the same vector."""
    embedder = HashingEmbedder(dim=dim)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedding, "BUCKETS_KEPT", kept)
        for _ in range(2):  # the second time from the remembered buckets
            got = embedder.embed(texts)
            for text, vector in zip(texts, got, strict=True):
                expected = _plain(text, dim)
                assert vector == expected
                assert len(vector) == dim
                assert all(type(x) is float for x in vector)
