"""One run's record in the run log, from start to end: the one lifecycle every command shares.

``recorded`` starts the record, and ends it ``failed`` with the error when the block raises
(never hiding that error if the log itself cannot be written), else with the status, counts
and statistics the block set on the ``RunRecord`` it was given.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from reconciler.model import RunMode, RunStatus
from reconciler.ports import RunLog

log = logging.getLogger(__name__)


@dataclass
class RunRecord:
    """What a block tells the run log about its run."""

    run_id: str
    status: RunStatus = RunStatus.SUCCEEDED
    counts: dict[str, Any] = field(default_factory=dict)
    #: Metric columns (``rows_written``, ``points_written``...).
    stats: dict[str, float] = field(default_factory=dict)


@contextmanager
def recorded(
    table: RunLog,
    *,
    mode: RunMode,
    actor: str,
    shard: str | None = None,
    job: str | None = None,
) -> Iterator[RunRecord]:
    """Record a run for the duration of the block (see the module docstring)."""
    record = RunRecord(table.start_run(mode=mode, actor=actor, shard=shard, job=job))
    try:
        yield record
    except BaseException as exc:
        finish_failed(table, record.run_id, exc, counts=record.counts, stats=record.stats)
        raise
    table.finish_run(
        record.run_id, status=record.status, counts=record.counts, error=None, **record.stats
    )


def error_text(exc: BaseException) -> str:
    """How the run log names the error a run ended with."""
    return f"{type(exc).__name__}: {exc}"


def finish_failed(
    table: RunLog,
    run_id: str,
    exc: BaseException,
    *,
    counts: Mapping[str, Any] | None = None,
    stats: Mapping[str, float] | None = None,
) -> None:
    """End run ``run_id`` as failed with ``exc``. The log may be what failed: then this logs
    and returns, so the caller re-raises the first error, never this one."""
    try:
        table.finish_run(
            run_id,
            status=RunStatus.FAILED,
            counts=dict(counts or {}),
            error=error_text(exc),
            **dict(stats or {}),
        )
    except Exception as again:
        log.error("could not record the failure of run %s: %s", run_id, again)
