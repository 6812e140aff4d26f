"""The ``plans`` table: saved plans, from the refused run that saved one to the run that
applied it (``reconciler apply --plan ID``), or a forced run's own, kept so the runner that
finds it dead finishes it (``reconciler.writing.approving``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session, sessionmaker

from reconciler.stores.sql.schema import AuditHeadRow, PlanRow


class SqlPlans:
    """Saved plans, saved once per fingerprint and claimed at most once."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def save_plan(self, plan: Mapping[str, Any]) -> str:
        """Save ``plan`` (columns by name; ``audit_head`` empty: the chain's head now), unless a pending plan with its fingerprint that
        has not expired is saved already: that one's id."""
        with self._sessions.begin() as session:
            kept = session.scalar(
                select(PlanRow.plan_id)
                .where(
                    PlanRow.fingerprint == plan["fingerprint"],
                    PlanRow.status == "pending",
                    PlanRow.expires_at > plan["created_at"],
                )
                .limit(1)
            )
            if kept is not None and plan["status"] == "pending":
                return str(kept)
            values = dict(plan)
            if not values.get("audit_head"):
                head = session.get(AuditHeadRow, 1)
                values["audit_head"] = head.entry_hash if head is not None else ""
            session.add(PlanRow(**values))
            return str(plan["plan_id"])

    def saved_plan(self, plan_id: str) -> PlanRow | None:
        """One plan by its id."""
        with Session(self.engine) as session:
            return session.get(PlanRow, plan_id)

    def plan_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """Ids of plans that start with ``prefix`` (at most ``limit``, newest first)."""
        with Session(self.engine) as session:
            return list(
                session.scalars(
                    select(PlanRow.plan_id)
                    .where(PlanRow.plan_id.startswith(prefix, autoescape=True))
                    .order_by(PlanRow.created_at.desc())
                    .limit(limit)
                )
            )

    def saved_plans(
        self, *, statuses: Iterable[str] | None = None, limit: int = 20
    ) -> list[PlanRow]:
        """Plans, newest first (``statuses``: only those)."""
        query = select(PlanRow).order_by(PlanRow.created_at.desc()).limit(limit)
        if statuses is not None:
            query = query.where(PlanRow.status.in_(list(statuses)))
        with Session(self.engine) as session:
            return list(session.scalars(query))

    def plan_applied_by(self, run_id: str) -> PlanRow | None:
        """The plan run ``run_id`` applies or applied, if any."""
        with Session(self.engine) as session:
            return session.scalar(select(PlanRow).where(PlanRow.applied_run == run_id).limit(1))

    def claim_plan(self, plan_id: str, *, run_id: str, at: datetime) -> bool:
        """Pending -> ``applying`` by ``run_id``, in one conditional update."""
        with self._sessions.begin() as session:
            done = session.execute(
                update(PlanRow)
                .where(PlanRow.plan_id == plan_id, PlanRow.status == "pending")
                .values(status="applying", applied_run=run_id, applied_at=at)
            )
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def set_plan_status(self, plan_id: str, status: str, *, at: datetime | None = None) -> None:
        """Set a plan's status (and when it was applied, ``at``)."""
        values: dict[str, Any] = {"status": status}
        if at is not None:
            values["applied_at"] = at
        with self._sessions.begin() as session:
            session.execute(update(PlanRow).where(PlanRow.plan_id == plan_id).values(**values))
