"""Issue 38: ``reconciler split`` finds what to move with a placement scan (doc_id and
doc_family_id read, no payload compared: ``scan(placement=True)``), not the check's. The
promise: over random split stores (rows of any state; chunks in either collection, with their
row's payload, a drifted one, keys missing, or no row at all), the moves it plans, and what it
counts each way, are exactly those the check's scan gave. On a real SQLite table and the
in-memory index, as a split store's two collections."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from acceptance_kit import migrated_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from reconciler.app import splitting
from reconciler.model import ChunkRecord, Document, VersionState
from reconciler.payload import chunk_payload
from reconciler.pipeline.scanning import scan
from reconciler.pipeline.values import Options
from reconciler.settings import Settings
from reconciler.stores.split import SplitChunkIndex
from reconciler.testing.memory import InMemoryChunkIndex

SRC = "kb"
#: What may be wrong with a chunk: nothing (most often), its payload drifted, a managed key
#: missing, its doc_id naming no row (with or without its family), no doc_id at all, a doc_id
#: that is a number, a JSON object or list, or a boolean.
TROUBLES = ["none"] * 5 + ["drift", "missing", "orphan", "orphan-no-family", "no-doc-id"]
TROUBLES += ["number-doc-id", "object-doc-id"]


@st.composite
def split_stores(draw: st.DrawFn) -> tuple[list[Document], list[tuple[bool, dict[str, Any]]]]:
    """Rows of up to four families, and their chunks' payloads, each in the archive or not."""
    rows: list[Document] = []
    points: list[tuple[bool, dict[str, Any]]] = []
    for f in range(draw(st.integers(min_value=1, max_value=4))):
        for v in range(draw(st.integers(min_value=1, max_value=3))):
            doc = Document(
                doc_id=f"{SRC}:f{f}v{v}",
                source=SRC,
                source_key=f"f{f}v{v}",
                doc_family_id=f"{SRC}:f{f}",
                doc_version=v + 1,
                version_state=draw(st.sampled_from(list(VersionState))),
                quarantined=draw(st.booleans()),
                chunk_count=draw(st.integers(min_value=0, max_value=3)),
            )
            rows.append(doc)
            for n in range(doc.chunk_count):
                payload = chunk_payload(doc, chunk_id=f"{doc.doc_id}#{n}")
                trouble = draw(st.sampled_from(TROUBLES))
                if trouble == "drift":
                    payload["version_state"] = draw(st.sampled_from(list(VersionState))).value
                    payload["doc_family_id"] = draw(st.sampled_from([f"{SRC}:f{f}", "kb:other"]))
                elif trouble == "missing":
                    del payload[draw(st.sampled_from(["version_state", "doc_family_id"]))]
                elif trouble.startswith("orphan"):
                    payload["doc_id"] = f"{doc.doc_id}-gone{draw(st.integers(0, 1))}"
                    if trouble == "orphan-no-family":
                        del payload["doc_family_id"]
                elif trouble == "no-doc-id":
                    del payload["doc_id"]
                elif trouble == "number-doc-id":
                    payload["doc_id"] = draw(st.integers(0, 2))
                elif trouble == "object-doc-id":
                    payload["doc_id"] = draw(st.sampled_from([{"k": 1}, ["k", 1], [["k"]], True]))
                points.append((draw(st.booleans()), payload))
    return rows, points


def _doc(chunks: int) -> Document:
    """One current document, kb:a of family kb:f, with ``chunks`` chunks."""
    return Document(
        doc_id="kb:a",
        source=SRC,
        source_key="a",
        doc_family_id="kb:f",
        doc_version=1,
        version_state=VersionState.CURRENT,
        chunk_count=chunks,
    )


@contextmanager
def store(
    rows: list[Document], points: list[tuple[bool, dict[str, Any]]]
) -> Iterator[tuple[Any, SplitChunkIndex]]:
    with tempfile.TemporaryDirectory() as folder:
        table = migrated_table(Path(folder) / "t.db")
        main, archive = InMemoryChunkIndex(), InMemoryChunkIndex()
        for part in (main, archive):
            part.ensure_collection(dim=2)
        try:
            table.upsert_documents(rows)
            for n, (archived, payload) in enumerate(points):
                record = ChunkRecord(n, f"c{n}", f"text {n}", (float(n), 0.5), payload)  # type: ignore[arg-type]
                (archive if archived else main).upsert_chunks([record])
            yield table, SplitChunkIndex(main, archive)
        finally:
            table.close()


def _folded(table: Any, index: SplitChunkIndex, rows: list[Document], placement: bool) -> Any:
    """What a scan folds of each row's document and of each orphan: counts and where."""
    tally = scan(table, index, Options(mode="check"), None, placement=placement).chunks
    documents = {}
    for row in rows:
        chunks = tally.get(row.doc_id)
        documents[row.doc_id] = None if chunks is None else (chunks.count, chunks.archived)
    orphans = sorted(
        (
            str(doc_id),
            chunks.count,
            chunks.archived,
            # (the families its chunks name; split takes the first met. Variants that differ
            # in a value the placement scan does not read are one variant there.)
            [str(dict(v).get("doc_family_id")) for v in chunks.variants][:1],
            sorted({str(dict(v).get("doc_family_id")) for v in chunks.variants}),
        )
        for doc_id, chunks in tally.orphans()
    )
    return documents, orphans


def _planned(table: Any, index: SplitChunkIndex, placement: bool) -> Any:
    """What ``split`` would move, and what it counts each way, with either scan."""
    ways = {True: splitting._Way(), False: splitting._Way()}

    def chosen(*args: Any, **kwargs: Any) -> Any:
        return scan(*args, **{**kwargs, "placement": placement})

    with mock.patch.object(splitting, "scan", chosen):
        moves = [
            (t.doc_id, t.family, t.to_archive, t.points)
            for targets in splitting._placements(Settings(), table, index, ways, None)
            for t in targets
        ]
    return moves, {way: vars(counted) for way, counted in ways.items()}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=split_stores())
def test_a_placement_scan_moves_what_the_checks_scan_moved(
    corpus: tuple[list[Document], list[tuple[bool, dict[str, Any]]]],
) -> None:
    rows, points = corpus
    with store(rows, points) as (table, index):
        assert _folded(table, index, rows, True) == _folded(table, index, rows, False)
        assert _planned(table, index, True) == _planned(table, index, False)


def test_a_placement_scan_reads_where_each_chunk_is_and_whose_only() -> None:
    doc = _doc(chunks=2)
    drifted = {**chunk_payload(doc, chunk_id="kb:a#0"), "version_state": "retired"}
    with store([doc], [(False, drifted), (True, chunk_payload(doc, chunk_id="kb:a#1"))]) as (
        table,
        index,
    ):
        placed = scan(table, index, Options(mode="check"), None, placement=True).chunks
        checked = scan(table, index, Options(mode="check"), None).chunks
        # The drifted chunk is counted where it is, not compared: no drift seen, no ids kept.
        assert (placed.get("kb:a").count, placed.get("kb:a").archived) == (2, 1)
        assert placed.drifted_ids() == []
        assert checked.drifted_ids() == ["kb:a"]


class _Older(InMemoryChunkIndex):
    """A chunk index written against the port before ``placement`` (a third party's)."""

    def scan_managed(  # type: ignore[override]
        self, *, batch_size: int = 1000, doc_ids: Any = None
    ) -> Any:
        return super().scan_managed(batch_size=batch_size, doc_ids=doc_ids)


def test_an_index_written_before_placement_still_checks() -> None:
    doc = _doc(chunks=1)
    with tempfile.TemporaryDirectory() as folder:
        table = migrated_table(Path(folder) / "t.db")
        older = _Older()
        older.ensure_collection(dim=2)
        try:
            table.upsert_documents([doc])
            payload = chunk_payload(doc, chunk_id="kb:a#0")
            older.upsert_chunks([ChunkRecord(1, "c1", "text", (1.0, 0.5), payload)])  # type: ignore[arg-type]
            # A check's scan asks nothing new of it: the keyword goes only with a placement.
            assert scan(table, older, Options(mode="check"), None).chunks.get("kb:a").count == 1
        finally:
            table.close()
