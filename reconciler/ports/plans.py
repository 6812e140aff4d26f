"""The saved plans' part of the document table port (``plans``): a refused run's held writes,
waiting for a person's approval, and a forced or approved run's, kept until they are written.
``TableReader`` and ``TableWriter`` (``ports.table``) include ``PlanReader`` and
``PlanWriter``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol


class SavedPlan(Protocol):
    """One saved plan, as read back (``plans`` table): the writes a refused run held back,
    or those a forced or approved run set out to make."""

    @property
    def plan_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def shard(self) -> str: ...
    @property
    def status(self) -> str:
        """``pending``, ``applying``, ``applied``, ``stale`` or ``expired``."""
        ...

    @property
    def authorized_by(self) -> str:
        """``approval`` (a person's, given by ``apply --plan``) or ``force``."""
        ...

    @property
    def created_at(self) -> datetime: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def applied_run(self) -> str | None: ...
    @property
    def applied_at(self) -> datetime | None: ...
    @property
    def audit_head(self) -> str: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def documents(self) -> int: ...
    @property
    def hidden(self) -> int: ...
    @property
    def body(self) -> dict[str, Any]: ...


class PlanReader(Protocol):
    """Saved plans, read."""

    def saved_plan(self, plan_id: str) -> SavedPlan | None:
        """One plan by its id."""
        ...

    def plan_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """Ids of plans that start with ``prefix`` (at most ``limit``, newest first)."""
        ...

    def saved_plans(
        self, *, statuses: Iterable[str] | None = None, limit: int = 20
    ) -> Sequence[SavedPlan]:
        """Plans, newest first (``statuses``: only those)."""
        ...

    def plan_applied_by(self, run_id: str) -> SavedPlan | None:
        """The plan run ``run_id`` applies or applied (its authorization), if any."""
        ...


class PlanWriter(Protocol):
    """Saved plans, written."""

    def save_plan(self, plan: Mapping[str, Any]) -> str:
        """Save a plan (the ``plans`` columns by name); when a pending plan with the same
        fingerprint, not yet expired, is saved already, keep that one. Return the id kept."""
        ...

    def claim_plan(self, plan_id: str, *, run_id: str, at: datetime) -> bool:
        """Mark a pending plan ``applying`` by run ``run_id``, in one conditional update: False
        when it is no longer pending (applied, or claimed by another run: at most once)."""
        ...

    def set_plan_status(self, plan_id: str, status: str, *, at: datetime | None = None) -> None:
        """Set a plan's status (``applied``: with ``at`` as when)."""
        ...


class SavedPlans(PlanReader, PlanWriter, Protocol):
    """The saved plans of refused, forced and approved runs."""

    ...
