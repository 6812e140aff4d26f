"""``serve``: the scheduler daemon, with ``/metrics`` and ``/healthz``."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

import click

from reconciler.rules.sharding import Shard

if TYPE_CHECKING:
    pass

from reconciler.cli.group import (
    CliState,
    cli,
    errors_mapped,
)
from reconciler.cli.options import shard_option

log = logging.getLogger(__name__)

#: Set once ``serve`` has stopped on a signal (its jobs ended or left, its stores closed, its
#: log written): the process then ends at once (``end_process``).
STOPPED = threading.Event()


def end_process(code: int | str | None) -> None:
    """End the process now, with exit status ``code``: ``atexit``'s handlers run and the
    logs and standard streams are flushed, but the interpreter's teardown is skipped. With the
    store clients loaded (Qdrant's, SQLAlchemy's, their models: some 1,300 modules), freeing
    every module's objects one by one took about 1.5 s after ``serve`` had stopped on a quiet
    machine and 2 to 6 s at a load of 12 to 15 on two cores, which kept a stopped ``serve``
    alive past ``stop_grace``."""
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


@cli.command()
@click.option(
    "--shard", callback=shard_option, metavar="i/N", help="Reconcile only partition i of N."
)
@click.option("--run-now", is_flag=True, help="Also run the full job once at start.")
@click.option(
    "--no-watch",
    is_flag=True,
    help="Do not watch the sources: their changes wait for the scheduled jobs.",
)
@click.pass_obj
def serve(obj: CliState, shard: Shard | None, run_now: bool, no_watch: bool) -> None:
    """Run the scheduler daemon: full, ttl and dates jobs on their cron schedules (UTC).

    Serves /metrics and /healthz on metrics.listen (127.0.0.1:9464 by default). One runner at
    a time per shard: a job that finds the lease held by another process skips. SIGTERM or
    SIGINT stop it after the running job has finished and been recorded.

    Vault and git sources are watched (unless --no-watch, or `watch = false` on a source):
    their changed documents' families are reconciled within seconds, through the same scoped
    run as `repair --family`; the full job stays the safety net.
    """
    from reconciler.app.daemon import serve as run_daemon

    with errors_mapped():
        run_daemon(obj.settings, shard=shard, run_now=run_now, watch=not no_watch)
    STOPPED.set()
