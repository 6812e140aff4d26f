"""A ``declare`` run's own writes: the declarations it makes, recorded with their audit entries
before its plan is written (``pipeline.recording``), and revoked or restored by a rollback.

Crash order: the declarations and their audit entries commit in one transaction, before any
row or payload changes. A process killed after it leaves declarations that every later run
reads, so the next run writes what this one did not (or ``rollback`` of this run, marked
``interrupted``, revokes them and undoes what it wrote).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from reconciler.model import Declaration
from reconciler.ports import DeclarationWriter


def record_declarations(
    table: DeclarationWriter,
    declarations: Sequence[Declaration],
    *,
    run_id: str,
    actor: str,
    at: datetime,
) -> str:
    """Record ``declarations`` as made by run ``run_id``; return the new audit head."""
    if not declarations:
        return ""
    return table.write_declarations(
        run_id=run_id,
        actor=actor,
        at=at,
        # (made with this run's id already when ``declare`` made them: kept as they are)
        added=[
            d if d.run_id == run_id else dataclasses.replace(d, run_id=run_id) for d in declarations
        ],
    )


def undo_declarations(
    table: DeclarationWriter,
    *,
    run_id: str,
    actor: str,
    at: datetime,
    revoked: Sequence[str],
    restored: Sequence[str],
    reason: str,
) -> str:
    """Revoke the declarations a rolled-back run made (``revoked``), and restore those it
    revoked (``restored``: the rollback of a rollback)."""
    if not revoked and not restored:
        return ""
    return table.write_declarations(
        run_id=run_id, actor=actor, at=at, revoked=revoked, restored=restored, reason=reason
    )
