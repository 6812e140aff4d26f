"""``[metrics]``: where metrics go."""

from __future__ import annotations

from pydantic import Field

from reconciler.settings.shared import Section


class MetricsSettings(Section):
    """Where metrics go."""

    listen: str = Field(default="127.0.0.1:9464", pattern=r"^[^:\s]*:\d{1,5}$")
    textfile: str = ""
    pushgateway: str = ""
