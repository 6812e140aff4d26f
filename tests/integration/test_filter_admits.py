"""The third rendering of the default filter, ``FilterTerms.admits`` (a payload judged in
Python, as ``reconciler audit served`` judges what the log says a chunk held), admits exactly
the points the engines return for ``default_filter`` and ``default_edge_filter``: a property
over random payloads (well-formed as the reconciler writes them, and odd ones another tool
might leave: other spellings of an instant, a list, a wrong type, a missing key) and random
instants, in qdrant-client local mode and a Qdrant Edge shard, top-level and nested under
``metadata.``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from qdrant_client import QdrantClient

from reconciler.filters import default_edge_filter, default_filter, filter_terms
from reconciler.model import ChunkRecord, rfc3339
from reconciler.payload import KeyMap
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex

BASE = datetime(2025, 6, 1, tzinfo=UTC)
INSTANTS = st.integers(-5, 5).map(lambda n: BASE + timedelta(days=n, hours=n % 3))


def spelled(instant: datetime, how: int) -> Any:
    """An instant as the reconciler writes it (0), or as another tool might (others)."""
    return [
        rfc3339(instant),
        instant.isoformat(),
        instant.strftime("%Y-%m-%dT%H:%M:%S"),
        instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z",
    ][how]


DATES = st.one_of(
    st.builds(spelled, INSTANTS, st.integers(0, 3)),
    st.sampled_from(["0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", None, "soon", 7]),
)
PAYLOADS = st.fixed_dictionaries(
    {
        "version_state": st.sampled_from(
            ["current", "pending", "unknown", "superseded", "retired", "draft", "Current", None]
        ),
        "effective_from": DATES,
        "effective_to": DATES,
        "quarantined": st.sampled_from([False, True, None, "true", 1]),
    }
)
LAYOUTS = {"top": KeyMap(), "nested": KeyMap(prefix="metadata.")}


class Engines:
    """One collection a layout in local mode and on Edge, written point by point."""

    def __init__(self, root: Path, keys: KeyMap) -> None:
        self.keys = keys
        self.client = QdrantClient(path=str(root / "qdrant"))
        self.local = QdrantChunkIndex(self.client, collection="c", keys=keys)
        self.edge = EdgeChunkIndex(root / "edge" / "c", keys=keys)
        for index in (self.local, self.edge):
            index.ensure_collection(dim=2)

    def put(self, payloads: list[dict[str, Any]]) -> list[str]:
        ids = [str(uuid.uuid4()) for _ in payloads]
        records = []
        for point_id, payload in zip(ids, payloads, strict=True):
            stored = {k: v for k, v in payload.items() if v is not None}
            records.append(
                ChunkRecord(
                    point_id=point_id,
                    chunk_id=point_id,
                    text="t",
                    vector=[0.5, 0.5],
                    payload={"doc_id": "d", "chunk_id": point_id, **stored},
                )
            )
        for index in (self.local, self.edge):
            index.upsert_chunks(records)
        return ids

    def returned(self, at: datetime) -> tuple[set[str], set[str]]:
        found, _ = self.client.scroll(
            "c", scroll_filter=default_filter(at, keys=self.keys), limit=10_000
        )
        edge, _ = self.edge.shard.scroll(
            qe.ScrollRequest(limit=10_000, filter=default_edge_filter(at, keys=self.keys))
        )
        return {str(p.id) for p in found}, {str(p.id) for p in edge}

    def close(self) -> None:
        self.edge.close()
        self.client.close()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@settings(max_examples=examples(25), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=st.lists(PAYLOADS, min_size=1, max_size=12), at=INSTANTS)
@example(  # the reconciler's own spelling, on both sides of a window's ends
    payloads=[
        {
            "version_state": "current",
            "effective_from": rfc3339(BASE),
            "effective_to": rfc3339(BASE + timedelta(days=1)),
            "quarantined": False,
        }
    ],
    at=BASE,
)
def test_admits_is_what_the_engines_return(
    layout: str,
    tmp_path_factory: pytest.TempPathFactory,
    payloads: list[dict[str, Any]],
    at: datetime,
) -> None:
    keys = LAYOUTS[layout]
    engines = Engines(tmp_path_factory.mktemp("admits"), keys)
    try:
        ids = engines.put(payloads)
        terms = filter_terms(at, keys=keys)
        stored = [keys.to_point({k: v for k, v in p.items() if v is not None}) for p in payloads]
        expected = {pid for pid, p in zip(ids, stored, strict=True) if terms.admits(p)}
        local, edge = engines.returned(at)
        assert local == expected
        assert edge == expected
    finally:
        engines.close()
