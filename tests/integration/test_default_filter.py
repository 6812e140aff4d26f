"""The canonical retrieval filter, run by real qdrant-client local mode over ingested payloads.

Chunks are built with ``chunk_payload`` from ``Document`` values and written by
``upsert_chunks``, so the filter is checked against exactly what ingestion writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models

from reconciler.filters import default_filter
from reconciler.model import ChunkRecord, Document, VersionState
from reconciler.payload import KeyMap, chunk_payload
from reconciler.stores.qdrant.index import QdrantChunkIndex

COLLECTION = "corpus"
NOW = datetime.now(UTC).replace(microsecond=0)
FUTURE = NOW + timedelta(days=30)


def doc(doc_id: str, family: str, version: int, state: VersionState, **fields: object) -> Document:
    base = Document(
        doc_id=doc_id,
        source="handbook",
        source_key=f"{doc_id}.md",
        doc_family_id=family,
        doc_version=version,
        version_state=state,
        effective_from=datetime(2024, 1, 1, tzinfo=UTC),
        source_hash="sha256:" + "0" * 64,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


DOCUMENTS = [
    # family A: v1 replaced by v2 at the start of 2025
    doc(
        "a-v1",
        "A",
        1,
        VersionState.SUPERSEDED,
        effective_to=datetime(2025, 1, 1, tzinfo=UTC),
        superseded_by="a-v2",
    ),
    doc("a-v2", "A", 2, VersionState.CURRENT, effective_from=datetime(2025, 1, 1, tzinfo=UTC)),
    # family P: v2 approved, comes into force in 30 days; v1 is in force until then
    doc("p-v1", "P", 1, VersionState.CURRENT, effective_to=FUTURE),
    doc("p-v2", "P", 2, VersionState.PENDING, effective_from=FUTURE),
    # quarantined while current: never served
    doc("q-v1", "Q", 1, VersionState.CURRENT, quarantined=True, quarantine_reason="in_place_edit"),
    # a quarantined superseded version: not even on the historical route
    doc(
        "q-old",
        "Q",
        0,
        VersionState.SUPERSEDED,
        effective_to=datetime(2024, 6, 1, tzinfo=UTC),
        quarantined=True,
    ),
    # retired without successor in mid 2024
    doc("r-v1", "R", 1, VersionState.RETIRED, effective_to=datetime(2024, 6, 1, tzinfo=UTC)),
    # marked current, but its effective window closed yesterday
    doc("e-v1", "E", 1, VersionState.CURRENT, effective_to=NOW - timedelta(days=1)),
    # inherited corpus: state unknown, start unknown
    doc("u-v1", "U", 1, VersionState.UNKNOWN, effective_from=None),
    # not approved: never served, not historical either
    doc("d-v1", "D", 1, VersionState.DRAFT),
]

LAYOUTS = {
    "default": (KeyMap(), "text"),
    "langchain": (KeyMap(prefix="metadata."), "page_content"),
}


def chunk_records(document: Document, count: int = 2) -> Iterator[ChunkRecord]:
    for n in range(count):
        chunk_id = f"{document.doc_id}#{n}"
        yield ChunkRecord(
            point_id=str(uuid.uuid5(uuid.NAMESPACE_URL, chunk_id)),
            chunk_id=chunk_id,
            text=f"the best textual match, version {document.doc_version}",
            vector=(1.0, 0.0, float(n), 0.5),
            payload=chunk_payload(document, chunk_id=chunk_id),
        )


class Corpus:
    def __init__(self, client: QdrantClient, keys: KeyMap, text_key: str) -> None:
        self.client = client
        self.keys = keys
        self.index = QdrantChunkIndex(client, collection=COLLECTION, keys=keys, text_key=text_key)
        self.index.ensure_collection(dim=4)
        self.index.upsert_chunks(r for d in DOCUMENTS for r in chunk_records(d))

    def served(self, query_filter: models.Filter) -> set[str]:
        """Doc ids a retrieval under ``query_filter`` sees, checked against ``count``."""
        records, offset = self.client.scroll(
            COLLECTION, scroll_filter=query_filter, limit=1000, with_payload=True
        )
        assert offset is None
        assert self.index.count(query_filter=query_filter) == len(records)
        return {str(self.keys.from_point(r.payload)["doc_id"]) for r in records}


@pytest.fixture(params=list(LAYOUTS), ids=list(LAYOUTS))
def corpus(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Corpus]:
    keys, text_key = LAYOUTS[request.param]
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        yield Corpus(client, keys, text_key)
    finally:
        client.close()


def test_default_route_serves_only_versions_in_force_now(corpus: Corpus) -> None:
    served = corpus.served(default_filter(keys=corpus.keys))

    assert served == {"a-v2", "p-v1", "u-v1"}


def test_superseded_chunk_is_hidden_and_its_successor_served(corpus: Corpus) -> None:
    served = corpus.served(default_filter(NOW, keys=corpus.keys))

    assert "a-v1" not in served
    assert "a-v2" in served


def test_pending_version_is_served_from_its_effective_from(corpus: Corpus) -> None:
    before = corpus.served(default_filter(FUTURE - timedelta(seconds=1), keys=corpus.keys))
    at = corpus.served(default_filter(FUTURE, keys=corpus.keys))
    after = corpus.served(default_filter(FUTURE + timedelta(days=1), keys=corpus.keys))

    assert "p-v2" not in before
    assert "p-v1" in before
    # the window is half-open: effective_from <= as_of < effective_to
    assert "p-v2" in at
    assert "p-v1" not in at
    assert "p-v2" in after


def test_quarantined_chunks_are_never_served(corpus: Corpus) -> None:
    routes = [
        default_filter(keys=corpus.keys),
        default_filter(datetime(2024, 3, 1, tzinfo=UTC), keys=corpus.keys),
        default_filter(include_historical=True, keys=corpus.keys),
        default_filter(datetime(2024, 3, 1, tzinfo=UTC), include_historical=True, keys=corpus.keys),
    ]

    for route in routes:
        assert not {"q-v1", "q-old"} & corpus.served(route)


def test_historical_route_adds_superseded_and_retired(corpus: Corpus) -> None:
    served = corpus.served(default_filter(include_historical=True, keys=corpus.keys))

    assert served == {"a-v1", "a-v2", "p-v1", "p-v2", "r-v1", "e-v1", "u-v1"}
    assert "d-v1" not in served


def test_historical_route_at_an_instant_answers_what_was_in_force(corpus: Corpus) -> None:
    served = corpus.served(
        default_filter(datetime(2024, 3, 1, tzinfo=UTC), include_historical=True, keys=corpus.keys)
    )

    assert served - {"u-v1"} == {"a-v1", "r-v1", "p-v1", "e-v1"}
    assert "a-v2" not in corpus.served(
        default_filter(datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC), keys=corpus.keys)
    )


def test_current_version_whose_effective_to_passed_is_hidden(corpus: Corpus) -> None:
    assert "e-v1" not in corpus.served(default_filter(NOW, keys=corpus.keys))
    assert "e-v1" in corpus.served(default_filter(NOW - timedelta(days=2), keys=corpus.keys))


def test_unknown_state_without_effective_from_is_served(corpus: Corpus) -> None:
    assert "u-v1" in corpus.served(default_filter(keys=corpus.keys))
    assert "u-v1" in corpus.served(
        default_filter(datetime(1990, 1, 1, tzinfo=UTC), keys=corpus.keys)
    )


def test_drafts_are_never_served(corpus: Corpus) -> None:
    assert "d-v1" not in corpus.served(default_filter(keys=corpus.keys))


def test_naive_and_offset_instants_mean_the_same_utc_instant(corpus: Corpus) -> None:
    cest = timezone(timedelta(hours=2))
    in_utc = corpus.served(default_filter(datetime(2025, 1, 1, tzinfo=UTC), keys=corpus.keys))
    in_cest = corpus.served(default_filter(datetime(2025, 1, 1, 2, tzinfo=cest), keys=corpus.keys))
    naive = corpus.served(default_filter(datetime(2025, 1, 1), keys=corpus.keys))

    assert in_utc == in_cest == naive
    assert "a-v2" in in_utc
    assert "a-v1" not in in_utc
