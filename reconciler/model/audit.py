"""The audit log's values: the kinds of entry, an entry of the hash chain, a batch's payload
intents as one entry and back, and what verifying the chain found."""

from __future__ import annotations

import enum
from collections.abc import Sequence
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
    #: The payload intents of one batch in one entry (``page_entry``): read back, it is the
    #: one ``PAYLOAD`` intent of each of its documents (``documents_of``).
    PAYLOAD_PAGE = "payload_page"
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


#: The target of a ``PAYLOAD_PAGE`` entry (its documents are in its body, and in the table
#: that finds an entry by its documents).
PAGE_TARGET = "(page)"


def page_entry(intents: Sequence[AuditEntry]) -> AuditEntry:
    """The ``PAYLOAD`` intents of one batch (one run, one instant) as one ``PAYLOAD_PAGE``
    entry: its ``before`` lists each document's target, reason, points and payload before,
    its ``after`` each one's payload after, in the same order."""
    first = intents[0]
    return AuditEntry(
        run_id=first.run_id,
        at=first.at,
        actor=first.actor,
        reason=str(AuditKind.PAYLOAD_PAGE),
        target_type=AuditKind.PAYLOAD_PAGE,
        target=PAGE_TARGET,
        before={
            "documents": [
                {
                    "target": e.target,
                    "reason": e.reason,
                    "points": e.before["points"],
                    "payload": e.before["payload"],
                }
                for e in intents
            ]
        },
        after={"payloads": [e.after["payload"] for e in intents]},
    )


def documents_of(entry: AuditEntry) -> list[AuditEntry]:
    """An entry as its readers take it: a ``PAYLOAD_PAGE`` entry is the ``PAYLOAD`` intent of
    each of its documents (as they were written one entry a document), any other is itself."""
    if entry.target_type != AuditKind.PAYLOAD_PAGE:
        return [entry]
    documents = entry.before["documents"]
    payloads = entry.after["payloads"]
    return [
        AuditEntry(
            run_id=entry.run_id,
            at=entry.at,
            actor=entry.actor,
            reason=document["reason"],
            target_type=AuditKind.PAYLOAD,
            target=document["target"],
            before={"points": document["points"], "payload": document["payload"]},
            after={"payload": payload},
        )
        for document, payload in zip(documents, payloads, strict=True)
    ]


def page_targets(entry: AuditEntry) -> list[str]:
    """The documents a ``PAYLOAD_PAGE`` entry is about (none for any other entry)."""
    if entry.target_type != AuditKind.PAYLOAD_PAGE:
        return []
    return [document["target"] for document in entry.before["documents"]]
