"""``serve``: the scheduler daemon, with ``/metrics`` and ``/healthz``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import click

from reconciler.sharding import Shard

if TYPE_CHECKING:
    pass

from reconciler.cli.group import (
    CliState,
    cli,
    errors_mapped,
)
from reconciler.cli.options import shard_option

log = logging.getLogger(__name__)


@cli.command()
@click.option(
    "--shard", callback=shard_option, metavar="i/N", help="Reconcile only partition i of N."
)
@click.option("--run-now", is_flag=True, help="Also run the full job once at start.")
@click.pass_obj
def serve(obj: CliState, shard: Shard | None, run_now: bool) -> None:
    """Run the scheduler daemon: full, ttl and dates jobs on their cron schedules (UTC).

    Serves /metrics and /healthz on metrics.listen (127.0.0.1:9464 by default). One runner at
    a time per shard: a job that finds the lease held by another process skips. SIGTERM or
    SIGINT stop it after the running job has finished and been recorded.
    """
    from reconciler.app.daemon import serve as run_daemon

    with errors_mapped():
        run_daemon(obj.settings, shard=shard, run_now=run_now)
