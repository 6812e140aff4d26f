"""``[policy]``: the repair policies."""

from __future__ import annotations

from typing import Literal

from reconciler.model import defaults
from reconciler.settings.shared import Duration, Section


class PolicySettings(Section):
    """Repair policies."""

    successor_not_ingested: Literal["supersede", "keep"] = defaults.SUCCESSOR_NOT_INGESTED
    #: An ``unknown`` version beside a later started ``unknown`` sibling: superseded by it
    #: (the time rule), or only reported, for teams that move such versions out by hand.
    unknown_siblings: Literal["supersede", "report"] = defaults.UNKNOWN_SIBLINGS
    missing_in_source_grace: Duration = defaults.MISSING_IN_SOURCE_GRACE
    #: A version the source declares in force while a successor it names is in force already:
    #: a warning (``family/status_contradicts_link``), or nothing, for vaults that leave a
    #: replaced note saying ``current`` (declared links win either way).
    status_contradicts_link: Literal["report", "ignore"] = defaults.STATUS_CONTRADICTS_LINK
