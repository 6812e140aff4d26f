"""One run's record in the run log, from start to end: the one lifecycle every command shares.

``recorded`` starts the record, and ends it ``failed`` with the error when the block raises
(never hiding that error if the log itself cannot be written), else with the status, counts
and statistics the block set on the ``RunRecord`` it was given. A reconciliation, whose
record also holds its checks, its findings and what it wrote, is started and ended by
``start_reconciliation`` and ``finish_reconciliation`` (``pipeline/recording.py``, and
``app/operations.py`` for one that failed before it was recorded).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from reconciler.model import Finding, RunMode, RunStatus
from reconciler.planning import outstanding
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
    forced: bool = False,
) -> Iterator[RunRecord]:
    """Record a run for the duration of the block (see the module docstring; ``forced``: a run
    under ``--force``)."""
    record = RunRecord(table.start_run(mode=mode, actor=actor, shard=shard, job=job, forced=forced))
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


def start_reconciliation(
    table: RunLog,
    *,
    run_id: str | None,
    mode: str,
    actor: str,
    shard: str,
    job: str,
    checks: str,
    forced: bool = False,
    refused: bool = False,
) -> str:
    """Record a reconciliation as started (``refused``: as refused by the guard)."""
    return table.start_run(
        mode=mode,
        actor=actor,
        forced=forced,
        shard=shard,
        status=RunStatus.REFUSED if refused else RunStatus.RUNNING,
        run_id=run_id,
        job=job,
        checks=checks,
    )


def finish_reconciliation(
    table: RunLog,
    run_id: str,
    *,
    status: RunStatus,
    findings: Sequence[Finding],
    counts: Mapping[str, Any],
    written: Mapping[str, Any],
    error: str | None = None,
    **stats: float,
) -> None:
    """Record a reconciliation's findings, with whether each still holds after what it wrote
    (``written``: the apply's counts, empty when nothing was applied), and its end."""
    table.record_findings(
        run_id,
        findings,
        outstanding=[outstanding(f, applied=status.applied) for f in findings],
    )
    table.finish_run(
        run_id,
        status=status,
        counts=counts,
        error=error,
        rows_written=int(written.get("table", 0)),
        payload_writes=int(written.get("payload", 0)),
        points_written=int(written.get("points", 0)),
        reingest_requests=int(written.get("reingest", 0)),
        **stats,
    )


# -- issue 39: serve's watch notes, in a full run's log, what it missed --------------------
def record_noted(runs: RunLog, run_id: str, findings: Sequence[Finding]) -> None:
    """Add findings to a finished run's log, none outstanding (what happened, already
    repaired: ``watch/missed_by_watch`` after serve's full job)."""
    runs.record_findings(run_id, findings, outstanding=[False] * len(findings))
