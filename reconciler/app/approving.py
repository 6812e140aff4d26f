"""``reconciler apply --plan ID`` and ``reconciler plans``: a refused run's saved plan, shown,
and approved as it is (``reconciler.writing.approving`` applies it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from reconciler.app.holding import HeldLease, lease_name
from reconciler.app.wiring import leases_of, open_table, stores
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import AmbiguousRunId, LeaseBusy, LeaseLost, NotFound
from reconciler.model import RunMode, jsonable
from reconciler.ports import SavedPlan, TableReader
from reconciler.settings import Settings
from reconciler.writing.approving import (
    APPLYING,
    PENDING,
    apply_saved,
    approve_command,
    refuse_unless_appliable,
    run_stats,
)
from reconciler.writing.recovery import resolve_interrupted
from reconciler.writing.runs import recorded

#: The statuses ``reconciler status`` and ``reconciler plans`` show by default.
OPEN = (PENDING, APPLYING)


def plan_id_of(table: TableReader, ref: str) -> str:
    """The id of the plan ``ref`` names: the id, or a prefix of one plan's id."""
    if table.saved_plan(ref) is not None:
        return ref
    found = table.plan_ids_starting(ref)
    if not found:
        raise NotFound(f"no saved plan {ref!r} (`reconciler plans` lists them)")
    if len(found) > 1:
        raise AmbiguousRunId(ref, found)
    return found[0]


def plan_summary(saved: SavedPlan, now: datetime) -> dict[str, Any]:
    """One plan, as ``status`` and ``plans`` list it (a pending one names its command)."""
    data: dict[str, Any] = {
        "plan_id": saved.plan_id,
        "run_id": saved.run_id,
        "shard": saved.shard,
        "status": saved.status,
        "authorized_by": saved.authorized_by,
        "created_at": jsonable(saved.created_at),
        "expires_at": jsonable(saved.expires_at),
        "documents": saved.documents,
        "hidden": saved.hidden,
        "applied_run": saved.applied_run,
        "audit_head": saved.audit_head,
    }
    if saved.status == PENDING and saved.expires_at > now:
        data["approve"] = approve_command(saved.plan_id)
    elif saved.status == PENDING:
        data["status"] = "expired"
    elif saved.status == APPLYING:
        data["window"] = (
            f"run {saved.applied_run} set out to write it: until it is finished (by the next "
            "run of its shard, under the same authorization) its rows and chunks may disagree"
        )
    return data


def open_plans(table: TableReader, now: datetime) -> list[dict[str, Any]]:
    """The plans waiting for approval and those being written, for ``reconciler status``."""
    return [plan_summary(p, now) for p in table.saved_plans(statuses=OPEN)]


def list_plans(
    settings: Settings, *, every: bool = False, clock: Clock = SYSTEM_CLOCK
) -> dict[str, Any]:
    """``reconciler plans``: the open plans (``every``: every one, newest first)."""
    table = open_table(settings)
    try:
        found = table.saved_plans(statuses=None if every else OPEN, limit=200)
        return {"plans": [plan_summary(p, clock.now()) for p in found]}
    finally:
        table.close()


def show_plan(settings: Settings, ref: str, *, clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """``reconciler plans ID``: one plan with its writes per document."""
    table = open_table(settings)
    try:
        saved = table.saved_plan(plan_id_of(table, ref))
        assert saved is not None
        return {**plan_summary(saved, clock.now()), "writes": saved.body.get("documents", {})}
    finally:
        table.close()


def approve_plan(
    settings: Settings,
    ref: str,
    *,
    actor: str = "cli",
    clock: Clock = SYSTEM_CLOCK,
    lease_renew_every: float = 30.0,
) -> dict[str, Any]:
    """``reconciler apply --plan ID``: under the lease of the plan's shard (what a killed run
    left resolved first), refuse a plan applied already, expired or moved past
    (``PlanRefused``), else apply exactly its writes, recorded as a run of its own."""
    with stores(settings) as opened:
        table = opened.table
        plan_id = plan_id_of(table, ref)
        saved = table.saved_plan(plan_id)
        assert saved is not None
        shard = saved.shard
        lease = leases_of(table)(lease_name(shard), clock=clock)
        with HeldLease(lease, renew_every=lease_renew_every, clock=clock) as held:
            if not held.acquired:
                raise LeaseBusy(
                    f"another runner holds the lease of shard {shard} or one it excludes"
                    f"{held.busy}; the plan was not applied (nothing was written): run the "
                    "command again when it has ended"
                )

            def keep_writing() -> None:
                if held.lost or not held.lease.renew():
                    held.lost = True
                    raise LeaseLost(
                        f"the lease of shard {shard} was lost while plan {plan_id} was "
                        "being applied; writing stopped, and the next run finishes it"
                    )

            resolve_interrupted(table=table, index=opened.index, shard=shard)
            saved = table.saved_plan(plan_id)
            assert saved is not None
            batch = settings.index.scroll_batch
            refuse_unless_appliable(table, opened.index, saved, now=clock.now(), batch=batch)
            with recorded(
                table, mode=RunMode.APPLY, actor=actor, shard=shard, job="apply --plan"
            ) as record:
                result = apply_saved(
                    table,
                    opened.index,
                    saved,
                    run_id=record.run_id,
                    actor=actor,
                    clock=clock,
                    keep_writing=keep_writing,
                    batch_points=settings.index.write_batch,
                    scroll_batch=batch,
                )
                record.counts = {**result.counts(), "plan": plan_id}
                record.stats = run_stats(result)
    return {
        "run_id": record.run_id,
        "plan_id": plan_id,
        "status": "applied",
        "writes": result.counts(),
        "at": jsonable(clock.now()),
    }
