"""The canonical retrieval filter (docs/contracts.md), for every retrieval path to use.

Relevance cannot see that one document replaced another; this filter can. It reads only
payload keys the reconciler keeps true. A filter belongs to one query: each is built at an
instant, so this module hands out functions that build one, never a filter to keep.

Its semantics are written once, as a ``FilterTerms`` value (``filter_terms``): which states
pass, the instant of the effective window (or none), and that a quarantined chunk never passes.
Two renderings turn that one description into an engine's filter: ``default_filter`` into a
qdrant-client ``models.Filter`` (local mode and servers) and ``default_edge_filter`` into a
Qdrant Edge ``qdrant_edge.Filter`` (the optional ``edge`` extra); a third,
``FilterTerms.admits``, judges one payload in Python (what the log says a chunk held, for
``reconciler audit served``). None adds a condition of its own.

A split store (``[index] archive_collection``) keeps the chunks of servable versions in its
main collection and every other one in its archive. The default route admits only servable
versions, at any ``as_of``, so the main collection alone answers it; the historical route
admits superseded and retired versions too, which are in the archive: ``collections_for``
names the collections a route must search, and ``query_points`` searches them all.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from reconciler.model import HISTORICAL_STATES, SERVABLE_STATES, parse_instant, utc
from reconciler.payload import DEFAULT_KEYS, KeyMap

if TYPE_CHECKING:
    import qdrant_edge
    from qdrant_client import QdrantClient, models

log = logging.getLogger(__name__)

__all__ = [
    "FilterTerms",
    "collections_for",
    "default_edge_filter",
    "default_filter",
    "filter_terms",
    "query_points",
]


@dataclass(frozen=True)
class FilterTerms:
    """What the default filter admits, with the stored key paths, engine-neutral.

    A chunk passes when ``state_path`` holds one of ``states``; when ``instant`` is set,
    ``from_path <= instant < to_path`` (RFC 3339 datetimes); and ``quarantined_path`` is not
    ``true``.
    """

    state_path: str
    states: tuple[str, ...]
    from_path: str
    to_path: str
    instant: datetime | None
    quarantined_path: str

    def admits(self, payload: Mapping[str, Any]) -> bool:
        """Whether a chunk holding ``payload`` (laid out as the paths say) passes: the third
        rendering, the terms judged in Python as the engines judge them (a keyword or a list
        holding one; an RFC 3339 datetime, a text that is none matching no range; ``true``
        only as a boolean). ``reconciler audit served`` judges recorded payloads with it."""
        states = _values(payload, self.state_path)
        if not any(isinstance(v, str) and v in self.states for v in states):
            return False
        if self.instant is not None:
            starts = _instants(_values(payload, self.from_path))
            ends = _instants(_values(payload, self.to_path))
            if not any(start <= self.instant for start in starts):
                return False
            if not any(end > self.instant for end in ends):
                return False
        return not any(v is True for v in _values(payload, self.quarantined_path))


def _values(payload: Mapping[str, Any], path: str) -> list[Any]:
    """The values at a dotted key path (a list's items, each), as Qdrant reads them."""
    found: list[Any] = [payload]
    for part in path.split("."):
        step: list[Any] = []
        for value in found:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, Mapping) and part in item:
                    step.append(item[part])
        found = step
    return [item for value in found for item in (value if isinstance(value, list) else [value])]


def _instants(values: list[Any]) -> list[datetime]:
    found = []
    for value in values:
        if isinstance(value, str):
            with contextlib.suppress(ValueError, OverflowError):
                found.append(parse_instant(value))
    return found


def _instant(as_of: datetime | date) -> datetime:
    """``as_of`` as an aware UTC instant: a datetime (naive is UTC), or a date, its midnight
    UTC, as the retrievers read it (a date has no ``tzinfo``: it raised AttributeError)."""
    if isinstance(as_of, datetime):
        return utc(as_of)
    return datetime.combine(as_of, time(), UTC)


def filter_terms(
    as_of: datetime | date | None = None,
    include_historical: bool = False,
    *,
    keys: KeyMap = DEFAULT_KEYS,
) -> FilterTerms:
    """The one definition of the default filter's semantics (see ``default_filter``)."""
    at = _instant(as_of) if as_of is not None else None
    states = [str(s) for s in SERVABLE_STATES]
    window = True
    if include_historical:
        states += [str(s) for s in HISTORICAL_STATES]
        window = at is not None
        log.info(
            "historical retrieval route requested (as_of=%s)",
            at.isoformat() if at is not None else "any",
        )
    instant = None
    if window:
        instant = at if at is not None else datetime.now(UTC)
    return FilterTerms(
        state_path=keys.path("version_state"),
        states=tuple(states),
        from_path=keys.path("effective_from"),
        to_path=keys.path("effective_to"),
        instant=instant,
        quarantined_path=keys.path("quarantined"),
    )


def default_filter(
    as_of: datetime | date | None = None,
    include_historical: bool = False,
    *,
    keys: KeyMap = DEFAULT_KEYS,
) -> models.Filter:
    """Return the Qdrant filter that admits only versions in force at ``as_of`` (default now).

    Build it for one query, inside the query's call, and never keep it: "now" is read when it
    is built, so a filter kept and reused (a retriever made around it, a module constant)
    goes on admitting the version in force then. Past a successor's ``effective_from`` it
    serves the replaced version; after the next run, which closes that version's state too,
    it serves no version of the family at all. The retrievers of ``reconciler.integrations``
    (LangChain, LlamaIndex) and ``query_points`` build it per query for you.

    Default route: ``version_state`` in current/unknown/pending, ``effective_from <= as_of <
    effective_to``, and not quarantined. A pending version passes only once its
    ``effective_from`` has come, so retrieval is right even before the dates job runs.

    ``include_historical=True`` adds superseded and retired versions and is logged. Without an
    explicit ``as_of`` it drops the effective window (every version ever published); with one, it
    answers "what was in force at ``as_of``". Quarantined chunks are never returned.

    For Qdrant Edge use ``default_edge_filter`` (same arguments, same semantics).
    """
    # qdrant-client is imported when a filter is built (~1 s of start-up, which Edge
    # retrieval code and every command that builds no such filter never pays).
    from qdrant_client import models  # noqa: PLC0415

    terms = filter_terms(as_of, include_historical, keys=keys)
    must: list[models.Condition] = [
        models.FieldCondition(key=terms.state_path, match=models.MatchAny(any=list(terms.states)))
    ]
    if terms.instant is not None:
        must.append(
            models.FieldCondition(
                key=terms.from_path, range=models.DatetimeRange(lte=terms.instant)
            )
        )
        must.append(
            models.FieldCondition(key=terms.to_path, range=models.DatetimeRange(gt=terms.instant))
        )
    must_not: list[models.Condition] = [
        models.FieldCondition(key=terms.quarantined_path, match=models.MatchValue(value=True))
    ]
    return models.Filter(must=must, must_not=must_not)


def default_edge_filter(
    as_of: datetime | date | None = None,
    include_historical: bool = False,
    *,
    keys: KeyMap = DEFAULT_KEYS,
) -> qdrant_edge.Filter:
    """``default_filter`` for Qdrant Edge: the same terms as a ``qdrant_edge.Filter``.

    Pass it to an ``EdgeShard``'s ``query``, ``search``, ``scroll`` or ``count`` request.
    Needs the optional extra: ``pip install 'corpus-reconciler[edge]'``.
    """
    import numpy  # noqa: PLC0415 (only this rendering needs it)

    try:
        import qdrant_edge  # noqa: PLC0415 (an optional extra)
    except ImportError as exc:
        raise ImportError(
            "default_edge_filter() needs Qdrant Edge: pip install 'corpus-reconciler[edge]'"
        ) from exc
    terms = filter_terms(as_of, include_historical, keys=keys)
    must: list[qdrant_edge.FieldCondition] = [
        qdrant_edge.FieldCondition(
            key=terms.state_path, match=qdrant_edge.MatchAny(list(terms.states))
        )
    ]
    if terms.instant is not None:
        instant = terms.instant.isoformat()
        must.append(
            qdrant_edge.FieldCondition(
                key=terms.from_path, range=qdrant_edge.RangeDateTime(lte=instant)
            )
        )
        must.append(
            qdrant_edge.FieldCondition(
                key=terms.to_path, range=qdrant_edge.RangeDateTime(gt=instant)
            )
        )
    # qdrant-edge-py 0.9 reads a Python ``True`` given to MatchValue as the integer 1, which
    # matches no stored boolean; a numpy bool reaches it as a boolean.
    quarantined = qdrant_edge.MatchValue(numpy.bool_(True))  # type: ignore[arg-type]
    must_not = [qdrant_edge.FieldCondition(key=terms.quarantined_path, match=quarantined)]
    return qdrant_edge.Filter(must=list(must), must_not=list(must_not))


def collections_for(
    include_historical: bool = False, *, collection: str, archive: str | None = None
) -> tuple[str, ...]:
    """The collections a retrieval must search (``archive``: a split store's): the main one
    for the default route, at any ``as_of`` (it admits only servable versions, which a split
    store keeps there), the main one and the archive for the historical route."""
    if include_historical and archive is not None:
        return (collection, archive)
    return (collection,)


def query_points(
    client: QdrantClient,
    query: Any,
    *,
    collection: str,
    archive: str | None = None,
    as_of: datetime | date | None = None,
    include_historical: bool = False,
    limit: int = 10,
    keys: KeyMap = DEFAULT_KEYS,
    lower_is_better: bool = False,
    query_filter: models.Filter | Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> list[models.ScoredPoint]:
    """``client.query_points`` under ``default_filter(as_of, include_historical, keys=keys)``
    over every collection the route needs (``collections_for``), merged: best score first
    (``lower_is_better`` for the Euclid and Manhattan distances), the first ``limit``, a
    point held by both collections (a move under way) once. An archive not created yet (a
    split store before its first move) holds nothing to search. ``query_filter``, a filter
    of the caller's (a ``models.Filter`` or its dict), must hold too: it narrows what the
    default filter admits, never widens it. Other keyword arguments go to each
    ``query_points`` call."""
    from qdrant_client import models  # noqa: PLC0415 (as default_filter)

    sign = -1.0 if lower_is_better else 1.0
    found: dict[str, models.ScoredPoint] = {}
    built = default_filter(as_of, include_historical, keys=keys)
    if query_filter is not None:
        mine = (
            query_filter
            if isinstance(query_filter, models.Filter)
            else models.Filter.model_validate(dict(query_filter))
        )
        built = models.Filter(must=[built, mine])
    for name in collections_for(include_historical, collection=collection, archive=archive):
        if name != collection and not client.collection_exists(name):
            continue
        response = client.query_points(name, query=query, query_filter=built, limit=limit, **kwargs)
        for point in response.points:
            kept = found.get(str(point.id))
            if kept is None or sign * point.score > sign * kept.score:
                found[str(point.id)] = point
    return sorted(found.values(), key=lambda p: sign * p.score, reverse=True)[:limit]
