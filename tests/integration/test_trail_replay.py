"""The log replayed (``reconciler.trail``) where writes go wrong, on a real table (both
dialects), the entries written by the product's own writers:

- a payload batch that failed part-way: the applier re-reads it and confirms only the points
  written; the others never changed;
- a run that died after sending a batch: until the next runner resolves it, the batch is in
  doubt; then the points it wrote changed at an unknown instant before the resolution (in
  doubt all that while) and the others never did;
- an ingestion killed between a document's row and its chunks: the document is queued again
  and its points are unknown from its intent on;
- the two passes: the walk verifies the chain and finds the documents of a family; the
  entries read again are checked against their hashes.

What each point held is set against what the index held at each instant, read there."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.app.auditing import ends_of
from reconciler.errors import IndexWriteError
from reconciler.model import (
    MANAGED_KEYS,
    OPEN_END,
    ChunkRecord,
    Document,
    PayloadWrite,
    RunMode,
    VersionState,
)
from reconciler.payload import chunk_id_for, chunk_payload, payload_for, point_id_for
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.trail.answers import merged, span_at
from reconciler.trail.replay import Replay, payload_dict
from reconciler.trail.survey import Survey
from reconciler.writing.applying import Applier
from reconciler.writing.ingestion import IngestionWriter
from reconciler.writing.recovery import resolve_interrupted
from reconciler.writing.runs import recorded


def document(doc_id: str, state: VersionState, doc_class: str = "a") -> Document:
    return Document(
        doc_id=doc_id,
        source="h",
        source_key=doc_id,
        doc_family_id="h:fam",
        doc_version=1,
        version_state=state,
        effective_from=datetime(2025, 1, 1, tzinfo=UTC),
        effective_to=OPEN_END,
        doc_class=doc_class,
        source_hash="sha256:" + "1" * 64,
        chunk_count=4,
    )


class Breaking(InMemoryChunkIndex):
    """Writes the first ``keep`` points of the next ``set_payloads`` call, then fails (as an
    engine that stops part-way does), or ``dies``: writes them and raises something else."""

    def __init__(self) -> None:
        super().__init__()
        self.keep: int | None = None
        self.dies = False
        #: The next ``upsert_chunks`` dies before writing (an ingestion killed after the row).
        self.dies_on_chunks = False

    def upsert_chunks(self, records: Iterable[ChunkRecord]) -> int:
        if self.dies_on_chunks:
            self.dies_on_chunks = False
            raise KeyboardInterrupt("the process dies before the chunks")
        return super().upsert_chunks(records)

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        if self.keep is None:
            return super().set_payloads(writes, batch_size=batch_size)
        keep, self.keep = self.keep, None
        first = writes[0]
        part = PayloadWrite(first.point_ids[:keep], first.payload, first.doc_id)
        super().set_payloads([part], batch_size=batch_size)
        if self.dies:
            raise KeyboardInterrupt("the process dies")  # (nothing confirms it)
        raise IndexWriteError("the engine stopped", points_written=keep)


def held(index: InMemoryChunkIndex) -> dict[str, dict[str, object]]:
    return {
        str(s.point_id): {k: s.payload.get(k) for k in MANAGED_KEYS}
        for s in index.retrieve([point_id_for(chunk_id_for("h:doc", n)) for n in range(4)])
    }


def replayed(table: SqlDocumentTable, family: str = "h:fam") -> Replay:
    """The two passes, as ``reconciler audit`` makes them."""
    survey = Survey(families=frozenset({family}), docs=frozenset())
    walk = table.walk_audit()
    for chained in walk:
        survey.see(chained)
    assert walk.verification.ok
    about = sorted(table.audit_entries_about(survey.asked, upto=walk.last_seq), key=lambda c: c.seq)
    entries = sorted([*about, *ends_of(table, about, upto=walk.last_seq)], key=lambda c: c.seq)
    return Replay().feed_all(entries)


def answer(replay: Replay, at: datetime) -> dict[str, tuple[str, list[object]]]:
    """Point -> (status, the payloads it may have held) at ``at``."""
    out = {}
    for key, timeline in replay.timelines.items():
        span = span_at(merged(timeline.spans), at)
        assert span is not None
        out[key] = (
            span.status,
            [payload_dict(h.payload) for h in span.held if h.payload is not None],
        )
    return out


def ingest(table: SqlDocumentTable, index: InMemoryChunkIndex, row: Document) -> None:
    with recorded(table, mode=RunMode.INGEST, actor="cli", shard="0/1") as run:
        writer = IngestionWriter(table, index, run)
        writer.open_collection(dim=2)
        records = [
            ChunkRecord(
                point_id=point_id_for(chunk_id_for(row.doc_id, n)),
                chunk_id=chunk_id_for(row.doc_id, n),
                text=f"part {n}",
                vector=[0.0, 1.0],
                payload=chunk_payload(row, chunk_id=chunk_id_for(row.doc_id, n)),
            )
            for n in range(4)
        ]
        try:
            writer.register(table.get_documents([row.doc_id]).get(row.doc_id), row, records)
        except BaseException:  # as ``Ingestor.run`` records a stop, for the next runner
            run.counts = {"unconfirmed": writer.pending}
            raise
        writer.confirm()


@pytest.mark.parametrize("dies", [False, True], ids=["batch-fails", "process-dies"])
def test_a_batch_cut_short_is_known_where_written_and_in_doubt_only_while_it_may_be(
    table: SqlDocumentTable, dies: bool
) -> None:
    index = Breaking()
    ingest(table, index, document("h:doc", VersionState.CURRENT))  # (on the real clock)
    ingested = held(index)
    index.keep, index.dies = 2, dies
    ids = [point_id_for(chunk_id_for("h:doc", n)) for n in range(4)]
    target = payload_for(document("h:doc", VersionState.RETIRED))
    run = table.start_run(mode="apply", actor="cli", shard="0/1")
    applier = Applier(table=table, index=index, run_id=run, actor="cli")
    with pytest.raises(IndexWriteError if not dies else KeyboardInterrupt):
        applier.write_groups([("h:doc", ids, target, "test")])
    cut = held(index)
    assert sum(p["version_state"] == "retired" for p in cut.values()) == 2
    during = datetime.now(UTC)

    if dies:  # the next runner of the shard resolves it (the run is still recorded running)
        resolve_interrupted(table=table, index=index, shard="0/1")
    else:
        table.finish_run(run, status="failed", counts=applier.result.counts(), error="boom")
    replay = replayed(table)
    # (the replay's instants are the log's: the ingestion's clock is the real one)
    end = max(s.start for t in replay.timelines.values() for s in t.spans if s.start)
    after = answer(replay, end + timedelta(seconds=1))
    assert {k: v for k, (_s, [v]) in after.items()} == cut  # exactly what the index holds
    assert {s for s, _ in after.values()} == {"known"}

    at = answer(replay, during)
    written = {k for k, p in cut.items() if p != ingested[k]}
    for key, (status, payloads) in at.items():
        if key in written and dies:  # sent, unconfirmed: written at an unknown instant
            assert (status, payloads) == ("in_doubt", [ingested[key], cut[key]])
        else:  # a failed batch confirms what it wrote at once; the rest never changed
            assert (status, payloads) == ("known", [cut[key]]), key


def test_an_ingestion_killed_between_row_and_chunks_is_unknown_from_its_intent(
    table: SqlDocumentTable,
) -> None:
    index = Breaking()
    ingest(table, index, document("h:doc", VersionState.CURRENT))
    first = datetime.now(UTC)
    index.dies_on_chunks = True
    with pytest.raises(KeyboardInterrupt):
        ingest(table, index, document("h:doc", VersionState.CURRENT, doc_class="b"))
    assert index.retrieve([point_id_for(chunk_id_for("h:doc", 0))]) == []  # old ones deleted
    [resolved] = resolve_interrupted(table=table, index=index, shard="0/1")
    assert resolved.run_id
    replay = replayed(table)
    assert {s for s, _ in answer(replay, first).values()} == {"known"}
    later = answer(replay, datetime.now(UTC))
    assert {s for s, _ in later.values()} == {"unknown"}
    assert {t.spans[-1].why for t in replay.timelines.values()} == {"interrupted_ingest"}


def test_the_walk_and_the_second_read_check_the_chain(table: SqlDocumentTable) -> None:
    index = InMemoryChunkIndex()
    ingest(table, index, document("h:doc", VersionState.CURRENT))
    walk = table.walk_audit()
    entries = list(walk)
    assert walk.verification.ok
    assert walk.last_seq == entries[-1].seq
    about = list(table.audit_entries_about({"h:doc"}, upto=walk.last_seq))
    assert [c.entry.target_type for c in about if c.entry] == ["ingest"]
    assert list(table.audit_entries_about({"h:doc"}, upto=entries[0].seq - 1)) == []
    assert list(table.audit_entries_about({"h:doc"}, upto=walk.last_seq, after=about[0].seq)) == []
    table.engine.dispose()
    with table.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE audit_log SET reason = 'edited' WHERE target_type = 'ingest'")
    [altered] = table.audit_entries_about({"h:doc"}, upto=walk.last_seq)  # type: ignore[misc]
    assert altered.entry is None  # read again, it no longer matches its hash
    walk = table.walk_audit()
    list(walk)
    assert not walk.verification.ok
