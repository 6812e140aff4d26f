"""Raw floors for the bench's write rows: the engine's own calls, no reconciler code timed.

A repair's payload writes are recorded as the adapter received them (``WriteRecorder``: the
``PayloadWrite``s and the batch size of each ``set_payloads`` call), turned into the engine's
own operations *before* the clock starts, then replayed: Edge's ``shard.update(set_payload)``
one operation a document group, or qdrant-client's ``batch_update_points`` one call a batch
in local mode — the same points, the same keys, the same operation shape. The values written
are the ones the repair wrote, so replaying them leaves the collection as it was.

On Edge the replay meets the points as the repair met them (issue 38, round 3). Untimed, the
points are first given back the values they held before the repair (its audit intents' *before*,
recorded beside the writes), so that the floor writes the same before→after changes; then the
shard is closed and loaded again and scrolled whole once, payloads included, as the repair's
process had it (loaded, then scanned by the check). Measured: Edge writes a value a point
already holds as fast as a new one, but the first writes after a load cost 1.5 to 2x what the
same writes cost on a shard the process has written since (17.9 against 11.5 µs a point at
20k): a floor replayed on the shard the repair had just written was the cheaper of the two.

The re-ingest floor upserts the same points whole (vector and payload, read back before the
clock starts): what re-ingesting them costs besides embedding their text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from qdrant_client import models

from reconciler.model import AuditEntry, AuditKind, PayloadWrite, documents_of
from reconciler.stores.qdrant.index import QdrantChunkIndex

#: Points a raw upsert call writes (the adapters' ``UPSERT_BATCH`` order of size).
UPSERT_CALL = 256


@dataclass
class Floor:
    """Wall and CPU seconds of one raw replay, and what it wrote."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0
    points: int = 0
    calls: int = 0
    operations: int = 0
    #: CPU seconds of making the engine's operations from the recorded writes (Edge: its
    #: ``set_payload`` parsing each id and converting the payload), off the floor's clock: the
    #: repair pays it inside its writes (issue 38, round 5).
    build_cpu_seconds: float = 0.0

    def as_dict(self, prefix: str) -> dict[str, Any]:
        """``{prefix}seconds``, ``{prefix}cpu_seconds``, ... for a phase's JSON result."""
        return {f"{prefix}{name}": value for name, value in vars(self).items()}


@dataclass
class WriteRecorder:
    """Records every ``set_payloads`` call on ``index`` while entered (the calls still run),
    and with ``table`` the audit entries appended through it (the intents' *before*)."""

    index: Any
    table: Any = None
    calls: list[tuple[list[PayloadWrite], int]] = field(default_factory=list)
    entries: list[AuditEntry] = field(default_factory=list)

    def __enter__(self) -> WriteRecorder:
        original = self.index.set_payloads
        calls = self.calls

        def recorded(writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
            calls.append((list(writes), batch_size))
            written: int = original(writes, batch_size=batch_size)
            return written

        self.index.set_payloads = recorded
        if self.table is not None:
            append, entries = self.table.append_audit, self.entries

            def appended(batch: Sequence[AuditEntry]) -> str:
                entries.extend(batch)  # (references only: nothing copied on the clock)
                head: str = append(batch)
                return head

            self.table.append_audit = appended
        return self

    def __exit__(self, *exc: object) -> None:
        del self.index.set_payloads  # (the instance attribute: the class's method again)
        if self.table is not None:
            del self.table.append_audit

    def befores(self) -> list[PayloadWrite]:
        """Writes that give the recorded intents' points back the values they held before, in
        the keys the repair changed (a key a point did not hold: ``None``, removed)."""
        restore = []
        for entry in self.entries:
            for part in documents_of(entry):
                if part.target_type != AuditKind.PAYLOAD:
                    continue
                before, after = part.before["payload"], part.after["payload"]
                payload = {k: before.get(k) for k in after if before.get(k) != after.get(k)}
                if payload:
                    restore.append(
                        PayloadWrite(point_ids=tuple(part.before["points"]), payload=payload)
                    )
        return restore

    @property
    def points(self) -> int:
        """Points the recorded calls wrote."""
        return sum(len(w.point_ids) for writes, _ in self.calls for w in writes)


def _timed(calls: Sequence[Callable[[], Any]], points: int, operations: int) -> Floor:
    wall, cpu = time.perf_counter(), time.process_time()
    for call in calls:
        call()
    return Floor(
        seconds=time.perf_counter() - wall,
        cpu_seconds=time.process_time() - cpu,
        points=points,
        calls=len(calls),
        operations=operations,
    )


def set_payload_floor(index: Any, recorded: WriteRecorder) -> Floor:
    """Replay the recorded payload writes with the engine's own calls (see the module)."""
    if isinstance(index, QdrantChunkIndex):
        from reconciler.stores.qdrant.requests import payload_batches  # noqa: PLC0415

        client, name = index.client, index.collection
        batches = [
            operations
            for writes, size in recorded.calls
            for operations, _points in payload_batches(writes, size, index.keys)
        ]
        calls = [
            (lambda ops=ops: client.batch_update_points(name, update_operations=ops, wait=True))
            for ops in batches
        ]
        return _timed(calls, recorded.points, sum(map(len, batches)))
    import qdrant_edge as qe  # noqa: PLC0415 - the edge extra

    from reconciler.stores.edge.requests import payload_batches as edge_batches  # noqa: PLC0415

    nest = index.keys.nest_key
    built = time.process_time()
    operations = [
        qe.UpdateOperation.set_payload(ids, stored, key=nest)
        for writes, size in recorded.calls
        for batch in edge_batches(writes, size, index.keys)
        for ids, stored in batch
    ]
    built = time.process_time() - built
    # Untimed: the points back as the repair found them, in a shard loaded afresh and scanned
    # (see the module).
    index.set_payloads(recorded.befores(), batch_size=1000)
    index.close()
    shard = qe.EdgeShard.load(str(index.path))
    try:
        _scroll_all(shard)
        floor = _timed([(lambda op=op: shard.update(op)) for op in operations],
                       recorded.points, len(operations))  # fmt: skip
        floor.build_cpu_seconds = built
        return floor
    finally:
        shard.flush()
        shard.close()


def _scroll_all(shard: Any) -> None:
    """Read every point of an Edge shard once, payload included (what the check's scan did
    before the repair wrote)."""
    import qdrant_edge as qe  # noqa: PLC0415 - the edge extra

    offset = None
    while True:
        request = qe.ScrollRequest(offset=offset, limit=1000, with_payload=True, with_vector=False)
        _points, offset = shard.scroll(request)
        if offset is None:
            return


def upsert_floor(index: Any, point_ids: Sequence[str | int]) -> Floor:
    """Upsert the given points whole again (read first, untimed), ``UPSERT_CALL`` a call: the
    write half of re-ingesting them (the embedding is not included)."""
    stored = index.read_points(list(point_ids))
    batches = [stored[at : at + UPSERT_CALL] for at in range(0, len(stored), UPSERT_CALL)]
    if isinstance(index, QdrantChunkIndex):
        client, name = index.client, index.collection
        structs = [
            [models.PointStruct(id=p.point_id, vector=p.vector, payload=p.payload) for p in batch]
            for batch in batches
        ]
        calls = [(lambda b=b: client.upsert(name, points=b, wait=True)) for b in structs]
        return _timed(calls, len(stored), len(calls))
    import qdrant_edge as qe  # noqa: PLC0415 - the edge extra

    from reconciler.stores.edge.requests import edge_id  # noqa: PLC0415

    shard = index.shard
    operations = [
        qe.UpdateOperation.upsert_points(
            [qe.Point(edge_id(p.point_id), p.vector, dict(p.payload)) for p in batch]
        )
        for batch in batches
    ]
    return _timed([(lambda op=op: shard.update(op)) for op in operations],
                  len(stored), len(operations))  # fmt: skip


def recorded_ids(recorded: WriteRecorder) -> list[str | int]:
    """The point ids the recorded writes touched, once each, in order."""
    ids: dict[str | int, None] = {}
    for writes, _ in recorded.calls:
        for write in writes:
            ids.update(dict.fromkeys(write.point_ids))
    return list(ids)
