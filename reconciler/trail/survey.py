"""The first of the two passes over the audit log behind ``reconciler audit served`` and
``audit history``: while the chain is walked and verified, note what an answer will rest on
(the log's first and last instants, its entries, those it cannot read a payload from) and
which documents the scope asks about. The second pass (``replay``) reads only those
documents' entries and their runs' again, so memory follows the families asked about, never
the log's length.

A family is asked about through every document whose payload (before or after a write,
recorded by an ingestion) or row named it anywhere in the log: a document that moved between
families is replayed whole, and ``answers`` keeps the points that were in the family at the
instant asked about. A document renamed by a re-keying (``rekey``, ``rekey_row``) is asked
about under every id it had, and that re-keying's run is replayed with it; the survey keeps
the log's renames (two ids a renamed document), nothing more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.model import AuditEntry, AuditKind, rfc3339
from reconciler.ports.table import ChainedEntry

#: Entry types an answer reads; the rest (rows, re-ingest requests, indexes, a forced run)
#: change no payload. A re-keying (``rekey``: its intent, ``rekey_row``: each document
#: renamed) is read: a document's points answer under its old id until its row is renamed,
#: under the new one from then on.
READ = frozenset(
    {
        AuditKind.PAYLOAD,
        AuditKind.INGEST,
        AuditKind.CONFIRM,
        AuditKind.RESOLVE,
        AuditKind.REKEY,
        AuditKind.REKEY_ROW,
    }
)
#: Entry types known to change no payload (a split store's moves carry a point whole from one
#: collection to the other: the answer follows points by id, wherever they are; ``audit``: a
#: seal of the chain, ``reconciler audit seal``).
NO_PAYLOAD = frozenset(
    {
        "row",
        "reingest",
        "index",
        "run",
        "declaration",
        "audit",
        AuditKind.MOVE,
        AuditKind.MOVE_COPIED,
        AuditKind.MOVE_DONE,
        AuditKind.MOVE_RESOLVE,
    }
)
#: How far an entry may be stamped before the latest one ahead of it and still count as in
#: order (parallel shards stamp an entry before they wait for the chain's head).
SLACK = timedelta(minutes=1)
#: How many look-alike family ids a survey keeps (``Survey.near``).
NEAR = 10


@dataclass
class Survey:
    """What a walk of the whole chain saw, and the documents a scope asks about."""

    families: frozenset[str]
    docs: frozenset[str]
    entries: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    #: Entries stamped more than ``SLACK`` before an entry ahead of them in the chain.
    out_of_order: int = 0
    #: Ingestion intents that did not record the payload they wrote (older versions).
    ingests_without_payload: int = 0
    #: Entry types this version does not know (written by a newer one): not read.
    unknown_types: Counter[str] = field(default_factory=Counter)
    #: The documents the scope asks about.
    asked: set[str] = field(default_factory=set)
    #: Families the log names that look like one asked about (one is a part of the other),
    #: at most ``NEAR`` of them: what a mistyped ``--family`` may have meant.
    near: set[str] = field(default_factory=set)
    #: Re-keying runs about a document asked about: their entries (the intent, its
    #: confirmation) are replayed with the documents'.
    runs: set[str] = field(default_factory=set)
    #: Every rename the log holds (old id -> new ids, and back): a document asked about under
    #: one of its ids is asked about under all of them.
    renamed: dict[str, set[str]] = field(default_factory=dict)
    #: Every re-keying run the log holds.
    rekeys: set[str] = field(default_factory=set)

    def see(self, chained: ChainedEntry) -> None:
        """One entry of the walk (an unreadable one is the walk's problem, not counted)."""
        entry = chained.entry
        if entry is None:
            return
        self.entries += 1
        if self.first_at is None:
            self.first_at = entry.at
        if self.last_at is not None and entry.at < self.last_at - SLACK:
            self.out_of_order += 1
        self.last_at = entry.at if self.last_at is None else max(self.last_at, entry.at)
        kind = entry.target_type
        if kind not in READ and kind not in NO_PAYLOAD:
            self.unknown_types[kind] += 1
        if kind == AuditKind.INGEST and "payload" not in (entry.after or {}):
            self.ingests_without_payload += 1
        if entry.target in self.docs or (self.families and self._names_family(entry)):
            self.asked.add(entry.target)
        if kind in (AuditKind.REKEY, AuditKind.REKEY_ROW):
            self._rekeyed(entry)

    def _rekeyed(self, entry: AuditEntry) -> None:
        """A re-keying's intent or one of its renames: the ids it renames are one document's,
        and the run is replayed when it names (renames, or relinks) one asked about."""
        if entry.target_type == AuditKind.REKEY:
            pairs = [
                (p.get("old_id"), p.get("new_id")) for p in (entry.after or {}).get("pairs", [])
            ]
            linked = set((entry.before or {}).get("points") or {})
        else:
            pairs = [((entry.before or {}).get("doc_id"), entry.target)]
            linked = set()
        self.rekeys.add(entry.run_id)
        for old, new in pairs:
            if isinstance(old, str) and isinstance(new, str):
                self.renamed.setdefault(old, set()).add(new)
                self.renamed.setdefault(new, set()).add(old)
        named = {i for pair in pairs for i in pair if isinstance(i, str)} | linked
        if named & (self.asked | self.docs):
            self.runs.add(entry.run_id)
            self.asked |= self.linked(named & (self.asked | self.docs))

    def linked(self, ids: Iterable[str]) -> set[str]:
        """``ids`` and every id the renames of the log seen so far link them to."""
        found: set[str] = set()
        todo = list(ids)
        while todo:
            doc = todo.pop()
            found.add(doc)
            todo += [other for other in self.renamed.get(doc, ()) if other not in found]
        return found

    def _names_family(self, entry: AuditEntry) -> bool:
        kind = entry.target_type
        if kind == AuditKind.PAYLOAD:
            found = [_family(entry.before, "payload"), _family(entry.after, "payload")]
        elif kind == AuditKind.INGEST:
            found = [_family(entry.after, "payload")]
        elif kind == "row":
            found = [_field(entry.before), _field(entry.after)]
        else:
            return False
        named = [family for family in found if family is not None]
        if len(self.near) < NEAR:
            for family in named:
                if family not in self.families and any(
                    family.lower() in f.lower() or f.lower() in family.lower()
                    for f in self.families
                ):
                    self.near.add(family)
        return any(family in self.families for family in named)

    def log_json(self) -> dict[str, Any]:
        """The log as the answer saw it."""
        return {
            "entries": self.entries,
            "verified": True,
            "first_at": rfc3339(self.first_at) if self.first_at else None,
            "last_at": rfc3339(self.last_at) if self.last_at else None,
            "out_of_order": self.out_of_order,
            "ingests_without_payload": self.ingests_without_payload,
            "not_read": dict(sorted(self.unknown_types.items())),
        }


def _family(value: Any, key: str) -> str | None:
    inner = value.get(key) if isinstance(value, dict) else None
    return _field(inner)


def _field(value: Any) -> str | None:
    family = value.get("doc_family_id") if isinstance(value, dict) else None
    return str(family) if family is not None else None
