"""The synthetic corpus: families of 3 versions, 10 chunks per document, no system of record.

Versions 1 and 2 of each family are superseded (each by the next), version 3 is current;
effective windows are consecutive (``effective_to`` of one version is ``effective_from`` of the
next). Rows go in through ``SqlDocumentTable.upsert_documents``, points through
``QdrantChunkIndex.upsert_chunks`` with payloads from ``chunk_payload`` and small random
vectors, exactly as the reference ingestion would write them — so a check finds no drift.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.ingesting import point_id_for
from reconciler.model import OPEN_END, ChunkRecord, Document, VersionState
from reconciler.payload import chunk_payload

CHUNKS_PER_DOC = 10
VERSIONS = 3
SOURCE = "bench"
COLLECTION = "bench"
#: Version 1 of family 0 comes into force here; each family starts a minute later than the
#: last (a day apart, families past about 2,900 — N = 88k chunks — had versions starting after
#: the bench's "now", 2030-01-01, so the corpus was no longer drift-free; 1M chunks span 23
#: days this way).
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
#: Length of the window of versions 1 and 2.
WINDOW = timedelta(days=365)


@dataclass(frozen=True)
class Layout:
    """Where one corpus lives and how big it is."""

    root: Path
    requested: int
    dim: int = 16
    seed: int = 7

    @property
    def families(self) -> int:
        """Families needed to hold at least ``requested`` chunks."""
        return max(1, math.ceil(self.requested / (CHUNKS_PER_DOC * VERSIONS)))

    @property
    def documents(self) -> int:
        """Document rows (3 per family)."""
        return self.families * VERSIONS

    @property
    def chunks(self) -> int:
        """Points in the collection (a multiple of 30, the first one >= ``requested``)."""
        return self.documents * CHUNKS_PER_DOC

    @property
    def superseded(self) -> int:
        """Superseded documents (versions 1 and 2 of every family)."""
        return self.families * (VERSIONS - 1)

    @property
    def table_url(self) -> str:
        """The SQLite document table."""
        return f"sqlite:///{self.root / 'reconciler.db'}"

    @property
    def qdrant_path(self) -> str:
        """The qdrant-client local-mode folder."""
        return str(self.root / "qdrant")


def family_id(family: int) -> str:
    """The ``doc_family_id`` of one family."""
    return f"fam{family:06d}"


def doc_id(family: int, version: int) -> str:
    """The id of one version of one family."""
    return f"{SOURCE}:{family_id(family)}/v{version}"


def family_of(doc: str) -> str:
    """The ``doc_family_id`` of a document of the corpus (``doc_id``'s inverse)."""
    return doc.removeprefix(f"{SOURCE}:").split("/", 1)[0]


def documents(layout: Layout) -> Iterator[Document]:
    """Every row of the corpus, family by family."""
    for family in range(layout.families):
        start = EPOCH + timedelta(minutes=family)
        for version in range(1, VERSIONS + 1):
            last = version == VERSIONS
            begins = start + WINDOW * (version - 1)
            yield Document(
                doc_id=doc_id(family, version),
                source=SOURCE,
                source_key=f"{family_id(family)}/v{version}",
                doc_family_id=family_id(family),
                doc_version=version,
                version_state=VersionState.CURRENT if last else VersionState.SUPERSEDED,
                effective_from=begins,
                effective_to=OPEN_END if last else begins + WINDOW,
                superseded_by=None if last else doc_id(family, version + 1),
                doc_class="policy",
                title=f"Family {family} version {version}",
                source_hash=f"sha256:{family:032x}{version:032x}",
                chunk_count=CHUNKS_PER_DOC,
            )


def chunk_ids(document_id: str) -> list[str]:
    """The chunk ids of one document."""
    return [f"{document_id}#{n}" for n in range(CHUNKS_PER_DOC)]


def chunks(layout: Layout, rows: list[Document], rng: random.Random) -> Iterator[ChunkRecord]:
    """The points of some rows: random unit-ish vectors, payloads from ``chunk_payload``."""
    for row in rows:
        for chunk_id in chunk_ids(row.doc_id):
            yield ChunkRecord(
                point_id=point_id_for(chunk_id),
                chunk_id=chunk_id,
                text=f"{row.title}, chunk {chunk_id.rsplit('#', 1)[1]}",
                vector=tuple(rng.uniform(-1.0, 1.0) for _ in range(layout.dim)),
                payload=chunk_payload(row, chunk_id=chunk_id),
            )


def drift_targets(layout: Layout, count: int) -> list[str]:
    """``count`` superseded documents (capped at how many exist), chosen reproducibly."""
    superseded = [
        doc_id(family, version)
        for family in range(layout.families)
        for version in range(1, VERSIONS)
    ]
    rng = random.Random(layout.seed)
    rng.shuffle(superseded)
    return sorted(superseded[: min(count, len(superseded))])
