"""Text output of saved plans: the sentence a refusal ends with, ``reconciler plans`` and
``reconciler apply --plan ID``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def refusal_outcome(guard: Mapping[str, Any], *, wrote: bool) -> str:
    """How a refusal ends: the documents held back, whether the rest was written, and what
    it asks of a person: approve its saved plan (or, with none, review and force)."""
    held = list(guard.get("held", []))
    named = ", ".join(held[:20]) + (f" and {len(held) - 20} more (guard.held)" * (len(held) > 20))
    outcome = f"Held back: {named}. " if held else ""
    outcome += "The rest of the plan was written." if wrote else "Nothing was written."
    plan_id = guard.get("plan_id")
    if not plan_id:
        return f"{outcome} Review the plan, then rerun with --force if it is right."
    return f"{outcome} " + (
        f"What was held back is saved as plan {plan_id}: review it (`reconciler plans "
        f"{plan_id}`), then approve exactly it: `{guard['approve']}` (--force, for "
        "emergencies, writes everything)."
    )


def plan_lines(plans: list[dict[str, Any]]) -> list[str]:
    """``reconciler status``: the open plans, each with what to do about it."""
    if not plans:
        return []
    out = ["", "saved plans:"]
    for plan in plans:
        todo = plan.get("approve") or plan.get("window") or plan["status"]
        out.append(f"  {plan['plan_id']}  {plan['status']}  {plan['documents']} document(s)")
        out.append(f"    {todo}")
    return out


def render_plans(data: dict[str, Any]) -> str:
    """``reconciler plans``: one block per plan (with its writes when shown alone)."""
    plans = data.get("plans", [])
    if not plans:
        return "no open plan (a refused run saves what it held back as one)"
    out: list[str] = []
    for plan in plans:
        out.append(
            f"plan {plan['plan_id']}  {plan['status']}  ({plan['authorized_by']}; computed by "
            f"run {plan['run_id']} at {plan['created_at']}, shard {plan['shard']})"
        )
        out.append(
            f"  {plan['documents']} document(s), {plan['hidden']} hidden; expires "
            f"{plan['expires_at']}"
            + (f"; applied by run {plan['applied_run']}" if plan.get("applied_run") else "")
        )
        if plan.get("approve"):
            out.append(f"  approve: {plan['approve']}")
        if plan.get("window"):
            out.append(f"  {plan['window']}")
        for doc_id, entry in plan.get("writes", {}).items():
            out.append(f"  {doc_id}:")
            before, after = entry.get("before") or {}, entry.get("after") or {}
            for name in sorted(k for k in after if after[k] != before.get(k)):
                out.append(f"    {name}: {before.get(name)!r} -> {after[name]!r}")
            if entry.get("payload"):
                out.append(f"    payload on {entry['payload']['points']} chunk(s)")
            if entry.get("reingest"):
                out.append("    re-ingest requested")
            if entry.get("move"):
                out.append(f"    moved ({'to' if entry['move']['to_archive'] else 'from'} archive)")
    return "\n".join(out)


def render_approval(data: dict[str, Any]) -> str:
    """``reconciler apply --plan ID``."""
    writes = data["writes"]
    return (
        f"plan {data['plan_id']} applied by run {data['run_id']}: {writes['table']} row(s), "
        f"{writes['payload']} payload write(s) on {writes['points']} chunk(s), "
        f"{writes['reingest']} re-ingest request(s)"
    )
