"""Commands over what runs wrote: ``rollback RUN_ID`` and ``audit show | verify``."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    pass

from reconciler.cli.group import (
    EXIT_ERROR,
    EXIT_REFUSED,
    CliState,
    cli,
    errors_mapped,
    fail,
)

log = logging.getLogger(__name__)


@cli.command("rollback")
@click.argument("run_id")
@click.option(
    "--cascade",
    is_flag=True,
    help="First roll back, newest first, the later runs that changed the same documents.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be restored; write nothing.")
@click.pass_obj
def rollback_command(obj: CliState, run_id: str, cascade: bool, dry_run: bool) -> None:
    """Restore the fields a run changed on each row, and the chunks from the restored rows.

    A pointer flip, as a new audited run under the run's shard lease: no re-index. A run whose
    process died (interrupted) is rolled back from its audited intents. Refused (exit 3) when a
    later run changed the same documents, unless --cascade. Re-ingest requests and payload
    indexes are not undone. RUN_ID may be any unique prefix of the id (`audit show` and
    `status` list runs); start with --dry-run.
    """
    from reconciler.app.history import rollback_run
    from reconciler.rendering import render_rollback
    from reconciler.writing.rollback import RollbackRefused

    with errors_mapped():
        try:
            data = rollback_run(obj.settings, run_id, cascade=cascade, dry_run=dry_run)
        except RollbackRefused as exc:
            fail(str(exc), EXIT_REFUSED)
    obj.emit(data, render_rollback)


@cli.group()
def audit() -> None:
    """The append-only, hash-chained audit log of every write."""


@audit.command("show")
@click.option(
    "--run", "run_id", metavar="RUN_ID", help="Only this run's entries (any unique id prefix)."
)
@click.option("--doc", "doc_id", help="Only entries about this document.")
@click.option("--limit", default=1000, show_default=True, help="At most this many entries.")
@click.pass_obj
def audit_show(obj: CliState, run_id: str | None, doc_id: str | None, limit: int) -> None:
    """Show audit entries, oldest first."""
    from reconciler.app.history import audit_entries
    from reconciler.rendering import render_audit

    with errors_mapped():
        entries = audit_entries(obj.settings, run_id=run_id, doc_id=doc_id, limit=limit)
    obj.emit({"entries": entries}, render_audit)


@audit.command("verify")
@click.pass_obj
def audit_verify_command(obj: CliState) -> None:
    """Recompute the hash chain; exit 1 when any entry was altered or removed."""
    from reconciler.app.history import audit_verify

    with errors_mapped():
        data = audit_verify(obj.settings)
    obj.emit(
        data,
        lambda d: (
            f"audit log intact: {d['entries']} entries"
            if d["ok"]
            else "audit log BROKEN:\n" + "\n".join(f"  {p}" for p in d["problems"])
        ),
    )
    if not data["ok"]:
        sys.exit(EXIT_ERROR)
