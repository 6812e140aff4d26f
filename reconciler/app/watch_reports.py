"""What ``serve``'s watch tells: each source's mark and lag (``status_of``; ``watch_rows`` and
``watch_section`` for ``status``, from the table's marks), and what the
full job repaired that the watch had not, a finding of its own (``watch/missed_by_watch``),
logged and counted, so that a miss is visible, not silent (``note_missed``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from apscheduler.events import JobExecutionEvent

from reconciler.app.followers import followed
from reconciler.app.watch_metrics import WatchMetrics
from reconciler.app.wiring import open_table
from reconciler.model import Finding, Severity
from reconciler.pipeline.values import Report
from reconciler.settings import Settings
from reconciler.writing.runs import record_noted

if TYPE_CHECKING:
    from reconciler.stores.sql.watermarks import WatchMark

log = logging.getLogger("reconciler.app.watching")


def note_missed(
    settings: Settings, sources: Sequence[Any], metrics: WatchMetrics, event: JobExecutionEvent
) -> None:
    """After serve's full job (an APScheduler listener): what it repaired in a watched
    source's documents is what the watch missed. Each is recorded as a finding of its own
    in the full run's log (check ``watch``, kind ``missed_by_watch``), logged and counted
    (``reconciler_watch_missed_total``): a miss is visible, not silent."""
    report = event.retval
    if not (event.job_id.startswith("full") and isinstance(report, Report)):
        return
    if report.applied is None or report.run_id is None or report.refused:
        return
    quiet = {w.name for w in sources if not w.batch.paths}  # none in flight
    missed = [
        finding
        for finding in report.findings
        if finding.doc_id
        and finding.doc_id.split(":", 1)[0] in quiet
        and (finding.changes or finding.quarantine or finding.reingest)
    ]
    if not missed:
        return
    noted = [
        Finding(
            check="watch",
            kind="missed_by_watch",
            severity=Severity.WARNING,
            family=finding.family,
            doc_id=finding.doc_id,
            expected={"reconciled by": "serve's watch"},
            actual={"repaired by": f"the full job ({finding.check}/{finding.kind})"},
            action="none: the full job repaired it; read serve's log for why the watch "
            "did not (a watcher down, events lost, a source it cannot follow)",
        )
        for finding in missed
    ]
    table = open_table(settings)
    try:
        record_noted(table, report.run_id, noted)
    finally:
        table.close()
    for finding in noted:
        source = (finding.doc_id or "").split(":", 1)[0]
        metrics.missed.labels(source=source).inc()
    log.warning(
        "full job %s repaired %d document(s) of watched sources the watch had not: %s",
        report.run_id,
        len(noted),
        few(f.doc_id or "" for f in noted),
    )


def few(items: Iterable[str], limit: int = 5) -> str:
    """At most ``limit`` of ``items``, sorted, and how many more (for a log line)."""
    shown = sorted(items)
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(shown[:limit]) + more


def status_of(sources: Sequence[Any], now: datetime) -> list[dict[str, Any]]:
    """Each watched source's mark and lag at ``now`` (for /healthz and logs)."""
    shown = []
    for watched in sources:
        commit, until = watched.reached()
        oldest = watched.batch.oldest()
        shown.append(
            {
                "source": watched.name,
                "mark": commit,
                "changed_until": until.isoformat() if until else None,
                "pending": len(watched.batch.paths),
                "lag_seconds": (now - oldest).total_seconds() if oldest else 0.0,
                "alive": watched.alive(),
            }
        )
    return shown


def watch_rows(
    settings: Settings, marks: dict[str, WatchMark], now: datetime
) -> list[dict[str, Any]]:
    """``status``: each watched source's mark as the table holds it, and how long ago the
    watch last reconciled it."""
    shown = []
    for config in settings.sources:
        if not followed(config):
            continue
        mark = marks.get(config.name)
        shown.append(
            {
                "source": config.name,
                "mark": mark.mark if mark else None,
                "changed_until": _iso(mark.changed_until) if mark else None,
                "reconciled_at": _iso(mark.reconciled_at) if mark else None,
                "age_seconds": round((now - mark.reconciled_at).total_seconds(), 1)
                if mark
                else None,
            }
        )
    return shown


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def watch_table(
    rows: Sequence[Mapping[str, Any]], table: Callable[[list[str], list[list[Any]]], str]
) -> str:
    """Each watched source's mark, what it covers and when serve last reconciled it (laid
    out by ``table``, the rendering's)."""
    return table(
        ["watched source", "mark", "changes up to", "reconciled", "age (s)"],
        [
            [
                w["source"],
                (w["mark"] or "")[:12],
                w["changed_until"] or "",
                w["reconciled_at"] or "not yet (serve sets it)",
                "" if w["age_seconds"] is None else w["age_seconds"],
            ]
            for w in rows
        ],
    )


def watch_section(
    data: Mapping[str, Any], table: Callable[[list[str], list[list[Any]]], str]
) -> str:
    """The watched sources' table, after the rest of ``status`` ("" when none is watched)."""
    return "\n\n" + watch_table(data["watch"], table) if data.get("watch") else ""
