"""``reconciler rekey``: the library function behind it. Reads every configured source (or
those named), pairs the registered documents each now names with other ids
(``writing.rekeying.pending_rekey``), plans their re-keying (``Rekeying``) and has the one
executor give them their new ids in one audited ``rekey`` run under the whole corpus's lease
(``--dry-run``: the pairs, nothing written or recorded).
``reconciler rollback`` of that run gives the old ids back."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from reconciler.app.holding import HeldLease, lease_name
from reconciler.app.wiring import build_sources, stores
from reconciler.errors import ConfigError, LeaseBusy
from reconciler.ingesting import WHOLE
from reconciler.model import RunMode
from reconciler.rules.rekeying import RekeyPlan
from reconciler.rules.storable import screen
from reconciler.settings import Settings
from reconciler.writing.applying import Applier
from reconciler.writing.executing import execute
from reconciler.writing.recovery import resolve_interrupted
from reconciler.writing.rekeying import Rekeying, pending_rekey
from reconciler.writing.runs import recorded

log = logging.getLogger(__name__)

#: The run's actor.
ACTOR = "rekey"


def rekey(
    settings: Settings, *, names: Sequence[str] | None = None, dry_run: bool = False
) -> dict[str, Any]:
    """Pair and (unless ``dry_run``) re-key the documents of the sources ``names`` (all when
    none): ``{"run_id", "dry_run", "pairs", "conflicts", "written"}``. A source that cannot be
    read raises (``ConnectorError``): nothing is written."""
    unknown = sorted(set(names or []) - {s.name for s in settings.sources})
    if unknown:
        raise ConfigError([("sources", f"no source named {n!r}") for n in unknown])
    sources = build_sources(settings, list(names) if names else None)
    run_id: str | None = None
    written = {"rows": 0, "points": 0}
    with stores(settings) as opened, HeldLease(opened.leases(lease_name(WHOLE))) as held:
        if not held.acquired:
            raise LeaseBusy(
                f"another runner holds the lease of shard {WHOLE} or a shard's (a run of any "
                f"shard, an ingestion, a rollback){held.busy}; the re-keying was not started "
                "(nothing was read or written): run it again when that one has ended"
            )
        if not dry_run:
            resolve_interrupted(table=opened.table, index=opened.index, shard=WHOLE)
        plan = RekeyPlan()
        for source in sources:
            plan = plan + pending_rekey(opened.table, screen(source.scan()))
        if plan.pairs and not dry_run:
            table, index = opened.table, opened.index
            with recorded(table, mode=RunMode.REKEY, actor=ACTOR, shard=WHOLE) as run:
                run_id = run.run_id
                # (a failure from here on leaves the intent to the next holder of the lease)
                run.counts = {"pairs": len(plan.pairs), "unconfirmed": True}
                rekeying = Rekeying.planned(table, index, plan)
                applier = Applier(table=table, index=index, run_id=run.run_id, actor=ACTOR)
                done = execute(rekeying, applier)
                written = {"rows": done.rows, "points": done.points}
                run.counts = {
                    "pairs": len(plan.pairs),
                    "conflicts": len(plan.conflicts),
                    "audit_head": done.audit_head,
                }
                run.stats = {"rows_written": done.rows, "points_written": done.points}
    log.info(
        "%s %d pair(s), %d conflict(s)",
        "planned" if dry_run else "re-keyed",
        len(plan.pairs),
        len(plan.conflicts),
    )
    return {
        "run_id": run_id,
        "dry_run": dry_run,
        "pairs": [pair.to_json() for pair in plan.pairs],
        "conflicts": [conflict.to_json() for conflict in plan.conflicts],
        "written": written,
    }


def render_rekey(data: dict[str, Any]) -> str:
    """The text form of ``rekey``'s result."""
    pairs, conflicts = data["pairs"], data["conflicts"]
    lines = []
    if not pairs and not conflicts:
        lines.append("nothing to re-key: every registered document keeps its id")
    if pairs:
        lines.append(
            f"{'would re-key' if data['dry_run'] else 're-keyed'} {len(pairs)} document(s):"
        )
        lines += [
            f"  {p['old_id']} -> {p['new_id']}  ({p['path']}; family {p['family']}; "
            f"{p['chunks']} chunk(s))"
            for p in pairs
        ]
    if conflicts:
        lines.append(f"{len(conflicts)} ambiguous pair(s), left as they are:")
        lines += [f"  {c['path']}: {c['reason']}: {', '.join(c['doc_ids'])}" for c in conflicts]
    if data["run_id"]:
        lines.append(
            f"run {data['run_id']}: {data['written']['rows']} row(s), "
            f"{data['written']['points']} point(s) (undo: `reconciler rollback {data['run_id']}`)"
        )
    elif pairs:
        lines.append("dry run: nothing written; run `reconciler rekey` to apply")
    return "\n".join(lines)
