"""The canonical retrieval filter (docs/contracts.md), for every retrieval path to use.

Relevance cannot see that one document replaced another; this filter can. It reads only
payload keys the reconciler keeps true.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from qdrant_client import models

from reconciler.model import HISTORICAL_STATES, SERVABLE_STATES, utc
from reconciler.payload import DEFAULT_KEYS, KeyMap

log = logging.getLogger(__name__)


def default_filter(
    as_of: datetime | None = None,
    include_historical: bool = False,
    *,
    keys: KeyMap = DEFAULT_KEYS,
) -> models.Filter:
    """Return the Qdrant filter that admits only versions in force at ``as_of`` (default now).

    Default route: ``version_state`` in current/unknown/pending, ``effective_from <= as_of <
    effective_to``, and not quarantined. A pending version passes only once its
    ``effective_from`` has come, so retrieval is right even before the dates job runs.

    ``include_historical=True`` adds superseded and retired versions and is logged. Without an
    explicit ``as_of`` it drops the effective window (every version ever published); with one, it
    answers "what was in force at ``as_of``". Quarantined chunks are never returned.
    """
    states = [str(s) for s in SERVABLE_STATES]
    must: list[models.Condition] = []
    window = True
    if include_historical:
        states += [str(s) for s in HISTORICAL_STATES]
        window = as_of is not None
        log.info(
            "historical retrieval route requested (as_of=%s)",
            utc(as_of).isoformat() if as_of else "any",
        )
    must.append(
        models.FieldCondition(key=keys.path("version_state"), match=models.MatchAny(any=states))
    )
    if window:
        instant = utc(as_of) if as_of is not None else datetime.now(UTC)
        must.append(
            models.FieldCondition(
                key=keys.path("effective_from"), range=models.DatetimeRange(lte=instant)
            )
        )
        must.append(
            models.FieldCondition(
                key=keys.path("effective_to"), range=models.DatetimeRange(gt=instant)
            )
        )
    must_not: list[models.Condition] = [
        models.FieldCondition(key=keys.path("quarantined"), match=models.MatchValue(value=True))
    ]
    return models.Filter(must=must, must_not=must_not)
