"""The audit's intent/confirm protocol, written once.

A writer audits what it means to write before it writes (an *intent*), and says when that is
written (a *confirmation*, whose ``after.through`` is the hash of the last intent it covers).
A run that dies between the two leaves intents without a confirmation, which the next runner
of the shard resolves by reading the points back (``writing.recovery``). The payload writes
of a plan (``applying``: the confirmation of a batch goes with the intents of the next, in
one commit), an ingestion's documents (``ingestion``) and a split store's moves (``moving``:
``move_copied``, then ``move_done``) each keep one ``IntentLog``; a re-keying (``rekeying``)
writes its one intent in the applier's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from reconciler.model import AuditEntry, AuditKind


class IntentLog:
    """One writer's intents and their confirmations, appended through ``append`` (which
    commits entries together and returns the new audit head)."""

    def __init__(
        self,
        append: Callable[[list[AuditEntry]], str],
        *,
        run_id: str,
        actor: str,
        now: Callable[[], datetime],
    ) -> None:
        self._append = append
        self.run_id = run_id
        self.actor = actor
        #: What stamps each entry: the instant it is made.
        self.now = now
        #: The hash of the last intent not yet confirmed (``None``: none is open).
        self.open: str | None = None

    def intend(self, intents: Sequence[AuditEntry], *, closing: Sequence[AuditEntry] = ()) -> str:
        """Append ``intents`` after ``closing`` (what confirms the batch before), in one
        commit; they are open until confirmed. The hash of the last."""
        self.open = self._append([*closing, *intents])
        return self.open

    def resume(self, through: str) -> str:
        """The intent audited as ``through`` by a run that died is open again in this log
        (its writes are finished, then confirmed, by the runner that resolves it)."""
        self.open = through
        return through

    def confirmation(self, kind: AuditKind = AuditKind.CONFIRM, **after: Any) -> AuditEntry:
        """The entry that confirms the open intents, ``through`` the last of them (``after``:
        what else it says); they are closed."""
        through, self.open = self.open, None
        return self.entry(kind, through, **after)

    def entry(self, kind: AuditKind, through: str | None, **after: Any) -> AuditEntry:
        """An entry of ``kind`` about the intents ``through`` a hash (its reason: the kind)."""
        return AuditEntry(
            self.run_id,
            self.now(),
            self.actor,
            str(kind),
            kind,
            self.run_id,
            None,
            {"through": through, **after},
        )
