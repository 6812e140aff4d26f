"""``[guard]``: the blast-radius guard's limits."""

from __future__ import annotations

from pydantic import Field

from reconciler.model import defaults
from reconciler.settings.shared import Duration, Section


class GuardSettings(Section):
    """The blast-radius guard."""

    #: Of families or chunks a run may hide or change (every write but restores).
    max_changed_fraction: float = Field(default=defaults.MAX_CHANGED_FRACTION, gt=0, le=1)
    #: Of families or chunks a run may restore: quarantines lifted because their cause is gone
    #: (re-ingested, read again). 1: never refused; they never count against the other.
    max_restored_fraction: float = Field(default=defaults.MAX_RESTORED_FRACTION, gt=0, le=1)
    #: Runs changing at most this many families or chunks never trip the fraction rule (a
    #: five-note vault must be repairable). The empty-source rule has no floor.
    floor: int = Field(default=defaults.GUARD_FLOOR, ge=0)
    #: In a split store (``index.archive_collection``), of families or chunks a run may move
    #: between the main collection and the archive (``reconciler split`` moves the first time).
    max_moved_fraction: float = Field(default=defaults.MAX_MOVED_FRACTION, gt=0, le=1)
    #: How long a refused run's saved plan may be approved (``apply --plan ID``); then expired.
    plan_ttl: Duration = defaults.PLAN_TTL
