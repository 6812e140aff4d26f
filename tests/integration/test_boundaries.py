"""Boundaries on the instant: serve plans the dates check at the table's next
``effective_from``/``effective_to``, and plans again after every job; payload states flip at
that instant, not at the next ``dates`` job. APScheduler runs on a ManualClock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment
from apscheduler.executors import base as executor_base
from apscheduler.executors.debug import DebugExecutor
from apscheduler.schedulers import base as scheduler_base
from apscheduler.schedulers.base import BaseScheduler

from reconciler.app.boundaries import Boundaries, table_boundary
from reconciler.app.daemon import Runner
from reconciler.clock import ManualClock
from reconciler.metrics import build_registry
from reconciler.stores.sql import SqlDocumentTable


class _ThreadlessScheduler(BaseScheduler):
    """No thread of its own: the test processes due jobs when its clock moves."""

    def wakeup(self) -> None:
        pass

    def shutdown(self, wait: bool = True) -> None:
        super().shutdown(wait)


def _clock_datetime(clock: ManualClock) -> type[datetime]:
    class _Now(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return clock.now().astimezone(tz) if tz else clock.now()

    return _Now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    manual = ManualClock(datetime.now(UTC).replace(microsecond=0))
    monkeypatch.setattr(scheduler_base, "datetime", _clock_datetime(manual))
    monkeypatch.setattr(executor_base, "datetime", _clock_datetime(manual))
    return manual


def states(dep: Deployment) -> dict[str, str]:
    return {p["doc_id"]: p["version_state"] for p in dep.points().payloads.values()}


def test_payload_states_flip_at_the_boundary(tmp_path: Path, clock: ManualClock) -> None:
    handover = clock.now() + timedelta(hours=1)
    dep = Deployment(tmp_path)
    dep.note("old", id="old", family="old", status="current", effective_from="2024-01-01",
             effective_to=handover.isoformat())  # fmt: skip
    dep.note("next", id="next", family="next", status="current",
             effective_from=handover.isoformat())  # fmt: skip
    dep.init_ingest()
    assert states(dep) == {"hb:old": "current", "hb:next": "pending"}

    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    _registry, live = build_registry(table.metrics_snapshot)
    runner = Runner(dep.settings, live=live, clock=clock)
    scheduler = _ThreadlessScheduler(timezone=UTC, executors={"default": DebugExecutor()})
    boundaries = Boundaries(scheduler, runner, table_boundary(dep.settings), clock=clock)
    scheduler.start()
    try:
        boundaries.install()
        assert boundaries.planned == handover
        (job,) = scheduler.get_jobs()
        assert job.next_run_time == handover

        clock.advance_to(handover - timedelta(seconds=1))
        scheduler._process_jobs()
        assert states(dep)["hb:next"] == "pending"  # not yet

        clock.advance_to(handover + timedelta(seconds=1))
        scheduler._process_jobs()
        assert states(dep) == {"hb:old": "retired", "hb:next": "current"}
        assert boundaries.planned is None  # planned again after the run: none ahead
        assert scheduler.get_jobs() == []
    finally:
        scheduler.shutdown(wait=False)
        table.close()


def test_a_new_boundary_moves_the_plan(tmp_path: Path, clock: ManualClock) -> None:
    dep = Deployment(tmp_path)
    later = clock.now() + timedelta(days=2)
    dep.note("a", id="a", family="a", status="current", effective_from=later.isoformat())
    dep.init_ingest()
    scheduler = _ThreadlessScheduler(timezone=UTC, executors={"default": DebugExecutor()})
    ran: list[str] = []
    boundaries = Boundaries(
        scheduler, lambda spec: ran.append(spec.job_id), table_boundary(dep.settings), clock=clock
    )
    scheduler.start()
    try:
        boundaries.install()
        assert boundaries.planned == later
        sooner = clock.now() + timedelta(minutes=3)
        dep.note("b", id="b", family="b", status="current", effective_from=sooner.isoformat())
        assert dep.json("ingest")[0] == 0
        assert boundaries.plan() == sooner  # (serve plans again after every job)
        assert [job.next_run_time for job in scheduler.get_jobs()] == [sooner]
        clock.advance_to(sooner)
        scheduler._process_jobs()
        assert ran == ["boundary"]
    finally:
        scheduler.shutdown(wait=False)
