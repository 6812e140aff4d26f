"""``[schedule]``: the scheduled jobs of ``serve`` (cron expressions) and their deadlines."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, model_validator

from reconciler.settings.shared import Duration, Section


def _cron(value: str) -> str:
    from reconciler.scheduling import cron_trigger  # noqa: PLC0415 (settings load first)

    try:
        cron_trigger(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"a 5-field cron expression such as '0 2 * * *' ({exc})") from None
    return value


Cron = Annotated[str, BeforeValidator(_cron)]


class ScheduleSettings(Section):
    """Cron expressions (UTC) of the scheduled jobs. The defaults never fire in the same
    minute (the dates job on multiples of 5, the TTL job 2 minutes past, the full job at
    02:33); serve runs its jobs in one lane, so jobs that still meet wait for each other."""

    full: Cron = "33 2 * * *"
    ttl: Cron = "2-59/15 * * * *"
    dates: Cron = "*/5 * * * *"
    #: How long after its scheduled time the full job may take before ``serve``'s /healthz
    #: calls it overdue (503): raise it above your longest full run.
    full_grace: Duration = timedelta(hours=6)
    #: How long one job of ``serve`` may run: past it, the job is asked to stop at its next
    #: safe point (before a payload batch, between the bytes of a source's answer), recorded
    #: as failed, and the lane goes to the next job.
    job_deadline: Duration = timedelta(hours=1)
    #: How long ``serve`` takes at most to exit after SIGTERM (the running job is asked to
    #: stop at half of it and left at three quarters, wherever it is); and how long a job
    #: past its deadline has to reach its safe point before ``serve`` leaves it (in a store
    #: call it keeps its lease until the call ends). Below the shipped deployments' stop
    #: timeouts (15 min).
    stop_grace: Duration = timedelta(minutes=5)
    #: How long one source's read may take in a job of ``serve`` (the sources are read side
    #: by side); past it the source is unreadable this run (the run is ``partial``: its
    #: families stay as they are, and its TTL quarantines them in time) and the others are
    #: reconciled. Unset: half of ``job_deadline``.
    source_deadline: Duration | None = None

    @property
    def read_deadline(self) -> timedelta:
        """``source_deadline``, or half of ``job_deadline``."""
        return self.source_deadline or self.job_deadline / 2

    @model_validator(mode="after")
    def _bounded(self) -> ScheduleSettings:
        for name in ("full_grace", "job_deadline", "stop_grace", "source_deadline"):
            if (value := getattr(self, name)) is not None and value <= timedelta(0):
                raise ValueError(f"schedule.{name} must be longer than 0s")
        if self.job_deadline > self.full_grace:
            raise ValueError(
                f"schedule.job_deadline ({self.job_deadline}) is longer than "
                f"schedule.full_grace ({self.full_grace}): /healthz would call the full job "
                "overdue while it may still run; lower job_deadline or raise full_grace"
            )
        return self
