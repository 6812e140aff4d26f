"""The reconciliation commands: ``check``, ``plan``, ``apply``, ``run`` and ``repair``, each one
call of ``operations.run_reconciliation``, rendered and turned into an exit code (a cron
``run`` also leaves its metrics, ``daemon.export_run_metrics``)."""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli.rendering import progress_display
from reconciler.errors import (
    LeaseBusy,
    ReconcilerError,
)
from reconciler.rules.sharding import Shard

if TYPE_CHECKING:
    from reconciler.metrics import LiveMetrics
    from reconciler.pipeline.values import Report

from reconciler.cli.group import (
    EXIT_OK,
    CliState,
    cli,
    errors_mapped,
    exit_for,
)
from reconciler.cli.options import instant_option, output_options, run_options

log = logging.getLogger(__name__)


def _reconcile(obj: CliState, mode: str, **kwargs: Any) -> Report:
    from reconciler.app.operations import report_data, run_reconciliation
    from reconciler.cli.rendering import render_report

    with errors_mapped():
        settings = obj.settings  # (a config that does not load is no run: no metrics left)
        try:
            with progress_display(obj.progress) as progress:
                report = run_reconciliation(settings, mode=mode, progress=progress, **kwargs)
        except LeaseBusy as exc:
            if mode == "run":  # a cron run that loses the race skips quietly
                click.echo(f"skipped: {exc}", err=True)
                _export(obj, None)
                sys.exit(EXIT_OK)
            raise
        except ReconcilerError:
            if mode == "run":
                _export(obj, None)
            raise
    obj.emit(report_data(report), lambda data: render_report(data, per_kind=obj.per_kind))
    if mode == "run":
        _export(obj, report)
    return report


def _export(obj: CliState, report: Report | None) -> None:
    """A cron run leaves its metrics for node_exporter or a Pushgateway (if configured)."""

    from reconciler.app.daemon import export_run_metrics

    def observe(live: LiveMetrics) -> None:
        if report is not None and report.finished_at is not None:
            total = (report.finished_at - report.started_at).total_seconds()
            live.observe(timings=report.timings, total=total)

    try:
        for target in export_run_metrics(obj.settings, observe):
            log.info("metrics written to %s", target)
    except Exception as exc:  # metrics must not turn a good run into a failed one
        click.echo(f"warning: could not export metrics: {exc}", err=True)


_exit = exit_for


@cli.command()
@run_options
@output_options
@click.pass_obj
def check(
    obj: CliState, checks: tuple[str, ...], now: datetime | None, shard: Shard | None
) -> None:
    """Run the checks and print the findings. Writes nothing.

    Exit 0 when nothing was found, 2 when drift was found.
    """
    _exit(_reconcile(obj, "check", checks=checks, now=now, shard=shard), writing=False)


@cli.command()
@run_options
@output_options
@click.pass_obj
def plan(obj: CliState, checks: tuple[str, ...], now: datetime | None, shard: Shard | None) -> None:
    """Print the findings and the exact writes that would follow. Writes nothing.

    Reads like a reviewed diff: each finding, then every row, payload, re-ingest request and
    index the repair would write, with counts. Exit 0 when there is nothing to do, 2 otherwise.
    """
    _exit(_reconcile(obj, "plan", checks=checks, now=now, shard=shard), writing=False)


@cli.command()
@run_options
@click.option(
    "--force", is_flag=True, help="Go past the blast-radius guard (for emergencies; audited)."
)
@click.option(
    "--plan",
    "plan_id",
    metavar="ID",
    help="Apply exactly this saved plan (what a refused run held back; any unique id prefix).",
)
@output_options
@click.pass_obj
def apply(
    obj: CliState,
    checks: tuple[str, ...],
    now: datetime | None,
    shard: Shard | None,
    force: bool,
    plan_id: str | None,
) -> None:
    """Repair drift: row updates, payload-only writes, re-ingest requests, indexes.

    Never embeds, never touches vectors or chunk text, never deletes a point. When the run
    would hide or reveal more than guard.max_changed_fraction of the families or chunks, or a
    source that had documents returned none, it is refused (exit 3): what cannot change what
    retrieval serves is still written, and what it held back is saved as a plan whose id the
    refusal names. Review it (`reconciler plans ID`), then approve exactly that plan with
    `apply --plan ID`: it is applied once, and refused (exit 3, nothing written) when it
    expired (guard.plan_ttl) or a row or chunk it would write changed since. --force writes
    everything past the guard, for emergencies (recorded as forced). Exit 4 when it completed
    but a source could not be read (run status "partial").
    """
    if plan_id is not None:
        if force or checks or now is not None or shard is not None:
            raise click.UsageError("--plan applies a saved plan as it is: give it alone")
        from reconciler.app.approving import approve_plan
        from reconciler.cli.rendering_plans import render_approval

        with errors_mapped():
            data = approve_plan(obj.settings, plan_id)
        obj.emit(data, render_approval)
        return
    report = _reconcile(obj, "apply", checks=checks, now=now, shard=shard, force=force)
    _exit(report, writing=True)


def _duration(_ctx: click.Context, _param: click.Parameter, value: str | None) -> timedelta | None:
    if value is None:
        return None
    from reconciler.settings import parse_duration

    try:
        within = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: {exc}") from None
    if within <= timedelta(0):
        raise click.BadParameter(f"{value!r}: a deadline is longer than 0s")
    return within


@cli.command()
@click.argument("plan_id", metavar="[ID]", required=False)
@click.option("--all", "every", is_flag=True, help="Every saved plan, not only the open ones.")
@click.pass_obj
def plans(obj: CliState, plan_id: str | None, every: bool) -> None:
    """The plans refused runs saved: those waiting for approval (`apply --plan ID`) and
    those a forced or approved run is writing; with ID, that plan's writes per document
    (each row's values before and after, its chunks' payload)."""
    from reconciler.app.approving import list_plans, show_plan
    from reconciler.cli.rendering_plans import render_plans

    with errors_mapped():
        if plan_id is not None:
            data = {"plans": [show_plan(obj.settings, plan_id)]}
        else:
            data = list_plans(obj.settings, every=every)
    obj.emit(data, render_plans)


@cli.command()
@run_options
@click.option(
    "--force", is_flag=True, help="Go past the blast-radius guard (for emergencies; audited)."
)
@click.option(
    "--source-deadline",
    callback=_duration,
    metavar="DURATION",
    help="How long one source's read may take (90s, 15m, 1h; default [schedule] "
    "source_deadline, else half of job_deadline). A source past it is unreadable this run: "
    "its families stay as they are, the others are reconciled, exit 4.",
)
@output_options
@click.pass_obj
def run(
    obj: CliState,
    checks: tuple[str, ...],
    now: datetime | None,
    shard: Shard | None,
    force: bool,
    source_deadline: timedelta | None,
) -> None:
    """One reconciliation cycle for cron: check, then apply under the guard.

    The sources are read side by side, each within its read deadline (--source-deadline).
    A refused run writes what cannot change what retrieval serves and saves the rest as a
    plan, approved with `reconciler apply --plan ID` (the refusal names it). Exit 0 on
    success, 3 when the guard refused, 4 when it completed but a source could not be read
    (run status "partial": that source's documents were not reconciled; a source past its
    deadline counts), 1 on error. Recorded with actor "cli" (the daemon's scheduled runs are
    "schedule").
    """
    report = _reconcile(
        obj,
        "run",
        checks=checks,
        now=now,
        shard=shard,
        force=force,
        source_deadline=source_deadline,
    )
    _exit(report, writing=True)


@cli.command()
@click.option(
    "--family",
    "families",
    multiple=True,
    help="Repair this family (doc_family_id); repeat it to repair several in one run.",
)
@click.option("--doc", "doc_id", help="Repair this document (doc_id).")
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing.")
@click.option(
    "--now", callback=instant_option, metavar="ISO-8601", help="Evaluate as of this instant."
)
@click.option("--force", is_flag=True, help="Go past the empty-source guard (audited).")
@output_options
@click.pass_obj
def repair(
    obj: CliState,
    families: tuple[str, ...],
    doc_id: str | None,
    dry_run: bool,
    now: datetime | None,
    force: bool,
) -> None:
    """On-demand repair of families or of one document (all checks, scoped).

    Only the scoped documents' points are read (through the doc_id filter), never the whole
    collection. The blast-radius fraction does not apply to what a scoped repair names; it
    does to the families the widening adds (a move joining or leaving), past the floor, and
    the empty-source rule applies.
    """
    if bool(families) == bool(doc_id):
        raise click.UsageError("give exactly one of --family or --doc (--family may be repeated)")
    report = _reconcile(
        obj,
        "plan" if dry_run else "repair",
        now=now,
        force=force,
        actor="repair",
        families=list(families) or None,
        doc_id=doc_id,
    )
    _exit(report, writing=not dry_run)
