"""``[ingest]``: the reference ingestion."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from reconciler.settings.shared import Section


class IngestSettings(Section):
    """The reference ingestion (the reconciler itself never embeds)."""

    embedder: Literal["hashing", "sentence-transformers"] = "hashing"
    dim: int = Field(default=384, gt=0, le=65536)
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    max_chunk_chars: int = Field(default=1200, ge=200)
