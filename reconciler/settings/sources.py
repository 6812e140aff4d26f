"""``[[sources]]``: the systems of record, one a connector reads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import Field, model_validator

from reconciler.settings.shared import Duration, Section


class SourceSettings(Section):
    """One system of record. ``type`` names an installed connector (``reconciler connectors``);
    connector-specific settings go in ``[sources.options]`` and are checked by the connector."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    type: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    path: str | None = None
    url: str | None = None
    trigger: Literal["polling", "webhook", "cdc"] = "polling"
    ttl: Duration | None = None
    #: ``serve`` watches this source (vault, git) and reconciles its changes in seconds;
    #: false leaves it to the scheduled jobs.
    watch: bool = True
    #: How often ``serve``'s watch polls this source (a git branch's tip: 2s unless set);
    #: a webhook (``[watch] webhooks``) makes it look sooner.
    poll_interval: Duration | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _needs(self) -> SourceSettings:
        if self.ttl is not None and self.trigger != "polling":
            raise ValueError("ttl applies to polling sources only")
        if self.poll_interval is not None and self.poll_interval <= timedelta(0):
            raise ValueError("poll_interval must be longer than 0s")
        return self

    @property
    def effective_ttl(self) -> timedelta | None:
        """The TTL in force: configured, else 24h for polling sources, else none."""
        if self.trigger != "polling":
            return None
        return self.ttl if self.ttl is not None else timedelta(hours=24)
