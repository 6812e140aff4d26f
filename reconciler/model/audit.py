"""The audit log's values: the kinds of entry, an entry of the hash chain, and what verifying
the chain found."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class AuditKind(enum.StrEnum):
    """What an audit entry records (its ``target_type``): the one list of them, which the
    writers write and the audit's readers read."""

    #: A row changed (before and after).
    ROW = "row"
    #: A re-ingest request queued in the outbox.
    REINGEST = "reingest"
    #: A run, refused or forced by the guard.
    RUN = "run"
    #: The intent of a batch of payload writes (before the write) and its confirmation.
    PAYLOAD = "payload"
    CONFIRM = "confirm"
    #: An ingestion's intent to (re-)write one document.
    INGEST = "ingest"
    #: How an interrupted run's last batch ended.
    RESOLVE = "resolve"
    #: A move between a split store's collections: the intent (before the copy), the copy
    #: confirmed (read back from the destination), the points gone from the source; and how
    #: the next runner finished the moves a dead run left.
    MOVE = "move"
    MOVE_COPIED = "move_copied"
    MOVE_DONE = "move_done"
    MOVE_RESOLVE = "move_resolve"
    #: A declaration recorded (``reconciler declare``).
    DECLARATION = "declaration"
    #: A payload index created.
    INDEX = "index"
    #: A re-keying's intent (its pairs and points, before any write) and each document given
    #: its new id in the table (``reconciler rekey``).
    REKEY = "rekey"
    REKEY_ROW = "rekey_row"


@dataclass(frozen=True)
class AuditEntry:
    """One write, as recorded: who, why, what (``AuditKind``), before and after."""

    run_id: str
    at: datetime
    actor: str
    reason: str | None
    target_type: str
    target: str
    before: Any
    after: Any


@dataclass
class Verification:
    """The result of walking the audit chain."""

    entries: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the chain is intact."""
        return not self.problems
