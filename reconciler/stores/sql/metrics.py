"""The metrics repository: what the Prometheus collector and ``reconciler status`` read.

Read-only aggregates over the run log, findings, documents, outbox and source status.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from reconciler.errors import TableUnavailable
from reconciler.stores.sql.schema import (
    AuditHeadRow,
    DeclarationRow,
    DocumentRow,
    FindingRow,
    OutboxRow,
    RunRow,
    SourceStatusRow,
)

#: Runs that wrote their whole plan (a partial run did; a source was unreadable).
APPLIED = ("succeeded", "partial")
#: Runs whose findings stand as their checks' latest.
FINISHED = ("succeeded", "partial", "failed", "refused")


class SqlMetrics:
    """The metrics snapshot (per job, totals, findings, quarantine, sources) and status counts."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def metrics_snapshot(self, *, recent_runs: int = 500) -> dict[str, Any]:
        """Everything the Prometheus collector exposes that lives in the database.

        Timestamps and totals per job come from the run log (so a failed run never moves the
        last success, nor does a partial one, which left an unreadable source unreconciled;
        counters survive restarts); findings come from each check's latest
        recorded run, outstanding ones only.
        """
        with Session(self.engine) as session:
            jobs: dict[str, dict[str, Any]] = {}
            stmt = select(
                RunRow.job,
                RunRow.status,
                func.max(RunRow.started_at),
                func.max(RunRow.finished_at),
                func.count(),
            ).group_by(RunRow.job, RunRow.status)
            for job, status, started, finished, count in session.execute(stmt):
                if job is None or job == "ingest":
                    continue
                entry = jobs.setdefault(
                    job, {"last_run": None, "last_success": None, "failures": 0, "last_ok": None}
                )
                if status != "running" and (
                    entry["last_run"] is None or started > entry["last_run"]
                ):
                    entry["last_run"] = started
                    entry["last_ok"] = status == "succeeded"
                if status == "succeeded" and finished is not None:
                    entry["last_success"] = finished
                if status in ("failed", "interrupted"):
                    entry["failures"] += int(count)
            totals = session.execute(
                select(
                    func.coalesce(func.sum(RunRow.rows_written), 0),
                    func.coalesce(func.sum(RunRow.payload_writes), 0),
                    func.coalesce(func.sum(RunRow.points_written), 0),
                    func.coalesce(func.sum(RunRow.reingest_requests), 0),
                    func.coalesce(func.sum(RunRow.chunks_scanned), 0),
                ).where(RunRow.job != "ingest")
            ).one()
            refusals = session.scalar(select(func.count()).where(RunRow.status == "refused"))
            repairs = session.execute(
                select(FindingRow.check, FindingRow.kind, func.count())
                .join(RunRow, RunRow.run_id == FindingRow.run_id)
                .where(FindingRow.outstanding.is_(False), RunRow.status.in_(APPLIED))
                .group_by(FindingRow.check, FindingRow.kind)
            ).all()
            latest: dict[str, str] = {}
            recent = session.execute(
                select(RunRow.run_id, RunRow.checks)
                .where(RunRow.status.in_(FINISHED))
                .where(RunRow.checks.is_not(None))
                .order_by(RunRow.started_at.desc())
                .limit(recent_runs)
            )
            for run_id, checks in recent:
                for check in (checks or "").split(","):
                    latest.setdefault(check, run_id)
            findings: list[tuple[str, str, str, str | None, str | None]] = []
            for check, run_id in latest.items():
                rows = session.execute(
                    select(
                        FindingRow.check,
                        FindingRow.kind,
                        FindingRow.severity,
                        FindingRow.family,
                        FindingRow.doc_id,
                    ).where(
                        FindingRow.run_id == run_id,
                        FindingRow.check == check,
                        FindingRow.outstanding.is_(True),
                    )
                )
                findings += [tuple(r) for r in rows]  # type: ignore[misc]
            # Guard findings belong to no check: take them from the latest run of all.
            if latest:
                newest = session.scalar(
                    select(RunRow.run_id)
                    .where(RunRow.status.in_(FINISHED))
                    .where(RunRow.checks.is_not(None))
                    .order_by(RunRow.started_at.desc())
                    .limit(1)
                )
                rows = session.execute(
                    select(
                        FindingRow.check,
                        FindingRow.kind,
                        FindingRow.severity,
                        FindingRow.family,
                        FindingRow.doc_id,
                    ).where(FindingRow.run_id == newest, FindingRow.check == "guard")
                )
                findings += [tuple(r) for r in rows]  # type: ignore[misc]
            quarantined = session.execute(
                select(
                    DocumentRow.quarantine_reason,
                    func.count(func.distinct(DocumentRow.doc_family_id)),
                )
                .where(DocumentRow.quarantined.is_(True))
                .group_by(DocumentRow.quarantine_reason)
            ).all()
            sources = {
                row.source: {
                    "up": row.last_success_at is not None
                    and (row.last_attempt_at is None or row.last_success_at >= row.last_attempt_at),
                    "failures": int(row.failures or 0),
                }
                for row in session.scalars(select(SourceStatusRow))
            }
            head = session.get(AuditHeadRow, 1)
        return {
            "jobs": jobs,
            "totals": {
                "table_writes": int(totals[0]),
                "payload_writes": int(totals[1]),
                "points_written": int(totals[2]),
                "reingest_requests": int(totals[3]),
                "points_scanned": int(totals[4]),
            },
            "guard_refusals": int(refusals or 0),
            "repairs": [(c, k, int(n)) for c, k, n in repairs],
            "findings": findings,
            "quarantined_families": {str(r or "none"): int(n) for r, n in quarantined},
            "sources": sources,
            # the audit chain's head: exported, it is kept outside the table by Prometheus
            "audit_head": (
                {"entries": int(head.entries), "hash": head.entry_hash}
                if head is not None
                else None
            ),
        }

    def stats(self) -> dict[str, Any]:
        """Counts for ``reconciler status``: documents by state, families, chunks, quarantine,
        pending re-ingest requests, active declarations."""
        try:
            with Session(self.engine) as session:
                by_state = dict(
                    session.execute(
                        select(DocumentRow.version_state, func.count()).group_by(
                            DocumentRow.version_state
                        )
                    ).all()
                )
                families = session.scalar(
                    select(func.count(func.distinct(DocumentRow.doc_family_id)))
                )
                chunks = session.scalar(select(func.coalesce(func.sum(DocumentRow.chunk_count), 0)))
                quarantined = session.scalar(
                    select(func.count()).where(DocumentRow.quarantined.is_(True))
                )
                pending = session.scalar(select(func.count()).where(OutboxRow.status == "pending"))
                declared = session.scalar(
                    select(func.count()).where(DeclarationRow.revoked_at.is_(None))
                )
        except SQLAlchemyError as exc:
            raise TableUnavailable(f"cannot read the document table: {exc}") from None
        return {
            "documents": sum(by_state.values()),
            "by_state": {str(k): int(v) for k, v in sorted(by_state.items())},
            "families": int(families or 0),
            "chunks_registered": int(chunks or 0),
            "quarantined_documents": int(quarantined or 0),
            "reingest_pending": int(pending or 0),
            "declarations": int(declared or 0),
        }
