"""``reconciler split``: move an existing deployment into a split store (``[index]
archive_collection``), show what that would move first (``--dry-run``), or move every archived
chunk back into the main collection before the archive is given up (``--merge``).

Where a chunk belongs is the check's rule (``payload/misplaced``): a registered document's
chunks in the main collection when its row's state is servable (``rules.time_rule.kept_in_main``
of what ``payload_for`` derives), in the archive otherwise. The rows as they stand decide: no
source is read, no row or payload is written (``apply`` does those, and moves what its repairs
put elsewhere); chunks without a row (quarantined: never served) go to the archive. Memory
stays flat: the collection is
folded per document (the check's tally), the table streamed, the moves made ``scroll_batch``
documents at a time, a batch of points at a time (``writing.moving``), audited and under the
whole corpus's lease, as a run of its own that ``rollback`` undoes.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.app.holding import HeldLease, lease_name
from reconciler.app.operations import engine_options, lease_guard
from reconciler.app.wiring import leases_of, open_index, open_table
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import CollectionMissing, ConfigError, LeaseBusy
from reconciler.model import RunMode
from reconciler.payload import payload_for
from reconciler.pipeline.scanning import scan, table_rows
from reconciler.planning import MoveTarget
from reconciler.ports import ChunkIndex, DocumentTable, SplitIndex, split_of
from reconciler.rules.sharding import Shard
from reconciler.rules.time_rule import kept_in_main
from reconciler.settings import Settings
from reconciler.writing.moving import Mover
from reconciler.writing.recovery import resolve_interrupted
from reconciler.writing.runs import recorded

log = logging.getLogger(__name__)

__all__ = ["render_split", "split_store"]

#: The lease a split holds: the whole corpus's (it may move any family's chunks).
WHOLE = "0/1"
#: Moves listed in the output (the counts are always whole).
SAMPLE = 20


@dataclass
class _Way:
    """The moves one way: documents, families, chunks, and the chunks by state. (The table
    streams family by family, so a family is counted when it differs from the last one: no
    set of every family is kept.)"""

    documents: int = 0
    families: int = 0
    points: int = 0
    by_state: Counter[str] = field(default_factory=Counter)
    last_family: str | None = None

    def count(self, family: str, state: str, points: int) -> None:
        self.documents += 1
        self.families += family != self.last_family
        self.last_family = family
        self.points += points
        self.by_state[state] += points

    def to_json(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "families": self.families,
            "points": self.points,
            "by_state": dict(sorted(self.by_state.items())),
        }


def split_store(
    settings: Settings,
    *,
    dry_run: bool = False,
    merge: bool = False,
    lease_renew_every: float = 30.0,
    clock: Clock = SYSTEM_CLOCK,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Move each misplaced chunk into the collection its row's state puts it in (``merge``:
    every archived chunk back into the main collection), or with ``dry_run`` say what would
    move; see the module docstring."""
    if settings.index.archive_collection is None:
        raise ConfigError(
            [
                (
                    "index.archive_collection",
                    "is not set: `reconciler split` moves chunks into the archive collection it "
                    'names; set it (e.g. "corpus_archive") first',
                )
            ],
            origin=settings.origin,
        )
    table = open_table(settings)
    try:
        index = open_index(settings, refuse_foreign_archive=True)
        try:
            split = split_of(index)
            assert split is not None
            if not index.exists():
                raise CollectionMissing(
                    f"collection {settings.index.collection!r} does not exist: nothing to split "
                    "(run `reconciler ingest` first)"
                )
            if dry_run:
                return _planned(settings, table, index, split, merge, progress)
            lease = leases_of(table)(lease_name(WHOLE), clock=clock)
            with HeldLease(lease, renew_every=lease_renew_every, clock=clock) as held:
                if not held.acquired:
                    raise LeaseBusy(
                        f"another runner holds the lease of shard {WHOLE} or a shard's (a run "
                        "of any shard, an apply, an ingestion or a rollback)"
                        f"{held.busy}; nothing was moved: run it again when that one has ended"
                    )
                resolve_interrupted(table=table, index=index, shard=WHOLE)
                guard = lease_guard(held, Shard())
                return _moved(settings, table, index, split, merge, clock, guard, progress)
        finally:
            index.close()
    finally:
        table.close()


def _placements(
    settings: Settings,
    table: DocumentTable,
    index: ChunkIndex,
    ways: Mapping[bool, _Way],
    progress: Callable[[str, int], None] | None,
) -> Iterator[list[MoveTarget]]:
    """The moves the rows ask for, ``scroll_batch`` documents at a time (each way counted in
    ``ways``, by ``to_archive``)."""
    options = engine_options(settings, mode="check", actor="split")
    # (where each chunk is and whose: doc_id and doc_family_id read, no payload compared)
    folded = scan(table, index, options, None, progress=progress, placement=True).chunks
    targets = []
    for row in table_rows(table, options):
        chunks = folded.get(row.doc_id)
        if chunks is None:
            continue
        state = payload_for(row)["version_state"]
        kept = kept_in_main(state)
        points = chunks.archived if kept else chunks.count - chunks.archived
        if not points:
            continue
        ways[not kept].count(row.doc_family_id, state, points)
        targets.append(
            MoveTarget(row.doc_id, row.doc_family_id, not kept, points, ("payload/misplaced",))
        )
        if len(targets) >= options.scroll_batch:
            yield targets
            targets = []
    for orphan_id, chunks in folded.orphans():  # (chunks without a row: never served)
        points = chunks.count - chunks.archived
        if orphan_id is None or not points:
            continue
        family = next((dict(v).get("doc_family_id") for v in chunks.variants), None)
        ways[True].count(str(family), "(no row)", points)
        targets.append(MoveTarget(orphan_id, str(family), True, points, ("payload/misplaced",)))
    if targets:
        yield targets


def _planned(
    settings: Settings,
    table: DocumentTable,
    index: ChunkIndex,
    split: SplitIndex,
    merge: bool,
    progress: Callable[[str, int], None] | None,
) -> dict[str, Any]:
    """What ``split`` would move (nothing is written)."""
    ways = {True: _Way(), False: _Way()}
    sample: list[MoveTarget] = []
    if merge:
        ways[False].points = split.archive.count() if split.archive.exists() else 0
    else:
        for targets in _placements(settings, table, index, ways, progress):
            sample += targets[: SAMPLE - len(sample)]
    return _result(split, ways, sample, merge=merge, run_id=None)


def _moved(
    settings: Settings,
    table: DocumentTable,
    index: ChunkIndex,
    split: SplitIndex,
    merge: bool,
    clock: Clock,
    keep_writing: Callable[[], None],
    progress: Callable[[str, int], None] | None,
) -> dict[str, Any]:
    """Make the moves, audited, as a run of their own."""
    ways = {True: _Way(), False: _Way()}
    sample: list[MoveTarget] = []
    with recorded(table, mode=RunMode.SPLIT, actor="split", shard=WHOLE) as record:
        mover = Mover(
            table=table,
            split=split,
            run_id=record.run_id,
            actor="split",
            batch_points=settings.index.scroll_batch,
            scroll_batch=settings.index.scroll_batch,
            keep_writing=keep_writing,
            progress=(lambda n: progress("moved", n)) if progress is not None else None,
            clock=clock,
        )
        try:
            if merge:
                ways[False].points = mover.move_all(
                    to_archive=False, reason="reconciler split --merge"
                )
            else:
                for targets in _placements(settings, table, index, ways, progress):
                    sample += targets[: SAMPLE - len(sample)]
                    for to_archive in (True, False):
                        mover.move_targets(targets, to_archive=to_archive)
            mover.finish()
        except BaseException:
            if mover.open_intent is not None:
                record.counts["unconfirmed"] = mover.open_intent  # for the next runner
            record.counts.update(moves=mover.moved, audit_head=mover.audit_head)
            raise
        record.counts = {"moves": mover.moved, "audit_head": mover.audit_head}
    log.info("split %s: %d point(s) moved", "(merge)" if merge else "", mover.moved)
    return _result(split, ways, sample, merge=merge, run_id=record.run_id, moved=mover.moved)


def _result(
    split: SplitIndex,
    ways: Mapping[bool, _Way],
    sample: list[MoveTarget],
    *,
    merge: bool,
    run_id: str | None,
    moved: int | None = None,
) -> dict[str, Any]:
    main, archive = split.collections
    return {
        "run_id": run_id,
        "dry_run": run_id is None,
        "merge": merge,
        "main": main,
        "archive": archive,
        "to_archive": ways[True].to_json(),
        "to_main": ways[False].to_json(),
        "moved": moved,
        "moves": [
            {
                "doc_id": t.doc_id,
                "family": t.family,
                "points": t.points,
                "from": main if t.to_archive else archive,
                "to": archive if t.to_archive else main,
            }
            for t in sample
        ],
    }


def render_split(data: Mapping[str, Any]) -> str:
    """The split's result for a person."""
    main, archive = data["main"], data["archive"]
    verb = "would move" if data["dry_run"] else "moved"
    lines = [f"split store: main collection {main!r}, archive {archive!r}"]
    for key, where in (("to_archive", archive), ("to_main", main)):
        way = data[key]
        if data["merge"] and key == "to_archive":
            continue
        states = ", ".join(f"{n} {s}" for s, n in way["by_state"].items())
        whose = (
            f" of {way['documents']} document(s) in {way['families']} family(ies)"
            if way["documents"]
            else ""
        )
        lines.append(
            f"{verb} {way['points']} chunk(s){whose} to {where!r}"
            + (f" ({states})" if states else "")
        )
    for move in itertools.islice(data["moves"], SAMPLE):
        lines.append(f"  {move['doc_id']}: {move['points']} chunk(s) -> {move['to']}")
    if data["dry_run"]:
        lines.append(
            "nothing was written; `reconciler split"
            + (" --merge" if data["merge"] else "")
            + "` makes these moves (audited, vectors copied as they are; `reconciler rollback "
            "RUN_ID` moves them back)"
        )
    elif data["moved"]:
        lines.append(
            f"run {data['run_id']}: `reconciler rollback {data['run_id']}` moves them back"
        )
    return "\n".join(lines)
