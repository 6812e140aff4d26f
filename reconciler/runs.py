"""One run's record in the run log, from start to end: the one lifecycle every command shares.

``recorded`` starts the record, and ends it ``failed`` with the error when the block raises
(never hiding that error if the log itself cannot be written), else with the status, counts
and statistics the block set on the ``RunRecord`` it was given.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from reconciler.ports import RunLog

log = logging.getLogger(__name__)


@dataclass
class RunRecord:
    """What a block tells the run log about its run."""

    run_id: str
    status: str = "succeeded"
    counts: dict[str, Any] = field(default_factory=dict)
    #: Metric columns (``rows_written``, ``points_written``...).
    stats: dict[str, float] = field(default_factory=dict)


@contextmanager
def recorded(
    table: RunLog,
    *,
    mode: str,
    actor: str,
    shard: str | None = None,
    job: str | None = None,
) -> Iterator[RunRecord]:
    """Record a run for the duration of the block (see the module docstring)."""
    record = RunRecord(table.start_run(mode=mode, actor=actor, shard=shard, job=job))
    try:
        yield record
    except BaseException as exc:
        try:
            table.finish_run(
                record.run_id,
                status="failed",
                counts=record.counts,
                error=f"{type(exc).__name__}: {exc}",
                **record.stats,
            )
        except Exception as again:  # the log may be what failed: keep the first error
            log.error("could not record the failure of run %s: %s", record.run_id, again)
        raise
    table.finish_run(
        record.run_id, status=record.status, counts=record.counts, error=None, **record.stats
    )
