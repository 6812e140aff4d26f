"""The run log repository: each run's record from start to end, and the findings it made."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from reconciler.model import encoder_of, storable
from reconciler.stores.sql.bulk import driver_connection, insert_through_driver
from reconciler.stores.sql.connection import now
from reconciler.stores.sql.schema import Base, FindingRow, RunRow

_FINDINGS = Base.metadata.tables[FindingRow.__tablename__]


#: Values with no text in them (matched exactly), left as they are.
_NO_TEXT = frozenset({int, float, bool, type(None)})


def _storable_finding(value: dict[str, Any]) -> dict[str, Any]:
    """A finding's JSON with NUL characters and lone surrogates spelled out: told at once by
    the C encoder when there are none (its ASCII text escapes every NUL, control character
    and non-ASCII character as ``\\u``: with none, every string is stored as it is), else
    walked (``_without_nul``)."""
    try:
        if "\\u" not in _ENCODE(value):
            return value
    except (TypeError, ValueError):  # (a value JSON does not take: walked as before)
        pass
    result: dict[str, Any] = _without_nul(value)
    return result


_ENCODE = encoder_of(json.JSONEncoder(check_circular=False))
#: A finding's JSON columns, bound as the text made for them (``_with_texts``).
_AS_IS = {"expected": "expected", "actual": "actual"}


def _with_texts(value: dict[str, Any]) -> dict[str, Any]:
    """``_storable_finding(value)`` with its ``expected`` and ``actual`` as the text the JSON
    column's bind processor stores on SQLite (``json.dumps``'s, the same encoder's defaults),
    for the driver's insert (``_AS_IS``): each encoded once, the storable check read off those
    texts and the rest's (a 100,000-proposal declare records 300,000 findings: the check's
    encoding and the processor's were a second and third encoding of each)."""
    try:
        expected, actual = _ENCODE(value["expected"]), _ENCODE(value["actual"])
        rest = _ENCODE([v for k, v in value.items() if k not in _AS_IS])
        clean = "\\u" not in expected and "\\u" not in actual and "\\u" not in rest
    except (TypeError, ValueError):  # (walked, as ``_storable_finding`` does)
        clean = False
    if not clean:
        value = _without_nul(value)
        expected, actual = _ENCODE(value["expected"]), _ENCODE(value["actual"])
    return {**value, "expected": expected, "actual": actual}


def _without_nul(value: Any) -> Any:
    """NUL characters and lone surrogates spelled out (``storable``), recursively."""
    if type(value) in _NO_TEXT:  # (most of a finding's leaves)
        return value
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


class SqlRunLog:
    """Runs (started, finished, refused, interrupted) and their findings."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def start_run(
        self,
        *,
        mode: str,
        actor: str,
        forced: bool = False,
        shard: str | None = None,
        status: str = "running",
        run_id: str | None = None,
        job: str | None = None,
        checks: str | None = None,
    ) -> str:
        """Record a run as started (or refused); return its id."""
        run_id = run_id or str(uuid.uuid4())
        with self._sessions.begin() as session:
            session.add(
                RunRow(
                    run_id=run_id,
                    mode=mode,
                    actor=actor,
                    status=status,
                    started_at=now(),
                    forced=forced,
                    shard=shard,
                    job=job or mode,
                    checks=checks,
                )
            )
        return run_id

    _RUN_STATS = frozenset(
        {
            "duration_seconds",
            "chunks_scanned",
            "rows_written",
            "payload_writes",
            "points_written",
            "reingest_requests",
        }
    )

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        counts: Mapping[str, Any] | None = None,
        error: str | None = None,
        **stats: float,
    ) -> None:
        """Record a run's end; ``stats`` fill the metric columns (``chunks_scanned``...)."""
        unknown = set(stats) - self._RUN_STATS
        if unknown:
            raise TypeError(f"unknown run statistics: {', '.join(sorted(unknown))}")
        with self._sessions.begin() as session:
            session.execute(
                update(RunRow)
                # An interrupted run was declared dead by the next lease holder: final.
                .where(RunRow.run_id == run_id, RunRow.status != "interrupted")
                .values(
                    status=status,
                    finished_at=now(),
                    counts=dict(counts or {}),
                    error=error,
                    **stats,
                )
            )

    def set_run_counts(self, run_id: str, counts: Mapping[str, Any]) -> None:
        """Replace a finished run's counts (recovery clears what it resolved)."""
        with self._sessions.begin() as session:
            session.execute(
                update(RunRow).where(RunRow.run_id == run_id).values(counts=dict(counts))
            )

    def rollbacks(self) -> dict[str, str]:
        """Succeeded rollback runs and the run each rolled back."""
        with Session(self.engine) as session:
            rows = session.execute(
                select(RunRow.run_id, RunRow.counts).where(
                    RunRow.mode == "rollback", RunRow.status == "succeeded"
                )
            )
            return {
                run_id: counts["rolled_back"]
                for run_id, counts in rows
                if isinstance(counts, dict) and counts.get("rolled_back")
            }

    def runs_to_resolve(self, *, shard: str) -> list[tuple[str, str]]:
        """Runs of ``shard`` recorded as running, and failed runs that left a payload batch
        unconfirmed: (run_id, status), oldest first."""
        with Session(self.engine) as session:
            rows = session.execute(
                select(RunRow.run_id, RunRow.status, RunRow.counts)
                .where(RunRow.shard == shard, RunRow.status.in_(("running", "failed")))
                .order_by(RunRow.started_at)
            )
            return [
                (run_id, status)
                for run_id, status, counts in rows
                if status == "running" or (isinstance(counts, dict) and counts.get("unconfirmed"))
            ]

    def last_runs(self, limit: int = 5) -> list[RunRow]:
        """The most recent runs, newest first."""
        with Session(self.engine) as session:
            return list(
                session.scalars(select(RunRow).order_by(RunRow.started_at.desc()).limit(limit))
            )

    def run_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """Ids of runs that start with ``prefix`` (at most ``limit``, newest first)."""
        with Session(self.engine) as session:
            return list(
                session.scalars(
                    select(RunRow.run_id)
                    .where(RunRow.run_id.startswith(prefix, autoescape=True))
                    .order_by(RunRow.started_at.desc())
                    .limit(limit)
                )
            )

    def get_run(self, run_id: str) -> RunRow | None:
        """One run's record."""
        with Session(self.engine) as session:
            return session.get(RunRow, run_id)

    # -- findings ---------------------------------------------------------------------------

    def record_findings(
        self, run_id: str, findings: Sequence[Any], *, outstanding: Sequence[bool] | None = None
    ) -> None:
        """Store a run's findings (``Finding`` values) and whether each still holds."""
        flags = list(outstanding) if outstanding is not None else [True] * len(findings)
        if not findings and not flags:
            return
        # One executemany (no ORM object, unit of work or ORM bulk insert a finding: a repair
        # of 4,000 documents records 4,000 of them, a declare of 100,000 links 300,000):
        # straight to SQLite's driver, the JSON columns' texts made once; else through Core.
        with self._sessions.begin() as session:
            direct = driver_connection(session) is not None
            stored = _with_texts if direct else _storable_finding
            rows = [
                {"run_id": run_id, "outstanding": flag, **stored(f.to_json())}
                for f, flag in zip(findings, flags, strict=True)
            ]
            if direct:
                insert_through_driver(session, _FINDINGS, rows, as_is=_AS_IS)
            else:
                session.execute(insert(_FINDINGS), rows)

    def findings_of(self, run_id: str) -> list[dict[str, Any]]:
        """The findings a run recorded."""
        with Session(self.engine) as session:
            rows = session.scalars(
                select(FindingRow).where(FindingRow.run_id == run_id).order_by(FindingRow.id)
            )
            return [
                {
                    "check": r.check,
                    "kind": r.kind,
                    "severity": r.severity,
                    "family": r.family,
                    "doc_id": r.doc_id,
                    "expected": r.expected,
                    "actual": r.actual,
                    "action": r.action,
                }
                for r in rows
            ]
