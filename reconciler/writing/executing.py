"""One executor for every plan: what a command decided to write, applied one way.

Every writing command plans first (a frozen value, read from the stores and written nowhere)
and hands the plan to ``execute`` with an ``Applier`` for the run it is recorded as. Reconcile
plans a ``planning.Plan`` (``Repair`` carries it with what the scan kept), the next runner of
a shard a ``recovery.ResolutionPlan`` per dead run, a rollback a ``rollback_pages.PagedUndo``
per run it undoes (which pages its documents inside ``execute``), an approved saved plan
(``approving``) a ``Repair`` of the writes it saved, a re-keying a ``rekeying.Rekeying`` (its
rollback the same of its pairs swapped, the runner that finds it killed the same from its
intent); ``--dry-run`` renders the plan and executes nothing.

**The protocol a plan kind implements** (``Executable``): one method,
``execute(self, applier)``, which makes each of the plan's writes through the applier's
primitives, in the order crash safety needs:

- ``applier.table.write_rows_and_outbox``: row changes and re-ingest requests with their
  audit entries, in one transaction, the lease checked first (``applier.keep_writing``);
- ``applier.write_groups(groups)`` (points by id) or ``applier.apply(plan)``: payloads in
  batches, each batch audited as *intents* before it is sent and *confirmed* with the next
  (``intents.IntentLog``), the lease checked before each;
- ``applier.mover``: a split store's moves, audited the same way (``moving``);
- ``applier.rename_rows``: documents given new ids in one table transaction, a ``rekey_row``
  entry each, and ``applier.write_covered``: payload batches one open intent covers (a
  re-keying's, which names every point it rewrites);
- ``applier.table.append_audit`` / ``applier.intents``: any other entry (a resolution's).

``execute`` then confirms what is still open (the last payload batch, the last move), so a
plan is applied with every write covered by an entry, and returns what was written. A new
plan kind is a frozen value with that one method: no
other code changes to apply it, and its ``--dry-run`` is the value rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from reconciler.planning import Plan
from reconciler.writing.applying import Applier, ApplyResult
from reconciler.writing.differs import Located


class Executable(Protocol):
    """A plan the executor applies (see the module docstring)."""

    def execute(self, applier: Applier) -> None:
        """Make the plan's writes through ``applier``, the intent before each write."""
        ...


@dataclass(frozen=True)
class Repair:
    """Reconcile's plan, with what the check's scan kept about where drift is (so points
    are written by id: ``applying``)."""

    plan: Plan
    located: Located | None = None

    def execute(self, applier: Applier) -> None:
        """Rows and re-ingests, payloads, moves, payload indexes (``Applier.apply``)."""
        applier.apply(self.plan, located=self.located)


def execute(plan: Executable, applier: Applier) -> ApplyResult:
    """Apply ``plan`` through ``applier`` and confirm what is still open; what was written.
    A write that fails raises, its intents left as the applier recorded them (the next
    runner of the shard resolves them: ``recovery``)."""
    plan.execute(applier)
    applier.confirm()
    if applier.mover is not None:
        applier.mover.finish()
    return applier.result
