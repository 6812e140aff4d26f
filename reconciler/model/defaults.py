"""The defaults of what a run takes from the configuration, held once: the run's ``Options``
and ``Guard`` (``pipeline.values``), the checks' ``CheckContext`` and the sections of the
settings (``reconciler.settings``) all default to these, so a run built without a
configuration does what the shipped one does (``app.operations.engine_options`` maps one
onto the other)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

#: ``[policy]``: a version whose successor is not ingested yet is superseded ("keep": not).
SUCCESSOR_NOT_INGESTED: Final = "supersede"
#: ``[policy]``: an ``unknown`` version beside a later started ``unknown`` sibling.
UNKNOWN_SIBLINGS: Final = "supersede"
#: ``[policy]``: how long a document may be missing from its source before it is retired.
MISSING_IN_SOURCE_GRACE: Final = timedelta(days=7)
#: ``[policy]``: a status that contradicts a link the source declares.
STATUS_CONTRADICTS_LINK: Final = "report"

#: ``[guard]``: the blast-radius guard's limits.
MAX_CHANGED_FRACTION: Final = 0.2
MAX_RESTORED_FRACTION: Final = 1.0
GUARD_FLOOR: Final = 10
MAX_MOVED_FRACTION: Final = 0.2

#: ``[table] batch_size``: rows read at a time.
TABLE_BATCH: Final = 1000
#: ``[index] scroll_batch``: points scrolled at a time.
SCROLL_BATCH: Final = 1000
#: ``[index] write_batch``: points written at a time (one audited batch: a page of intents,
#: then the engine's call). 1,024, not 256: an append's cost is mostly fixed (~0.5 ms), so
#: a quarter of the appends took the audit from ~5.5 to ~2.8 µs a point on Edge; a killed
#: run leaves at most one batch in doubt, ~1,024 points read back by the next runner
#: (docs/benchmarks.md, issue 38, round 5).
WRITE_BATCH: Final = 1024
#: ``[guard]``: how long a refused run's saved plan may be approved (``apply --plan ID``).
PLAN_TTL: Final = timedelta(days=7)
