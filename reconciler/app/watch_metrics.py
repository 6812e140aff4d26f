"""What ``serve``'s watch says of itself on ``/metrics``: how stale the served set was when a
change reached it, the scoped runs by outcome, the lag of what waits, the misses the full job
found and whether each source's watcher runs (docs/operations.md, the metrics table)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class WatchMetrics:
    """``reconciler_staleness_seconds``, ``reconciler_incremental_runs_total``,
    ``reconciler_watch_lag_seconds`` and ``reconciler_watcher_up``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.staleness = Histogram(
            "reconciler_staleness_seconds",
            "From a change as its source dates it (file mtime, commit time, page version "
            "time, row updated_at, listing Last-Modified; else when seen) to the commit of "
            "the apply that made the served set right.",
            labelnames=["source"],
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400),
            registry=registry,
        )
        self.runs = Counter(
            "reconciler_incremental_runs_total",
            "Scoped runs the watch started, by source and outcome (applied, idle: nothing of "
            "the source's documents changed, busy: the lease was held, failed).",
            labelnames=["source", "outcome"],
            registry=registry,
        )
        self.lag = Gauge(
            "reconciler_watch_lag_seconds",
            "Age (by the source's date) of the oldest change the watch has seen and not yet "
            "reconciled; 0 when none waits.",
            labelnames=["source"],
            registry=registry,
        )
        self.missed = Counter(
            "reconciler_watch_missed_total",
            "Documents of watched sources the full job repaired that the watch had not "
            "reconciled (each also a finding watch/missed_by_watch of that run).",
            labelnames=["source"],
            registry=registry,
        )
        self.up = Gauge(
            "reconciler_watcher_up",
            "1 while the watch of a source runs (its watcher alive, its last poll answered).",
            labelnames=["source"],
            registry=registry,
        )
