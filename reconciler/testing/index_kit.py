"""What the chunk index's contract suites share (``index_contract``, ``points_contract``): the
key layouts they run on (``LAYOUTS``; the tests in ``ON_EVERY_LAYOUT`` run on each, the others
on the default one, through ``pytest_generate_tests``), the ``Harness`` an adapter's test
module hands them (its ``harness`` fixture), and the corpus they seed (``seeded``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.model import (
    MANAGED_KEYS,
    Document,
    ManagedPage,
    ManagedRow,
    VersionState,
)
from reconciler.payload import KeyMap, chunk_payload

DIM = 4
DOCS = 3
CHUNKS = 4


@dataclass(frozen=True)
class Layout:
    keys: KeyMap
    text_key: str


LAYOUTS = {
    "default": Layout(KeyMap(), "text"),
    "langchain": Layout(KeyMap(prefix="metadata."), "page_content"),
    "renamed": Layout(KeyMap(renames={"version_state": "status", "doc_id": "document"}), "text"),
    "two-level": Layout(
        KeyMap(prefix="a.b.", renames={"version_state": "status", "quarantined": "hidden"}),
        "body",
    ),
}


@dataclass
class Harness:
    """An adapter plus the raw access a contract test needs to check what it left alone."""

    index: Any
    layout: Layout
    raw: Callable[[str], tuple[list[float], dict[str, Any]]]
    put: Callable[[str, list[float], dict[str, Any]], None]
    update_calls: Callable[[], int]
    #: Another (not yet created) collection of the same adapter and layout: a split store's
    #: archive beside ``index``.
    sibling: Callable[[], Any] = lambda: None
    #: Whether the engine normalises a cosine vector again as it stores it (qdrant-client
    #: local mode, in memory: what it persists is the vector as handed).
    renormalises: bool = False


#: The tests that read or write through the key layout (the physical keys a payload has): run
#: on every layout. The others run on the default one: the layout is the ``KeyMap``'s, which
#: these tests and ``tests/unit`` hold on its own.
ON_EVERY_LAYOUT = frozenset(
    {
        "test_scroll_returns_every_point_once_with_logical_keys_only",
        "test_scan_vectors_counts_the_points_it_leaves_out",
        "test_scan_managed_returns_stored_values_unnormalised",
        "test_scan_managed_of_a_point_without_the_keys",
        "test_a_placement_scan_reads_doc_id_and_family_only_in_scroll_order",
        "test_retrieve_managed_reads_raw_values_by_id_an_absent_key_apart_from_a_null",
        "test_set_payloads_changes_only_managed_keys_on_the_given_ids",
        "test_upsert_chunks_writes_the_layout",
        "test_a_collection_made_with_the_layout_holds_the_copies_as_they_were",
        "test_scan_points_reads_whole_points_in_scroll_order_a_page_at_a_time",
        "test_reads_by_document_once_made_ready_see_the_writes_since",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "layout" in metafunc.fixturenames:
        names = list(LAYOUTS) if metafunc.function.__name__ in ON_EVERY_LAYOUT else ["default"]
        metafunc.parametrize("layout", names, ids=names, indirect=True)


@pytest.fixture
def layout(request: pytest.FixtureRequest) -> Layout:
    return LAYOUTS[request.param]


def document(number: int) -> Document:
    return Document(
        doc_id=f"handbook:doc-{number}",
        source="handbook",
        source_key=f"doc-{number}.md",
        doc_family_id=f"family-{number}",
        doc_version=1,
        version_state=VersionState.CURRENT,
        effective_from=datetime(2024, 1, number + 1, tzinfo=UTC),
        doc_class="policy",
        source_hash=f"sha256:{number:064x}",
    )


def point_id(doc_id: str, chunk: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc_id}#{chunk}"))


@dataclass
class Seeded:
    """What was seeded: logical payload per point id, and point ids per doc id."""

    logical: dict[str, dict[str, Any]]
    by_doc: dict[str, list[str]]


def physical_payload(layout: Layout, logical: dict[str, Any], n: int) -> dict[str, Any]:
    """A whole point payload as another tool built it: foreign keys in and beside the prefix."""
    payload = layout.keys.to_point({**logical, "page": n, "source": f"doc-{n}.md"})
    payload["source_url"] = f"https://example.test/{logical['chunk_id']}"
    payload[layout.text_key] = f"chunk text {logical['chunk_id']} " * 3
    return payload


@pytest.fixture
def seeded(harness: Harness) -> Seeded:
    harness.index.ensure_collection(dim=DIM)
    logical: dict[str, dict[str, Any]] = {}
    by_doc: dict[str, list[str]] = {}
    for number in range(DOCS):
        doc = document(number)
        for chunk in range(CHUNKS):
            pid = point_id(doc.doc_id, chunk)
            payload = chunk_payload(doc, chunk_id=f"{doc.doc_id}#{chunk}")
            vector = [float(number + 1), float(chunk + 1), 0.5, 0.25]
            harness.put(pid, vector, physical_payload(harness.layout, payload, chunk))
            logical[pid] = payload
            by_doc.setdefault(doc.doc_id, []).append(pid)
    return Seeded(logical, by_doc)


def snapshot(harness: Harness, ids: list[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
    return {pid: harness.raw(pid) for pid in ids}


def _f32(vector: Any) -> bytes:
    """A dense vector's float32 bytes (what the engine stores)."""
    return struct.pack(f"<{len(vector)}f", *vector)


def _unit(vector: list[float]) -> list[float]:
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


def _strip_managed(payload: dict[str, Any], keys: KeyMap) -> dict[str, Any]:
    """The payload with every managed key removed from the object the keys live in."""
    copied: dict[str, Any] = {k: v for k, v in payload.items()}
    node = copied
    if keys.nest_key:
        parts = keys.nest_key.split(".")
        for part in parts:
            node[part] = dict(node[part])
            node = node[part]
    for key in MANAGED_KEYS:
        node.pop(keys.name(key), None)
    return copied


def _rows(pages: Iterable[ManagedPage]) -> Iterator[ManagedRow]:
    """A lean scan chunk by chunk."""
    for page in pages:
        yield from page.chunks()
