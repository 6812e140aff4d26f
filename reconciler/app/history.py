"""Commands over what runs wrote: ``rollback`` (under the run's shard lease, or its plan rendered) and
``audit show | verify | seal``, each run named by its id or any unique prefix of it."""

from __future__ import annotations

import logging
from typing import Any

from reconciler.app.holding import HeldLease, lease_name
from reconciler.app.operations import lease_guard
from reconciler.app.wiring import leases_of, open_index, open_table
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import AmbiguousRunId, LeaseBusy, NotFound
from reconciler.model import Verification
from reconciler.ports import DocumentTable
from reconciler.rules.sharding import Shard
from reconciler.settings import Settings
from reconciler.writing.recovery import plan_resolutions, resolve_interrupted
from reconciler.writing.rollback import rollback
from reconciler.writing.sealing import seal

log = logging.getLogger(__name__)


def resolve_run_id(table: DocumentTable, given: str) -> str:
    """The full id of the run ``given`` names: its id, or any unique prefix of it (``audit
    show`` prints 8 characters). ``NotFound`` when no run matches, ``AmbiguousRunId`` (listing
    them) when several do."""
    given = given.strip()
    if not given:
        raise NotFound("an empty run id names no run")
    if table.get_run(given) is not None:
        return given
    matches = table.run_ids_starting(given, limit=11)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFound(
            f"no run {given!r}: no recorded run has that id or starts with it (`reconciler "
            "status` lists recent runs; check and plan runs are not recorded)"
        )
    raise AmbiguousRunId(given, matches[:10] + (["..."] if len(matches) > 10 else []))


def rollback_run(
    settings: Settings,
    run_id: str,
    *,
    cascade: bool = False,
    dry_run: bool = False,
    lease_renew_every: float = 30.0,
    clock: Clock = SYSTEM_CLOCK,
) -> dict[str, Any]:
    """Restore what one run wrote, under the lease of that run's shard (runs of the shard
    whose process died are resolved first, so an interrupted run can be rolled back). A dry
    run renders the rollback's plan (``writing.rollback_plan``) and takes no lease: it plans
    the shard's dead runs as resolved, as the real one would when that lease is free, and
    writes nothing.
    The chunk index is opened once the run is known (a wrong id costs no index start-up)."""
    table = open_table(settings)
    try:
        run_id = resolve_run_id(table, run_id)
        run = table.get_run(run_id)
        assert run is not None
        shard = Shard.parse(run.shard) if run.shard else Shard()
        leases = leases_of(table)
        index = open_index(settings)
        try:
            if dry_run:
                resolving = []
                if leases(lease_name(str(shard)), clock=clock).is_free():
                    resolving = plan_resolutions(table=table, index=index, shard=str(shard))
                for plan in resolving:
                    log.info(
                        "dry run: run %s of shard %s would be resolved (%s)",
                        plan.run_id,
                        shard,
                        plan.status,
                    )
                return rollback(
                    table=table,
                    index=index,
                    run_id=run_id,
                    batch_points=settings.index.write_batch,
                    cascade=cascade,
                    dry_run=True,
                    shard=str(shard),
                    resolving=resolving,
                ).to_json()
            lease = leases(lease_name(str(shard)), clock=clock)
            with HeldLease(lease, renew_every=lease_renew_every, clock=clock) as held:
                if not held.acquired:
                    raise LeaseBusy(
                        f"another runner holds the lease of shard {shard} or one it excludes"
                        f"{held.busy}; the rollback was not started (nothing was written): "
                        "retry when that run has ended"
                    )
                resolve_interrupted(table=table, index=index, shard=str(shard), undoing=run_id)
                result = rollback(
                    table=table,
                    index=index,
                    run_id=run_id,
                    batch_points=settings.index.write_batch,
                    cascade=cascade,
                    keep_writing=lease_guard(held, shard),
                    shard=str(shard),
                )
        finally:
            index.close()
    finally:
        table.close()
    return result.to_json()


def audit_entries(
    settings: Settings, *, run_id: str | None = None, doc_id: str | None = None, limit: int = 1000
) -> list[dict[str, Any]]:
    """Audit entries for display (``run_id``: a run's id or a unique prefix of it)."""
    table = open_table(settings)
    try:
        if run_id is not None:
            run_id = resolve_run_id(table, run_id)
        return list(table.audit_entries(run_id=run_id, target=doc_id, limit=limit))
    finally:
        table.close()


def audit_verify(settings: Settings) -> dict[str, Any]:
    """Walk the audit chain; say what protected it (keyed, anchored, or unkeyed)."""
    table = open_table(settings)
    try:
        result = table.verify_audit()
    finally:
        table.close()
    return _verified(result)


def _verified(result: Verification) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "entries": result.entries,
        "problems": result.problems,
        # keyed, anchored, or unkeyed (the table's store says; reconciler.stores.sql.audit_protection)
        "protection": list(getattr(result, "protection", [])),
    }


def audit_seal(settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """Append one entry to the audit chain (``writing.sealing``), hashed under the audit key
    when one is given, and verify the chain: how a deployment that sets a key starts the
    chain's keyed part."""
    table = open_table(settings)
    try:
        head = seal(table, at=clock.now())
        result = table.verify_audit()
    finally:
        table.close()
    return {"head": head, **_verified(result)}
