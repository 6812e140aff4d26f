"""A dry run is the real run against stores whose writes stay in memory.

``dry_stores(table, index)`` wraps both stores: every write a rollback (or the resolution of
an interrupted run before it) makes changes only an overlay, and every read it makes sees the
real store under that overlay. So ``rollback --dry-run`` executes the code of the real
rollback, step by step: the second rollback of a cascade reads the rows the first restored,
a point counts only when it still differs, a resolved run reads as ``interrupted``, and what
the dry run reports is what the real one does. Nothing reaches a store.

A split store's two collections are overlaid apart (``SplitIndex.with_parts``): a dry move
copies a point into the one overlay and deletes it from the other.

Only what that code reads is overlaid; any other method (a read the overlay would not keep
true, or a write it does not hold) raises ``AttributeError`` naming it, so a new call in the
rollback fails its tests instead of writing during a dry run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, cast

from reconciler.model import (
    AuditEntry,
    ChunkState,
    Declaration,
    Document,
    PayloadWrite,
    ReingestRequest,
    RowChange,
    VersionState,
)
from reconciler.ports import ChunkIndex, DocumentTable, RunEntry, split_of
from reconciler.ports.index import StoredPoint

#: Reads of the real table that no dry write changes: passed through as they are.
TABLE_READS = frozenset({"pending_reingest_for", "run_ids_starting", "close"})
#: Reads of the real index that no payload write changes.
INDEX_READS = frozenset(
    {"supports_payload_indexes", "payload_indexes", "keys", "close", "vector_layout", "collection"}
)
#: A dry revocation's instant, where the overlay needs one.
DRY_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
#: Audit entry types that ``runs_touching_after`` counts (as the stores do).
TOUCHING = frozenset({"row", "payload"})


@dataclass
class DryRunEntry:
    """A run as the dry stores read it: a run a dry run started, or a real one it ended."""

    run_id: str
    mode: str
    actor: str
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    shard: str | None = None
    job: str | None = None
    checks: str | None = None
    counts: dict[str, Any] | None = None
    error: str | None = None

    @classmethod
    def of(cls, run: RunEntry) -> DryRunEntry:
        """A copy of a recorded run."""
        return cls(
            run.run_id,
            run.mode,
            run.actor,
            run.status,
            run.started_at,
            run.finished_at,
            run.shard,
            run.job,
            run.checks,
            dict(run.counts or {}),
            run.error,
        )


class DryTable:
    """The document table under a dry run's overlay of rows, runs and audit entries."""

    def __init__(self, table: DocumentTable) -> None:
        self._table = table
        self._rows: dict[str, Document | None] = {}
        self._runs: dict[str, DryRunEntry] = {}
        #: The dry audit entries, in order, each with its (made-up) hash.
        self._audit: list[tuple[AuditEntry, str]] = []
        #: Declarations the dry run revoked (True) or restored (False), by id.
        self._revoked: dict[str, bool] = {}

    def __getattr__(self, name: str) -> Any:
        if name in TABLE_READS:
            return getattr(self._table, name)
        raise AttributeError(f"a dry run does not keep {name!r} true: it may not call it")

    # -- rows ----------------------------------------------------------------------------------

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """The rows as the dry run left them."""
        wanted = set(doc_ids)
        found = self._table.get_documents(wanted - set(self._rows))
        for doc_id in wanted & set(self._rows):
            row = self._rows[doc_id]
            if row is not None:
                found[doc_id] = row
        return found

    def write_rows_and_outbox(
        self,
        *,
        run_id: str,
        actor: str,
        changes: Sequence[RowChange],
        reingests: Sequence[tuple[ReingestRequest, str]],
        at: datetime,
    ) -> tuple[str, int]:
        """Change the overlaid rows (a row that does not exist stays absent) and audit it."""
        rows = self.get_documents(c.doc_id for c in changes)
        for change in changes:
            row = rows.get(change.doc_id)
            if row is None:
                self._rows[change.doc_id] = None
                continue
            values = dict(change.after)
            if values.get("version_state") is not None:
                values["version_state"] = VersionState(values["version_state"])
            rows[change.doc_id] = self._rows[change.doc_id] = replace(row, **values, updated_at=at)
        entries = [
            AuditEntry(run_id, at, actor, c.reason, "row", c.doc_id, c.before, c.after)
            for c in changes
        ]
        pending = self._table.pending_reingest_for({r.doc_id for r, _reason in reingests})
        queued = {r.doc_id for r, _reason in reingests} - pending
        return self._append(entries), len(queued)

    # -- declarations --------------------------------------------------------------------------

    def declarations(
        self, *, active: bool = True, ids: Iterable[str] | None = None
    ) -> list[Declaration]:
        """The declarations as the dry run left them (none is added by a rollback)."""
        found = []
        for decl in self._table.declarations(active=False, ids=ids):
            if decl.id in self._revoked:
                revoked = self._revoked[decl.id]
                decl = replace(
                    decl,
                    revoked_at=(decl.revoked_at or DRY_INSTANT) if revoked else None,
                    revoked_by=(decl.revoked_by or "dry") if revoked else None,
                )
            if decl.revoked_at is None or not active:
                found.append(decl)
        return found

    def write_declarations(
        self,
        *,
        run_id: str,
        actor: str,
        at: datetime,
        added: Sequence[Declaration] = (),
        revoked: Sequence[str] = (),
        restored: Sequence[str] = (),
        reason: str | None = None,
    ) -> str:
        """Revoke and restore in the overlay, and audit it (a rollback adds none)."""
        if added:
            raise AttributeError("a dry run does not record declarations")
        current = {d.id: d for d in self.declarations(active=False, ids=[*revoked, *restored])}
        entries = []
        for ids, revoking in ((revoked, True), (restored, False)):
            for decl_id in ids:
                decl = current.get(decl_id)
                if decl is None or (decl.revoked_at is None) is not revoking:
                    continue
                self._revoked[decl_id] = revoking
                after = replace(
                    decl,
                    revoked_at=at if revoking else None,
                    revoked_by=run_id if revoking else None,
                )
                entries.append(
                    AuditEntry(
                        run_id,
                        at,
                        actor,
                        reason,
                        "declaration",
                        decl_id,
                        decl.to_json(),
                        after.to_json(),
                    )
                )
        return self._append(entries) if entries else ""

    # -- the run log ---------------------------------------------------------------------------

    def start_run(
        self,
        *,
        mode: str,
        actor: str,
        forced: bool = False,
        shard: str | None = None,
        status: str = "running",
        run_id: str | None = None,
        job: str | None = None,
        checks: str | None = None,
    ) -> str:
        """Start a run that only the dry stores know."""
        run_id = run_id or f"dry-run-{len(self._runs) + 1}"
        self._runs[run_id] = DryRunEntry(
            run_id, mode, actor, status, datetime.now(UTC), None, shard, job or mode, checks
        )
        return run_id

    def get_run(self, run_id: str) -> RunEntry | None:
        """The run as the dry run left it."""
        return self._runs.get(run_id) or self._table.get_run(run_id)

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        counts: Mapping[str, Any] | None = None,
        error: str | None = None,
        **stats: float,
    ) -> None:
        """End a run in the overlay (never over ``interrupted``, as the stores hold it)."""
        run = self._run(run_id)
        if run is not None and run.status != "interrupted":
            self._runs[run_id] = replace(
                run,
                status=status,
                finished_at=datetime.now(UTC),
                counts=dict(counts or {}),
                error=error,
            )

    def set_run_counts(self, run_id: str, counts: Mapping[str, Any]) -> None:
        """Replace a run's counts in the overlay."""
        run = self._run(run_id)
        if run is not None:
            self._runs[run_id] = replace(run, counts=dict(counts))

    def _run(self, run_id: str) -> DryRunEntry | None:
        run = self.get_run(run_id)
        return None if run is None else self._runs.get(run_id) or DryRunEntry.of(run)

    def runs_to_resolve(self, *, shard: str) -> list[tuple[str, str]]:
        """Runs of ``shard`` recorded as running, and failed runs that left a payload batch
        unconfirmed, as the dry run left them (oldest first)."""
        found = []
        for run_id, status in self._table.runs_to_resolve(shard=shard):
            run = self._runs.get(run_id)
            if run is None:
                found.append((run_id, status))
            elif run.status == "running" or (run.counts or {}).get("unconfirmed"):
                found.append((run_id, run.status))
        return found

    def rollbacks(self) -> dict[str, str]:
        """Succeeded rollback runs, the dry ones included, and the run each rolled back."""
        found = dict(self._table.rollbacks())
        for run in self._runs.values():
            undone = (run.counts or {}).get("rolled_back")
            if run.mode == "rollback" and run.status == "succeeded" and undone:
                found[run.run_id] = undone
        return found

    # -- the audit log -------------------------------------------------------------------------

    def append_audit(self, entries: Sequence[AuditEntry]) -> str:
        """Append to the dry log; the head is a hash no real entry has."""
        return self._append(entries)

    def _append(self, entries: Sequence[AuditEntry]) -> str:
        for entry in entries:
            seed = f"{len(self._audit)}:{entry.run_id}:{entry.target_type}:{entry.target}"
            self._audit.append((entry, "dry:" + hashlib.sha256(seed.encode()).hexdigest()))
        return self._audit[-1][1] if entries else ""

    def run_entries_with_hashes(self, run_id: str) -> tuple[list[AuditEntry], list[str]]:
        """A run's entries: the recorded ones, then those of the dry run."""
        entries, hashes = self._table.run_entries_with_hashes(run_id)
        for entry, entry_hash in self._audit:
            if entry.run_id == run_id:
                entries.append(entry)
                hashes.append(entry_hash)
        return entries, hashes

    def runs_touching_after(self, entry_hash: str, targets: set[str], *, exclude: str) -> list[str]:
        """Runs that wrote one of ``targets`` after ``entry_hash``, newest first: the dry
        run's own (all of them later than any recorded entry), then the recorded ones."""
        hashes = [h for _entry, h in self._audit]
        start = hashes.index(entry_hash) + 1 if entry_hash in hashes else 0
        dry: list[str] = []
        for entry, _hash in reversed(self._audit[start:]):
            if entry.run_id in dry or entry.run_id == exclude:
                continue
            if entry.target_type in TOUCHING and entry.target in targets:
                dry.append(entry.run_id)
        if entry_hash in hashes:
            return dry
        recorded = self._table.runs_touching_after(entry_hash, targets, exclude=exclude)
        return dry + [run_id for run_id in recorded if run_id not in dry]


class DryIndex:
    """The chunk index under a dry run's overlay of payload writes (and of a split store's
    moves: the points copied in, the points deleted)."""

    def __init__(self, index: ChunkIndex) -> None:
        self._index = index
        #: point id (as text) -> the managed keys the dry run set on it.
        self._payloads: dict[str, dict[str, Any]] = {}
        #: point id (as text) -> a point a dry move copied in; the ids it deleted.
        self._added: dict[str, StoredPoint] = {}
        self._deleted: set[str] = set()
        self._created = False

    def __getattr__(self, name: str) -> Any:
        if name in INDEX_READS:
            return getattr(self._index, name)
        raise AttributeError(f"a dry run does not keep {name!r} true: it may not call it")

    def exists(self) -> bool:
        """Whether the collection exists, or a dry move created it."""
        return self._created or self._index.exists()

    def _real(self, point_ids: Sequence[str | int]) -> list[str | int]:
        if not self._index.exists():
            return []
        return [p for p in point_ids if str(p) not in self._deleted and str(p) not in self._added]

    def retrieve(self, point_ids: Sequence[str | int]) -> list[ChunkState]:
        """The points as the dry run left them."""
        found = list(self._index.retrieve(self._real(point_ids)))
        keys = self._index.keys
        for pid in point_ids:
            added = self._added.get(str(pid))
            if added is not None:
                payload = keys.from_point(added.payload)
                found.append(
                    ChunkState(pid, payload.get("doc_id"), payload.get("chunk_id"), payload)
                )
        for at, state in enumerate(found):
            written = self._payloads.get(str(state.point_id))
            if written is not None:
                payload = {**state.payload, **written}
                found[at] = replace(state, doc_id=payload.get("doc_id"), payload=payload)
        return found

    def read_points(self, point_ids: Sequence[str | int]) -> list[StoredPoint]:
        """Whole points as the dry run left them (its payload writes merged in)."""
        found = list(self._index.read_points(self._real(point_ids)))
        found += [self._added[str(p)] for p in point_ids if str(p) in self._added]
        keys = self._index.keys
        return [
            replace(p, payload=_merged(p.payload, keys.nest_key, keys.to_stored(written)))
            if (written := self._payloads.get(str(p.point_id)))
            else p
            for p in found
        ]

    def set_payloads(self, writes: Sequence[PayloadWrite], *, batch_size: int = 256) -> int:
        """Merge the payloads into the overlay; return the points written."""
        points = 0
        for write in writes:
            for point_id in write.point_ids:
                self._payloads.setdefault(str(point_id), {}).update(write.payload)
                points += 1
        return points

    def ensure_layout(
        self, layout: Mapping[str, Any], *, indexes: Mapping[str, str] | None = None
    ) -> None:
        """A dry move creates the collection in the overlay."""
        self._created = True

    def copy_points(self, points: Sequence[StoredPoint]) -> int:
        """Copy whole points into the overlay."""
        for point in points:
            self._added[str(point.point_id)] = point
            self._deleted.discard(str(point.point_id))
            self._payloads.pop(str(point.point_id), None)
        return len(points)

    def delete_points(self, point_ids: Sequence[str | int]) -> int:
        """Delete points in the overlay."""
        for point_id in point_ids:
            self._added.pop(str(point_id), None)
            self._payloads.pop(str(point_id), None)
            self._deleted.add(str(point_id))
        return len(point_ids)


def _merged(
    payload: Mapping[str, Any], nest: str | None, keys: Mapping[str, Any]
) -> dict[str, Any]:
    """A whole payload with stored keys set at the nested object ``nest`` (a null removes)."""
    merged = dict(payload)
    node = merged
    for part in nest.split(".") if nest else ():
        child = dict(node.get(part) or {})
        node[part] = child
        node = child
    for key, value in keys.items():
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value
    return merged


def dry_stores(table: DocumentTable, index: ChunkIndex) -> tuple[DocumentTable, ChunkIndex]:
    """The two stores under one dry run (see the module docstring)."""
    split = split_of(index)
    if split is not None:
        parts = cast(ChunkIndex, DryIndex(split.main)), cast(ChunkIndex, DryIndex(split.archive))
        return cast(DocumentTable, DryTable(table)), split.with_parts(*parts)
    return cast(DocumentTable, DryTable(table)), cast(ChunkIndex, DryIndex(index))


def is_dry(table: DocumentTable) -> bool:
    """Whether ``table`` is a dry run's."""
    return isinstance(table, DryTable)
