"""Prometheus metrics, built from the run log in the document database and from live runs.

``RunLogCollector`` reads the database on each collection, so ``serve`` (scraped) and a cron
``run`` (a fresh registry written to a node_exporter textfile or pushed to a Pushgateway) expose
the same numbers, counters survive restarts, and a failed run can never move the last success
timestamp. ``LiveMetrics`` holds what only a running process knows: run durations by check, the
lease, and health.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import push_to_gateway, write_to_textfile
from prometheus_client.registry import Collector

from reconciler import __version__

log = logging.getLogger(__name__)

PREFIX = "reconciler_"
JOB_LABEL = "reconciler_job"  # not "job": that label belongs to the scrape config
#: Finding kinds that name a source document the connector could not parse.
BROKEN_KINDS = frozenset({"invalid_source_document", "source_problem"})


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


class RunLogCollector(Collector):
    """Metrics from the database: timestamps, totals, outstanding findings, quarantines."""

    def __init__(
        self,
        snapshot: Callable[[], dict[str, Any]],
        fault: Callable[[], str | None] = lambda: None,
        unrecorded: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self._snapshot = snapshot
        #: The storage fault the last job met (disk full, corruption), if it still stands.
        self._fault = fault
        #: Failed jobs the run log could not record (by job), counted by the process.
        self._unrecorded = unrecorded
        #: The run log's failures by job at the last scrape that could read it.
        self._failures: dict[str, float] | None = None

    def collect(self) -> Iterator[Metric]:
        """One consistent snapshot per scrape."""
        try:
            data = self._snapshot()
        except Exception as exc:  # a scrape must not crash the daemon; `up` stays 1, info says
            log.warning("metrics: cannot read the run log: %s", exc)
            data = None
        info = GaugeMetricFamily(f"{PREFIX}build_info", "Build information.", labels=["version"])
        info.add_metric([__version__], 1.0)
        yield info
        readable = GaugeMetricFamily(
            f"{PREFIX}run_log_readable",
            "1 when the run log (document database) could be read, and the last job met no "
            "storage fault (disk full, I/O error, corruption).",
        )
        readable.add_metric([], 0.0 if data is None or self._fault() else 1.0)
        yield readable
        if data is None:
            if self._failures is not None:  # (the counter's base is known: it can go on)
                yield self._failure_counter(self._failures)
            return
        yield from self._jobs(data["jobs"])
        yield from self._totals(data)
        yield from self._findings(data["findings"])
        quarantined = GaugeMetricFamily(
            f"{PREFIX}quarantined_families",
            "Families with quarantined documents, by quarantine reason.",
            labels=["reason"],
        )
        for reason, count in sorted(data["quarantined_families"].items()):
            quarantined.add_metric([reason], float(count))
        yield quarantined
        up = GaugeMetricFamily(
            f"{PREFIX}source_up", "1 when the source's last read succeeded.", labels=["source"]
        )
        errors = CounterMetricFamily(
            f"{PREFIX}source_errors", "Failed reads of a source.", labels=["source"]
        )
        for name, state in sorted(data["sources"].items()):
            up.add_metric([name], 1.0 if state["up"] else 0.0)
            errors.add_metric([name], float(state["failures"]))
        yield up
        yield errors
        yield from self._audit_head(data.get("audit_head"))

    def _audit_head(self, head: Mapping[str, Any] | None) -> Iterator[Metric]:
        """The audit chain's head: its entries and (a label) its hash's first 16 digits, so
        that the series Prometheus keeps, outside the table, witness the chain's growth."""
        if head is None:
            return
        entries = GaugeMetricFamily(
            f"{PREFIX}audit_entries", "Entries of the audit chain, at its head."
        )
        entries.add_metric([], float(head["entries"]))
        info = GaugeMetricFamily(
            f"{PREFIX}audit_head_info",
            "The audit chain's head (the first 16 hex digits of its last entry's hash).",
            labels=["head"],
        )
        info.add_metric([str(head["hash"])[:16]], 1.0)
        yield entries
        yield info

    def _jobs(self, jobs: dict[str, dict[str, Any]]) -> Iterator[Metric]:
        last_run = GaugeMetricFamily(
            f"{PREFIX}last_run_timestamp_seconds",
            "Start of the last finished run.",
            labels=[JOB_LABEL],
        )
        last_success = GaugeMetricFamily(
            f"{PREFIX}last_success_timestamp_seconds",
            "End of the last successful run (a partial run, which could not read a source, "
            "does not count).",
            labels=[JOB_LABEL],
        )
        last_ok = GaugeMetricFamily(
            f"{PREFIX}last_run_success",
            "1 when the last finished run succeeded (0 when it failed, was refused, or was "
            "partial: a source could not be read).",
            labels=[JOB_LABEL],
        )
        for job, entry in sorted(jobs.items()):
            if (value := _ts(entry["last_run"])) is not None:
                last_run.add_metric([job], value)
                last_ok.add_metric([job], 1.0 if entry["last_ok"] else 0.0)
            if (value := _ts(entry["last_success"])) is not None:
                last_success.add_metric([job], value)
        self._failures = {job: float(entry["failures"]) for job, entry in jobs.items()}
        yield from (last_run, last_success, last_ok, self._failure_counter(self._failures))

    def _failure_counter(self, recorded: Mapping[str, float]) -> Metric:
        """Failed runs by job: the run log's, plus the failures it could not record (a
        document-table outage), so the counter rises whether the table is there or not.
        While the table is unreadable, the run log's part is its last reading."""
        failures = CounterMetricFamily(
            f"{PREFIX}run_failures", "Runs that failed.", labels=[JOB_LABEL]
        )
        unrecorded = self._unrecorded()
        for job in sorted(set(recorded) | set(unrecorded)):
            failures.add_metric([job], recorded.get(job, 0.0) + unrecorded.get(job, 0))
        return failures

    def _totals(self, data: dict[str, Any]) -> Iterator[Metric]:
        totals = data["totals"]
        for name, help_text in (
            ("table_writes", "Document rows updated by repairs."),
            ("payload_writes", "Payload write groups (one per document and prior payload)."),
            ("points_written", "Chunk points whose payload a repair set."),
            ("reingest_requests", "Re-ingest requests queued in the outbox."),
            ("points_scanned", "Chunk points scanned by reconciliation runs."),
        ):
            counter = CounterMetricFamily(f"{PREFIX}{name}", help_text)
            counter.add_metric([], float(totals[name]))
            yield counter
        refusals = CounterMetricFamily(
            f"{PREFIX}guard_refusals", "Runs refused by the blast-radius guard."
        )
        refusals.add_metric([], float(data["guard_refusals"]))
        yield refusals
        repairs = CounterMetricFamily(
            f"{PREFIX}repairs", "Findings repaired, by check and kind.", labels=["check", "kind"]
        )
        for check, kind, count in sorted(data["repairs"]):
            repairs.add_metric([check, kind], float(count))
        yield repairs

    def _findings(
        self, findings: list[tuple[str, str, str, str | None, str | None]]
    ) -> Iterator[Metric]:
        counts: dict[tuple[str, str, str], int] = defaultdict(int)
        live_siblings: set[str | None] = set()
        ttl_families: set[str | None] = set()
        broken: set[str] = set()
        unnamed = 0  # problems no document id names (counted one each)
        for check, kind, severity, family, doc_id in findings:
            counts[(check, kind, severity)] += 1
            if kind == "live_siblings":
                live_siblings.add(doc_id)
            if kind == "ttl_expired":
                ttl_families.add(family)
            if kind in BROKEN_KINDS:
                if doc_id is None:
                    unnamed += 1
                else:
                    broken.add(doc_id)
        gauge = GaugeMetricFamily(
            f"{PREFIX}findings",
            "Outstanding findings of each check's latest run.",
            labels=["check", "kind", "severity"],
        )
        for (check, kind, severity), count in sorted(counts.items()):
            gauge.add_metric([check, kind, severity], float(count))
        yield gauge
        siblings = GaugeMetricFamily(
            f"{PREFIX}live_siblings",
            "Documents live beside a started later sibling, after the latest run.",
        )
        siblings.add_metric([], float(len(live_siblings)))
        yield siblings
        ttl = GaugeMetricFamily(
            f"{PREFIX}ttl_expired_families", "Families whose polling source is past its TTL."
        )
        ttl.add_metric([], float(len(ttl_families)))
        yield ttl
        documents = GaugeMetricFamily(
            f"{PREFIX}broken_documents",
            "Source documents the connector could not fully read (a whole file or one field; "
            "registered or not), after the latest run.",
        )
        documents.add_metric([], float(len(broken) + unnamed))
        yield documents


@dataclass
class LiveMetrics:
    """What only a running process knows: durations, the lease, health."""

    registry: CollectorRegistry
    healthy: bool = True
    problem: str | None = None
    #: A storage fault (disk full, I/O error, corruption) met by the last job, until a job
    #: succeeds again.
    store_fault: str | None = None
    #: When the full job must next have succeeded by (its next time after serve started or
    #: after its last success, plus a grace); past it, /healthz answers 503. None: not known.
    full_due: datetime | None = None
    #: Failed jobs whose failure the run log could not record, by job (it was unreachable).
    unrecorded_failures: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.duration = Histogram(
            f"{PREFIX}run_duration_seconds",
            "Time spent in each check per run (and 'total' for the whole run).",
            labelnames=["check"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600),
            registry=self.registry,
        )
        self.lease_held = Gauge(
            f"{PREFIX}lease_held",
            "1 while this process holds the single-runner lease of a shard.",
            labelnames=["shard"],
            registry=self.registry,
        )
        self.lease_skips = Counter(
            f"{PREFIX}lease_skips",
            "Runs skipped because another runner held the lease.",
            labelnames=["shard"],
            registry=self.registry,
        )

    def observe(self, *, timings: Mapping[str, float], total: float) -> None:
        """Record one run's durations."""
        for check, seconds in timings.items():
            self.duration.labels(check=check).observe(seconds)
        self.duration.labels(check="total").observe(total)

    def count_unrecorded_failure(self, job: str) -> None:
        """A job failed, and the run log does not hold its failure."""
        with self._lock:
            self.unrecorded_failures[job] = self.unrecorded_failures.get(job, 0) + 1

    def unrecorded(self) -> dict[str, int]:
        """A copy of ``unrecorded_failures``."""
        with self._lock:
            return dict(self.unrecorded_failures)

    def set_health(self, healthy: bool, problem: str | None = None) -> None:
        """Set what /healthz answers."""
        with self._lock:
            self.healthy, self.problem = healthy, problem

    def health(self, now: datetime) -> tuple[bool, str | None]:
        """What /healthz answers at ``now``: the last job's health, and whether the full job
        is overdue (stalled, refused, failing or never run since it was due)."""
        with self._lock:
            healthy, problem, due = self.healthy, self.problem, self.full_due
        if healthy and due is not None and now > due:
            return False, (
                f"the full job has not succeeded since it was due (by {due.isoformat()}): "
                "it is stalled, failing or refused; see `reconciler status` and the logs"
            )
        return healthy, problem


def build_registry(snapshot: Callable[[], dict[str, Any]]) -> tuple[CollectorRegistry, LiveMetrics]:
    """A fresh registry with the run-log collector and live metrics."""
    registry = CollectorRegistry(auto_describe=True)
    live = LiveMetrics(registry)
    registry.register(
        RunLogCollector(snapshot, fault=lambda: live.store_fault, unrecorded=live.unrecorded)
    )
    return registry, live


def export(
    registry: CollectorRegistry,
    *,
    textfile: str = "",
    pushgateway: str = "",
    grouping: dict[str, str] | None = None,
) -> list[str]:
    """Write the registry to a node_exporter textfile (atomically) and/or push it."""
    done = []
    if textfile:
        write_to_textfile(textfile, registry)  # writes a temp file, then renames it
        done.append(f"textfile {textfile}")
    if pushgateway:
        push_to_gateway(
            pushgateway,
            job="reconciler",
            registry=registry,
            grouping_key=grouping or {},
            timeout=10,
        )
        done.append(f"pushgateway {pushgateway}")
    return done
