"""Saved plans: what a refused run held back, approved by a person as it is; what a forced or
approved run set out to write, finished by the next runner when its process died.

A refused run saves the writes it held back (``save_plan``): per document the row's fields
before and after, the payload its chunks get, its re-ingest request and a split store's
move, with the fingerprint of the document's chunks (their ids and managed payloads) and the
audit head the plan was computed against. ``reconciler apply --plan ID`` (``apply_saved``)
applies exactly those writes through the ``Applier``, audited ("approved plan ID"), and only
when nothing it would write has moved since: every row still holds its values before and
every chunk its fingerprint (``moved_documents``); a plan applied already, or expired
(``guard.plan_ttl``), is refused. A plan is claimed (``pending`` -> ``applying``) in one
conditional update before its first write, so it is applied at most once.

A forced run saves its whole plan the same way, ``applying`` by itself (authorized by
``force``). When a forced or approving run dies, the runner that resolves it
(``recovery``) finishes its plan under the same authorization (``finish_authorized``): the
rows still at their values before are written, the rows at their values after are left as
they are, a row someone else changed since is left to the next run (which weighs it), and
every chunk is re-read and written only where it differs (a payload-only write whose row
changed since is left too). Until then the run's rows and
chunks may disagree: ``reconciler status`` names such a plan.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import PlanRefused
from reconciler.model import (
    AuditEntry,
    AuditKind,
    Document,
    RunMode,
    RunStatus,
    jsonable,
)
from reconciler.payload import payload_for
from reconciler.planning import Plan
from reconciler.ports import ChunkIndex, DocumentTable, SavedPlan
from reconciler.writing.applying import Applier, ApplyResult
from reconciler.writing.executing import Repair, execute
from reconciler.writing.plan_bodies import (
    chunk_fingerprints,
    digest,
    plan_body,
    plan_from_body,
    row_values,
)
from reconciler.writing.runs import recorded

log = logging.getLogger(__name__)

#: A plan waiting for a person's approval; being written by ``applied_run``; written; one the
#: stores moved past, or that expired, before anyone approved it.
PENDING, APPLYING, APPLIED, STALE, EXPIRED = "pending", "applying", "applied", "stale", "expired"
#: The whole corpus's shard.
WHOLE_SHARD = "0/1"
#: Who may write a plan: a person's approval (``apply --plan``), or ``--force``.
APPROVAL, FORCE = "approval", "force"
#: The most documents a saved plan holds (one JSON value, about 1.1 kB a document).
MAX_DOCUMENTS = 50_000


def approve_command(plan_id: str) -> str:
    """The command that approves a saved plan (named by the refusal, the alert and status)."""
    return f"reconciler apply --plan {plan_id}"


# -- saving ------------------------------------------------------------------------------------


def save_plan(
    table: DocumentTable,
    index: ChunkIndex,
    plan: Plan,
    *,
    run_id: str,
    shard: str,
    now: datetime,
    ttl: timedelta,
    hidden: Collection[str] = (),
    authorized_by: str = APPROVAL,
    batch: int = 1000,
    declarations: Collection[str] = (),
) -> str | None:
    """Save ``plan`` (a refused run's held part, ``pending``; a forced run's whole plan,
    ``applying`` by itself); its id, or ``None`` when it writes no document. The same held
    writes over the same stores, refused again by the next run, keep the first id. A forced
    ``declare`` run's plan names its ``declarations``: it is finished only if they were
    recorded (``finish_authorized_plans``)."""
    body = plan_body(plan, {})
    documents = body["documents"]
    if not documents:
        return None
    if len(documents) > MAX_DOCUMENTS:
        log.warning(
            "run %s: its plan writes %d documents, more than a saved plan holds (%d): not "
            "saved (a refusal is then approved with --force; a forced run killed is not "
            "finished under its authorization)",
            run_id,
            len(documents),
            MAX_DOCUMENTS,
        )
        return None
    if authorized_by == APPROVAL:  # (an approval checks the chunks it was shown)
        body = plan_body(plan, chunk_fingerprints(index, list(documents), batch=batch))
    if declarations:
        body["declarations"] = sorted(declarations)
    forced = authorized_by == FORCE
    return table.save_plan(
        {
            "plan_id": str(uuid.uuid4()),
            "run_id": run_id,
            "shard": shard,
            "status": APPLYING if forced else PENDING,
            "authorized_by": authorized_by,
            "created_at": now,
            "expires_at": now + ttl,
            "applied_run": run_id if forced else None,
            "applied_at": now if forced else None,
            "audit_head": "",  # (the table's head as it saves the plan)
            "fingerprint": digest([shard, authorized_by, body]),
            "documents": len(documents),
            "hidden": len(set(hidden) & set(documents)),
            "body": body,
        }
    )


def drop_moot_plans(table: DocumentTable, shard: str, *, run_id: str) -> list[str]:
    """After a run that reconciled all of ``shard`` (every shard for the whole corpus's, ``0/1``)
    and was refused nothing, ``run_id``: the approvals still pending there (saved by earlier
    runs: the shard's lease excludes any other runner of it meanwhile) hold back
    writes that no source asks for any more (the run would have been refused for them again, or
    written them), so they are marked ``stale`` and never applied; their ids."""
    dropped = []
    for saved in table.saved_plans(statuses=[PENDING], limit=1000):
        covered = shard in (saved.shard, WHOLE_SHARD)
        if covered and saved.authorized_by == APPROVAL and saved.run_id != run_id:
            table.set_plan_status(saved.plan_id, STALE)
            dropped.append(saved.plan_id)
    if dropped:
        log.info("plan(s) %s dropped: the run after them no longer asks for them", dropped)
    return dropped


# -- reading back ------------------------------------------------------------------------------


def moved_documents(
    table: DocumentTable, index: ChunkIndex, body: Mapping[str, Any], *, batch: int = 1000
) -> list[str]:
    """The documents of a saved plan whose row or chunks changed since it was computed: a
    row no longer holding its values before (or gone), chunks whose ids or managed payloads
    differ from the fingerprint saved."""
    documents = body["documents"]
    rows = table.get_documents(list(documents))
    chunks = chunk_fingerprints(index, list(documents), batch=batch)
    moved = []
    for doc_id, entry in documents.items():
        row = rows.get(doc_id)
        before = entry.get("before")
        if (
            (before is not None and (row is None or row_values(row) != before))
            or _payload_moved(entry, row)
            or chunks.get(doc_id) != entry.get("chunks")
        ):
            moved.append(doc_id)
    return sorted(moved)


def _payload_moved(entry: Mapping[str, Any], row: Document | None) -> bool:
    """A payload-only write (its row stays) planned from a row that changed since: the
    payload it sets is no longer the row's."""
    write = entry.get("payload")
    if "before" in entry or write is None or write["partial"] or row is None:
        return False
    return bool(jsonable(payload_for(row)) != write["payload"])


def refuse_unless_appliable(
    table: DocumentTable, index: ChunkIndex, saved: SavedPlan, *, now: datetime, batch: int = 1000
) -> None:
    """Raise ``PlanRefused`` unless ``saved`` may be applied now: pending, not expired, and
    nothing it would write moved since (then it is marked ``stale``)."""
    plan_id = saved.plan_id
    if saved.status == STALE:
        raise PlanRefused(
            plan_id,
            "it is stale: the stores moved past it, or a later run no longer asks for it (the "
            "next run plans again, and saves a new plan if it is refused again)",
        )
    if saved.status != PENDING:
        by = f" by run {saved.applied_run}" if saved.applied_run else ""
        raise PlanRefused(plan_id, f"it is {saved.status}{by}; a plan is applied at most once")
    if saved.expires_at <= now:
        table.set_plan_status(plan_id, EXPIRED)
        raise PlanRefused(
            plan_id,
            f"it expired at {jsonable(saved.expires_at)} (guard.plan_ttl); the next run plans "
            "again and saves a new one if it is refused again",
        )
    moved = moved_documents(table, index, saved.body, batch=batch)
    if moved:
        table.set_plan_status(plan_id, STALE)
        raise PlanRefused(
            plan_id,
            "the stores moved past it: a row or a chunk it would write changed since it was "
            "computed (the next run plans again, and saves a new plan if it is refused again)",
            moved,
        )


# -- applying ----------------------------------------------------------------------------------


def apply_saved(
    table: DocumentTable,
    index: ChunkIndex,
    saved: SavedPlan,
    *,
    run_id: str,
    actor: str,
    clock: Clock = SYSTEM_CLOCK,
    keep_writing: Callable[[], None] | None = None,
    batch_points: int = 256,
    scroll_batch: int = 1000,
) -> ApplyResult:
    """Apply exactly the writes of an approved plan (``refuse_unless_appliable`` first): the
    plan is claimed before the first write, the approval audited, then the ``Applier``
    writes it, and the plan is marked ``applied``. Raises ``PlanRefused`` when another run
    claimed it first."""
    if not table.claim_plan(saved.plan_id, run_id=run_id, at=clock.now()):
        raise PlanRefused(saved.plan_id, "another run claimed it first; a plan is applied once")
    applier = Applier(
        table=table,
        index=index,
        run_id=run_id,
        actor=actor,
        clock=clock,
        keep_writing=keep_writing,
        batch_points=batch_points,
        scroll_batch=scroll_batch,
    )
    applier.audit_first([_authorized_entry(saved, run_id, actor, clock.now())])
    rows = table.get_documents(list(saved.body["documents"]))
    result = execute(Repair(plan_from_body(saved.body, rows)), applier)
    table.set_plan_status(saved.plan_id, APPLIED, at=clock.now())
    return result


def finish_authorized(
    table: DocumentTable,
    index: ChunkIndex,
    saved: SavedPlan,
    *,
    run_id: str,
    actor: str,
    clock: Clock = SYSTEM_CLOCK,
    batch_points: int = 256,
    scroll_batch: int = 1000,
) -> ApplyResult:
    """Finish the plan of a dead run under its authorization (see the module's doc), as run
    ``run_id``, audited; the plan is marked ``applied`` then."""
    body = saved.body
    documents = body["documents"]
    rows = table.get_documents(list(documents))
    finish: list[str] = []
    left: list[str] = []
    for doc_id, entry in documents.items():
        row = rows.get(doc_id)
        if "before" not in entry:
            (left if _payload_moved(entry, row) else finish).append(doc_id)
        elif row is None:
            left.append(doc_id)
        elif row_values(row) in (entry["before"], entry["after"]):
            finish.append(doc_id)
        else:
            left.append(doc_id)
    applier = Applier(
        table=table,
        index=index,
        run_id=run_id,
        actor=actor,
        clock=clock,
        batch_points=batch_points,
        scroll_batch=scroll_batch,
    )
    applier.audit_first([_authorized_entry(saved, run_id, actor, clock.now(), left=left)])
    changing = {
        d: r for d, r in rows.items() if d in finish and row_values(r) == documents[d].get("before")
    }
    plan = plan_from_body(body, changing, finish)
    result = execute(Repair(plan), applier)
    table.set_plan_status(saved.plan_id, APPLIED, at=clock.now())
    if left:
        log.warning(
            "plan %s: %d document(s) changed since run %s planned them; left to the next run",
            saved.plan_id,
            len(left),
            saved.applied_run,
        )
    return result


def mark_applied(table: DocumentTable, plan_id: str, *, at: datetime) -> None:
    """A forced run's plan, written whole."""
    table.set_plan_status(plan_id, APPLIED, at=at)


def finish_authorized_plans(
    table: DocumentTable,
    index: ChunkIndex,
    *,
    shard: str,
    actor: str = "recovery",
    clock: Clock = SYSTEM_CLOCK,
    undoing: str | None = None,
) -> list[str]:
    """Finish every plan of ``shard`` that a run set out to write under an authorization
    (``--force``, an approval) and that is no longer running (killed: resolved as
    ``interrupted`` first; or failed), each as a run of its own under the same authorization
    (recorded ``forced`` for a forced run's, audited); the ids of the runs that finished
    them. The plan of the run ``undoing`` (being rolled back) is dropped (``stale``), not
    finished. The caller holds the shard's lease."""
    finished = []
    for saved in table.saved_plans(statuses=[APPLYING], limit=1000):
        if saved.shard != shard or saved.applied_run is None:
            continue
        run = table.get_run(saved.applied_run)
        if run is not None and run.status == RunStatus.RUNNING:
            continue  # (the caller resolves dead runs first: a running one is alive)
        if saved.applied_run == undoing:
            table.set_plan_status(saved.plan_id, STALE)
            continue
        declared = saved.body.get("declarations", [])
        if declared and len(table.declarations(ids=declared)) < len(declared):
            # a forced declare killed before its declarations were recorded: its plan
            # follows from decisions that are not in force, so it is not written
            table.set_plan_status(saved.plan_id, STALE)
            log.warning(
                "plan %s of declare run %s dropped: its declarations were never recorded",
                saved.plan_id,
                saved.applied_run,
            )
            continue
        with recorded(
            table,
            mode=RunMode.APPLY,
            actor=actor,
            shard=shard,
            job="finish",
            forced=saved.authorized_by == FORCE,
        ) as record:
            result = finish_authorized(table, index, saved, run_id=record.run_id, actor=actor)
            record.counts = {**result.counts(), "finishes": saved.applied_run}
            record.stats = run_stats(result)
        log.warning(
            "plan %s of run %s (%s) finished by run %s: %s",
            saved.plan_id,
            saved.applied_run,
            "--force" if saved.authorized_by == FORCE else "approved",
            record.run_id,
            result.counts(),
        )
        finished.append(record.run_id)
    return finished


def run_stats(result: ApplyResult) -> dict[str, float]:
    """The run log's metric columns of what a plan's run wrote."""
    return {
        "rows_written": result.rows,
        "payload_writes": result.payload_writes,
        "points_written": result.points,
        "reingest_requests": result.reingests,
    }


def _authorized_entry(
    saved: SavedPlan, run_id: str, actor: str, at: datetime, *, left: list[str] | None = None
) -> AuditEntry:
    """The audit entry that says under which authorization run ``run_id`` writes ``saved``."""
    finishing = saved.status == APPLYING
    if saved.authorized_by == FORCE:
        reason = f"finishing forced run {saved.run_id} (--force) from its plan {saved.plan_id}"
    elif finishing:
        reason = f"finishing approved plan {saved.plan_id} of run {saved.applied_run}"
    else:
        reason = f"approved plan {saved.plan_id}"
    after: dict[str, Any] = {"plan": saved.plan_id, "authorized_by": saved.authorized_by}
    if finishing:
        after["finishes"] = saved.applied_run
        after["left_to_next_run"] = sorted(left or [])
    return AuditEntry(
        run_id=run_id,
        at=at,
        actor=actor,
        reason=reason,
        target_type=AuditKind.RUN,
        target=run_id,
        before={"plan": saved.plan_id, "computed_by": saved.run_id},
        after=after,
    )
