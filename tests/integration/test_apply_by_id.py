"""The check's lean scan and compact state, and the applier writing by the ids the scan saw.

Apply never scrolls the whole collection again: a document whose row stays is written by the
ids of its chunks that differed; one whose row changes is selected through the doc_id filter;
a scoped repair selects through the filter too. Batches hold whole documents, one
``set_payloads`` call and one audit append each.
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from collections.abc import Collection, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, migrated_table
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.vault import VaultSource
from reconciler.check_inputs import digest, expected_variant
from reconciler.embedding import make_embedder
from reconciler.ingesting import Ingestor
from reconciler.model import (
    MANAGED_KEYS,
    ChunkState,
    Document,
    ManagedPage,
    PayloadWrite,
    RunMode,
    VersionState,
)
from reconciler.payload import fingerprint, normalize, payload_for, payload_values
from reconciler.pipeline.chunk_tally import ChunkTally
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options
from reconciler.planning import PayloadTarget
from reconciler.ports.index import ABSENT, states_page
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.applying import Applier, set_aside
from reconciler.writing.differs import Differs, WriteGroup, expected_of, still_differs

NOW = datetime(2026, 12, 1, tzinfo=UTC)
FAMILIES = ("expenses", "travel", "leave", "vpn", "onboarding")


class SpyIndex(InMemoryChunkIndex):
    """Records how the collection is read and written."""

    def __init__(self) -> None:
        super().__init__()
        self.scrolls: list[frozenset[str] | None] = []
        self.scans: list[frozenset[str] | None] = []
        self.retrieved: list[int] = []
        self.writes: list[list[PayloadWrite]] = []

    def scroll(
        self, *, batch_size: int = 1000, doc_ids: Collection[str] | None = None
    ) -> Iterator[ChunkState]:
        self.scrolls.append(None if doc_ids is None else frozenset(doc_ids))
        return super().scroll(batch_size=batch_size, doc_ids=doc_ids)

    def scan_managed(
        self,
        *,
        batch_size: int = 1000,
        doc_ids: Collection[str] | None = None,
        placement: bool = False,
    ) -> Iterator[ManagedPage]:
        self.scans.append(None if doc_ids is None else frozenset(doc_ids))
        return super().scan_managed(batch_size=batch_size, doc_ids=doc_ids, placement=placement)

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        self.retrieved.append(len(point_ids))
        return super().retrieve(point_ids)

    def retrieve_managed(self, point_ids: Sequence[str | int]) -> ManagedPage:
        self.retrieved.append(len(point_ids))
        return states_page(super().retrieve(point_ids))

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        self.writes.append(list(writes))
        return super().set_payloads(writes, batch_size=batch_size)

    def reset(self) -> None:
        self.scrolls, self.scans, self.retrieved, self.writes = [], [], [], []


@dataclasses.dataclass
class World:
    table: SqlDocumentTable
    index: SpyIndex
    sources: list[VaultSource]

    def engine(self) -> Reconciler:
        return Reconciler(table=self.table, index=self.index, sources=self.sources)

    def run(self, mode: str, **options: Any) -> Any:
        options.setdefault("guard", Guard(max_changed_fraction=1.0))
        return self.engine().run(Options(mode=RunMode(mode), now=NOW, **options))

    def drift_payload(self, doc_id: str, **payload: Any) -> list[str | int]:
        ids = [c.point_id for c in self.index.scroll() if c.doc_id == doc_id]
        self.index.set_payloads([PayloadWrite(tuple(ids), payload)])
        return ids


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    deploy = Deployment(tmp_path)
    for name in FAMILIES:
        deploy.family(name, 2)
    table = migrated_table(tmp_path / "byid.db")
    index = SpyIndex()
    sources = [VaultSource("hb", deploy.vault)]
    Ingestor(table=table, index=index, embedder=make_embedder("hashing", dim=16, model="")).run(
        sources
    )
    try:
        yield World(table, index, sources)
    finally:
        table.close()


class Cycle:
    """An object in a reference cycle (only the cyclic collector frees it)."""

    def __init__(self) -> None:
        self.me = self


def _walked(objects: Sequence[object]) -> list[bool]:
    """Whether each object is in a generation the collector walks (not frozen)."""
    walked = {id(o) for o in gc.get_objects()}
    return [id(o) in walked for o in objects]


def _audit_payload_entries(table: SqlDocumentTable, run_id: str) -> list[Any]:
    entries, _hashes = table.run_entries_with_hashes(run_id)
    return [e for e in entries if e.target_type == "payload"]


def test_payload_drift_is_written_by_the_ids_the_check_saw(world: World) -> None:
    drifted = world.drift_payload("hb:expenses-v1", version_state="current")
    world.drift_payload("hb:travel-v1", version_state="current")
    world.index.reset()

    report = world.run("apply")

    assert report.applied is not None
    assert report.applied.points == 2 * len(drifted)
    # One scan (the check's lean one), no second scroll and no re-read: the points were
    # written by the ids, and judged on the values, that scan kept.
    assert world.index.scans == [None]
    assert world.index.scrolls == []
    assert sum(world.index.retrieved) == 0
    # Whole documents in one call; one intent entry per document.
    assert len(world.index.writes) == 1
    assert {w.doc_id for w in world.index.writes[0]} == {"hb:expenses-v1", "hb:travel-v1"}
    intents = _audit_payload_entries(world.table, report.run_id)
    assert sorted(e.target for e in intents) == ["hb:expenses-v1", "hb:travel-v1"]
    assert sorted(map(str, intents[0].before["points"] + intents[1].before["points"])) == sorted(
        str(p) for p in world.index.writes[0][0].point_ids + world.index.writes[0][1].point_ids
    )
    assert not world.run("check").findings


def test_a_repair_writes_with_what_was_alive_before_it_set_aside(world: World) -> None:
    drifted = world.drift_payload("hb:expenses-v1", version_state="current")
    gc.unfreeze()
    alive = Cycle()  # (alive before the run, in a cycle)
    seen: list[tuple[int, bool]] = []
    write = world.index.set_payloads

    def spied(writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        seen.append((gc.get_freeze_count(), _walked([alive])[0]))
        return write(writes, batch_size=batch_size)

    world.index.set_payloads = spied  # type: ignore[method-assign]
    report = world.run("apply")

    assert report.applied is not None
    assert report.applied.points == len(drifted)
    # Each write with what was alive before the repair out of the collector's walk, and
    # nothing left frozen after it (``applying.set_aside``).
    assert seen
    assert all(frozen > 0 and not walked for frozen, walked in seen)
    assert gc.get_freeze_count() == 0
    assert _walked([alive]) == [True]
    assert not world.run("check").findings


def test_a_row_change_selects_its_points_through_the_doc_id_filter(world: World) -> None:
    row = world.table.get_documents(["hb:travel-v2"])["hb:travel-v2"]
    retired = dataclasses.replace(row, version_state=VersionState.RETIRED)
    world.table.upsert_documents([retired])
    world.drift_payload("hb:travel-v2", **payload_for(retired))  # chunks agree with the row
    world.index.reset()

    report = world.run("apply")

    assert report.applied is not None
    assert report.applied.rows == 1
    assert report.applied.points == 2
    assert world.index.scans == [None]
    # The chunks matched the old row, so the scan kept no ids: the filter selects them.
    assert world.index.scrolls == [frozenset({"hb:travel-v2"})]
    assert not world.run("check").findings


def test_repair_of_one_document_never_scans_the_collection(world: World) -> None:
    world.drift_payload("hb:expenses-v1", version_state="current")
    world.drift_payload("hb:travel-v1", version_state="current")
    world.index.reset()

    report = world.run("repair", doc_id="hb:expenses-v1")

    family = {d.doc_id for d in world.table.iter_documents(families=["hb:expenses"])}
    assert world.index.scans == [frozenset(family)]
    assert None not in world.index.scrolls
    assert report.applied is not None
    assert report.applied.payload_writes == 1
    remaining = {f.doc_id for f in world.run("check").findings}
    assert "hb:expenses-v1" not in remaining
    assert "hb:travel-v1" in remaining


def test_too_many_mismatches_to_keep_fall_back_to_the_filter_and_converge(world: World) -> None:
    world.drift_payload("hb:expenses-v1", version_state="current")
    world.drift_payload("hb:travel-v1", version_state="current")
    world.index.reset()

    report = world.run("apply", keep_ids=1)

    assert report.applied is not None
    assert report.applied.payload_writes == 2
    assert None not in world.index.scrolls
    assert set().union(*(s for s in world.index.scrolls if s)) == {
        "hb:expenses-v1",
        "hb:travel-v1",
    }
    assert not world.run("check").findings


def test_the_before_is_what_the_scan_read_under_the_lease(world: World) -> None:
    """No re-read before the write (docs/engine.md, "Why no re-read"): a point an outside
    writer fixed between the scan and the write is written again (idempotent: it ends as the
    row says) and audited with the value the scan read."""
    ids = world.drift_payload("hb:expenses-v1", version_state="current")
    engine = world.engine()
    options = Options(mode=RunMode.APPLY, now=NOW, guard=Guard(max_changed_fraction=1.0))
    sources = engine.read_sources(options, NOW)
    scan = engine.scan(options, None)
    # Someone outside the lease fixes one chunk between the scan and the write.
    row = world.table.get_documents(["hb:expenses-v1"])["hb:expenses-v1"]
    world.index.set_payloads([PayloadWrite((ids[0],), payload_for(row))])
    assessment = engine.assess(options, NOW, sources, scan)

    applier = Applier(table=world.table, index=world.index, run_id="r", actor="test")
    world.table.start_run(mode=RunMode.APPLY, actor="test", run_id="r")
    world.index.reset()
    result = applier.apply(assessment.plan, located=scan.chunks)

    assert result.points == len(ids)
    assert world.index.retrieved == []
    [intent] = _audit_payload_entries(world.table, "r")
    assert intent.before["payload"]["version_state"] == "current"
    assert sorted(map(str, intent.before["points"])) == sorted(map(str, ids))
    assert not world.run("check").findings


# -- the compact state --------------------------------------------------------------------


def _row() -> Document:
    return Document(
        doc_id="hb:a",
        source="hb",
        source_key="a",
        doc_family_id="hb:a",
        doc_version=1,
        version_state=VersionState.CURRENT,
        effective_from=datetime(2024, 1, 1, tzinfo=UTC),
        doc_class="policy",
    )


def _values(**changes: Any) -> tuple[Any, ...]:
    payload = {**payload_for(_row()), **changes}
    return tuple(payload.get(key) for key in MANAGED_KEYS)


@pytest.mark.parametrize(
    ("changes", "matches"),
    [
        ({}, True),
        ({"doc_version": 1.0}, True),  # normalised: the same meaning
        ({"effective_from": "2024-01-01T00:00:00+00:00"}, True),  # the same instant
        ({"quarantined": 0}, False),  # 0 == False in Python, not in a payload
        ({"doc_version": True}, False),
        ({"version_state": "superseded"}, False),
        ({"doc_class": ["policy"]}, False),  # unhashable as stored
        ({"doc_class": {"a": 1}}, False),  # an object: drift, tallied
        ({"doc_class": [["policy"], {"a": [1]}]}, False),  # lists and objects within
    ],
)
def test_the_tally_matches_exactly_what_normalize_matches(
    changes: dict[str, Any], matches: bool
) -> None:
    tally = ChunkTally()
    tally.expect("hb:a", payload_values(_row()))
    values = _values(**changes)

    tally.add("p1", "hb:a", values)  # (an object too: ``normalize`` keeps it hashable)

    aggregate = tally["hb:a"]
    assert (aggregate.count, aggregate.matching) == (1, int(matches))
    assert tally.mismatching_ids("hb:a") == ([] if matches else ["p1"])
    # The same verdict as the digest of the normalised payload the engine compared before.
    variant = normalize(dict(zip(MANAGED_KEYS, values, strict=True)))
    assert (digest(variant) == digest(expected_variant(_row()))) == matches


def test_the_tally_reads_as_scan_chunks_always_did() -> None:
    tally = ChunkTally()
    tally.expect("hb:a", payload_values(_row()))
    tally.expect("hb:b", payload_values(_row()))
    tally.add("p1", "hb:a", _values())
    tally.add("p2", "hb:a", _values(version_state="superseded"))
    tally.add("p3", None, _values())
    tally.add("p4", "hb:ghost", _values())

    assert all(doc in tally for doc in ("hb:a", None, "hb:ghost"))
    assert "hb:b" not in tally  # registered, but no chunk
    assert "hb:b" in tally.registered
    assert "hb:ghost" not in tally.registered
    assert len(tally.registered) == 2
    assert tally["hb:a"].count == 2
    assert tally["hb:a"].drifted == 1
    assert tally[None].count == 1
    assert tally["hb:ghost"].variants
    assert tally.mismatching_ids("hb:a") == ["p2"]
    assert tally.mismatching_ids(None) == ["p3"]
    assert tally.mismatching_ids("hb:ghost") == ["p4"]
    assert fingerprint(_values()) == fingerprint(_values())
    assert tally.get("hb:b") is None
    with pytest.raises(KeyError):
        tally["hb:b"]
    with pytest.raises(RuntimeError, match="registered before"):
        tally.expect("hb:c", payload_values(_row()))


# -- the applier's remembered comparison ---------------------------------------------------

_STALE_VALUES = {
    "doc_version": st.sampled_from([1, 1.0, True, 2, 2.5, "1", None, [1]]),
    "version_state": st.sampled_from(["current", "superseded", "retired", None, 0]),
    "superseded_by": st.sampled_from([None, "hb:b", "", ["hb:b"]]),
    "effective_from": st.sampled_from(
        [
            "2024-01-01T00:00:00Z",
            "2024-01-01T00:00:00+00:00",
            "2024-01-01T01:00:00+01:00",
            "2024-01-03",
            "not a date",
            None,
        ]
    ),
    "quarantined": st.sampled_from([False, 0, True, 1, None, float("nan")]),
}


def _set_payload(payload: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
    """What Qdrant's set_payload leaves (a None value removes the key), as the contract
    suite holds every adapter to."""
    after = dict(payload)
    for key, value in written.items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    return after


def _exactly(payload: dict[str, Any]) -> list[tuple[str, type, str]]:
    return sorted((key, type(value), repr(value)) for key, value in payload.items())


@given(
    payloads=st.lists(
        st.fixed_dictionaries({}, optional=dict(_STALE_VALUES)).flatmap(
            lambda stale: st.sets(st.sampled_from(MANAGED_KEYS), max_size=2).map(
                lambda gone: (stale, gone)
            )
        ),
        max_size=12,
    ),
    partial=st.booleans(),
)
def test_the_remembered_comparison_answers_as_still_differs_for_every_point(
    payloads: list[tuple[dict[str, Any], set[str]]], partial: bool
) -> None:
    row = _row()
    written = {"quarantined": True, "quarantine_reason": "orphan"} if partial else payload_for(row)
    target = PayloadTarget("hb:a", "hb:a", written, len(payloads), ("drift",), partial)
    compare = Differs(target)
    reread = Differs(target)  # the re-read's raw values (``retrieve_managed``)
    base = {k: v for k, v in payload_for(row).items() if v is not None}  # as stored
    for stale, gone in payloads:
        payload = {k: v for k, v in {**base, **stale}.items() if k not in gone}
        remembered = compare(payload)
        alone = still_differs(payload, target, expected_of(target))
        assert (remembered is None) == (alone is None)
        raw = reread.raw(tuple(payload.get(key, ABSENT) for key in MANAGED_KEYS))
        assert raw == remembered
        if raw is not None and remembered is not None:  # (== holds 1 == True: types too)
            assert _exactly(raw[0]) == _exactly(remembered[0])
        if remembered is None or alone is None:
            continue
        before, key, keys = remembered
        # The same group (its key equal as a dict key) and the point's own before.
        assert key == alone[1]
        assert hash(key) == hash(alone[1])
        assert _exactly(before) == _exactly(alone[0])
        # Sending only the keys it names leaves the point as sending the whole payload.
        sent = written if keys is None else {k: v for k, v in written.items() if k in keys}
        assert sent
        assert _exactly(_set_payload(payload, sent)) == _exactly(_set_payload(payload, written))


@pytest.mark.parametrize(
    "stale",
    [{"quarantined": 0}, {"doc_version": True}, {"doc_version": True, "quarantined": 0}],
    ids=["quarantined-0", "version-True", "both"],
)
def test_a_value_equal_in_python_but_of_another_type_is_repaired_and_stays_repaired(
    world: World, stale: dict[str, Any]
) -> None:
    # ``0 == False`` and ``True == 1`` in Python, not in a payload: the check reports such a
    # chunk, so apply must write it (it once skipped it as already right, and every later
    # check reported it again).
    row = world.table.get_documents(["hb:expenses-v1"])["hb:expenses-v1"]
    assert (row.doc_version, row.quarantined) == (1, False)  # so True == 1 and 0 == False
    ids = world.drift_payload("hb:expenses-v1", **stale)
    assert world.run("check").findings  # reported

    applied = world.run("apply")

    assert applied.applied is not None
    assert applied.applied.points == len(ids)
    assert not world.run("check").findings
    for chunk in world.index.retrieve(ids):
        assert type(chunk.payload["quarantined"]) is bool
        assert type(chunk.payload["doc_version"]) is int


def test_a_remembered_answer_is_one_of_equal_values_of_the_same_type_only() -> None:
    written = payload_for(_row())
    stored = {k: v for k, v in written.items() if v is not None}
    compare = Differs(PayloadTarget("hb:a", "hb:a", written, 2, ("drift",)))

    first = compare({**stored, "version_state": "superseded"})
    second = compare({**stored, "version_state": "superseded", "doc_version": True})

    assert first is not None
    assert second is not None
    assert first[2] == {"version_state"}
    assert second[2] == {"version_state", "doc_version"}  # True is not the version 1


def test_a_remembered_answer_is_one_of_the_same_keys_present_only() -> None:
    written = payload_for(_row())  # superseded_by None: no such key on the point
    stored = {k: v for k, v in written.items() if v is not None}
    compare = Differs(PayloadTarget("hb:a", "hb:a", written, 2, ("drift",)))

    absent = compare({**stored, "version_state": "superseded"})
    present = compare({**stored, "version_state": "superseded", "superseded_by": None})

    assert absent is not None
    assert present is not None
    assert "superseded_by" not in absent[0]
    assert absent[2] == {"version_state"}
    assert present[0]["superseded_by"] is None
    assert present[2] == {"version_state", "superseded_by"}  # a null key to remove


def test_a_group_of_two_spellings_sends_what_either_lacks() -> None:
    written = payload_for(_row())
    stored = {k: v for k, v in written.items() if v is not None}
    target = PayloadTarget("hb:a", "hb:a", written, 2, ("drift",))
    compare = Differs(target)
    # Both read as the same stale variant; each lacks a different key exactly.
    one = {**stored, "version_state": "superseded", "doc_version": 1.0}
    two = {**stored, "version_state": "superseded", "effective_from": "2024-01-01T00:00:00+00:00"}
    found = [compare(one), compare(two)]
    assert found[0] is not None
    assert found[1] is not None
    assert found[0][1] == found[1][1]  # one group

    group = WriteGroup(target=target, before=found[0][0])
    group.add("p1", found[0][2])
    group.add("p2", found[1][2])

    sent = group.payload()
    assert set(sent) == {"version_state", "doc_version", "effective_from"}
    for point in (one, two):
        assert _exactly(_set_payload(point, sent)) == _exactly(_set_payload(point, written))


# -- a plan applied with what was alive before it set aside from the collector (issue 38,
# repair round 8): nothing left frozen after it, a caller's freeze as it was, the cycles that
# died meanwhile collected after --------------------------------------------------------------


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Each example starts and ends with nothing frozen (the process's state)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


@settings(max_examples=25, deadline=None)
@given(
    before=st.integers(min_value=1, max_value=5),
    inside=st.integers(min_value=0, max_value=5),
    caller_froze=st.booleans(),
    drop_before=st.booleans(),
)
def test_set_aside_freezes_what_was_alive_and_hands_it_back(
    before: int, inside: int, caller_froze: bool, drop_before: bool
) -> None:
    gc.unfreeze()  # (each example starts with nothing frozen)
    old = [Cycle() for _ in range(before)]
    if caller_froze:
        gc.freeze()
    frozen_by_caller = gc.get_freeze_count()
    dead: list[weakref.ref[Cycle]] = []
    with set_aside():
        # What was alive before is out of the collector's walk (frozen), by this or by the
        # caller; what the work allocates is walked as ever.
        assert not any(_walked(old))
        if not caller_froze:
            assert gc.get_freeze_count() > 0
        else:
            assert gc.get_freeze_count() == frozen_by_caller  # (no more frozen on top)
        new = [Cycle() for _ in range(inside)]
        assert all(_walked(new))
        dead = [weakref.ref(c) for c in new]
        if drop_before:  # a cycle alive before dies meanwhile
            dead += [weakref.ref(c) for c in old]
            old = []
        del new
        at_end = gc.get_freeze_count()  # (less what died by reference counts meanwhile)
    if caller_froze:
        assert gc.get_freeze_count() == at_end  # the caller's freeze as it was
        gc.unfreeze()
    else:
        assert gc.get_freeze_count() == 0  # nothing left frozen
        assert all(_walked(old))
    gc.collect()
    assert all(ref() is None for ref in dead)  # the cycles that died are collected after


def test_set_aside_hands_back_on_an_error(unfrozen: None) -> None:
    seen: list[int] = []

    def fail() -> None:
        with set_aside():
            seen.append(gc.get_freeze_count())
            raise RuntimeError("a failed batch")

    with pytest.raises(RuntimeError):
        fail()
    assert seen[0] > 0
    assert gc.get_freeze_count() == 0
