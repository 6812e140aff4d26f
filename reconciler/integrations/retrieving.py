"""One retrieval at the instant of the query: what every retriever of this package (and
``reconciler search``) runs, free of any framework.

A filter belongs to one query. ``default_filter(as_of=now)`` admits what is in force at that
``now``; kept and reused, it goes on admitting the version its successor has replaced since,
and after the next run, none. So nothing here holds a filter: ``search`` reads the instant from
its ``clock`` (the real one by default) each time it is called and builds the filter then.

A split store (``[index] archive_collection``) is searched as one: the default route on the
main collection, the historical route on both, merged by score (``reconciler.filters``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.filters import query_points
from reconciler.model import parse_instant, utc
from reconciler.payload import DEFAULT_KEYS, KeyMap, chunk_text

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from reconciler.settings import Settings

__all__ = ["Hit", "Route", "historical_flag", "instant_of", "query_instant", "search"]

#: Distances whose scores are better when lower (Qdrant's names).
_LOWER_IS_BETTER = frozenset({"euclid", "manhattan"})


@dataclass(frozen=True)
class Route:
    """Where a deployment's chunks live and how their payloads are laid out.

    ``vector_name`` None: the collection's own (its only named vector, or the unnamed one).
    ``lower_is_better`` None: as the collection's distance says, asked at each search (a
    collection ``bootstrap`` adopted may use the Euclid or Manhattan distance).
    """

    collection: str
    archive: str | None = None
    keys: KeyMap = DEFAULT_KEYS
    text_key: str = "text"
    vector_name: str | None = None
    #: Euclid and Manhattan distances: a lower score is a better match (merging needs it);
    #: None: the collection's distance decides.
    lower_is_better: bool | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **changes: Any) -> Route:
        """The route of a deployment's ``[index]`` (collection, archive, key map, text key)."""
        index = settings.index
        values: dict[str, Any] = {
            "collection": index.collection,
            "archive": index.archive_collection,
            "keys": index.key_map,
            "text_key": index.text_key,
        }
        return cls(**{**values, **changes})

    @classmethod
    def of(
        cls,
        collection: str | None = None,
        *,
        settings: Settings | None = None,
        archive: str | None = None,
        keys: KeyMap | None = None,
        text_key: str | None = None,
        vector_name: str | None = None,
    ) -> Route:
        """The route a retriever's ``from_client`` is given: the deployment's ``settings``
        with what is named here instead, or what is named here over the reconciler's own
        layout (``vector_name``: the dense vector of a collection that has several)."""
        named: dict[str, Any] = {
            "collection": collection,
            "archive": archive,
            "keys": keys,
            "text_key": text_key,
            "vector_name": vector_name,
        }
        changes = {name: value for name, value in named.items() if value is not None}
        if settings is not None:
            return cls.from_settings(settings, **changes)
        if collection is None:
            raise ValueError("name the collection to search, or pass the deployment's settings")
        return cls(**changes)


@dataclass(frozen=True)
class Hit:
    """One chunk a search returned: its point id, score, whole stored payload, the version
    keys read through the key map (logical names), and its text (``payload.chunk_text``)."""

    point_id: str
    score: float
    payload: Mapping[str, Any]
    version: Mapping[str, Any] = field(default_factory=dict)
    text: str | None = None


def instant_of(value: object) -> datetime | None:
    """An ``as_of`` as the retrievers take it, as their fields read it: a datetime (naive is
    UTC), a date (its midnight, UTC) or an ISO 8601 / RFC 3339 text; None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, date):
        return datetime.combine(value, time(), UTC)
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError as exc:
            raise ValueError(f"as_of {value!r} is not an ISO 8601 instant") from exc
    raise TypeError(f"as_of must be a datetime, a date or an ISO 8601 text, not {value!r}")


def historical_flag(value: object) -> bool:
    """``include_historical`` as a bool, and only a bool: a text such as ``"false"`` is truthy,
    and taken as it is it would open the historical route (superseded versions served)."""
    if isinstance(value, bool):
        return value
    raise TypeError(f"include_historical must be True or False, not {value!r}")


def query_instant(
    as_of: datetime | date | str | None, include_historical: bool, clock: Clock = SYSTEM_CLOCK
) -> datetime | None:
    """The instant a query's filter is built at: ``as_of`` when given (``instant_of``), else
    none on the historical route (every version ever published), else ``clock.now()``, read
    now."""
    if as_of is not None:
        return instant_of(as_of)
    if historical_flag(include_historical):
        return None
    return utc(clock.now())


def vector_name_of(client: QdrantClient, collection: str, wanted: str | None) -> str | None:
    """The dense vector a query searches: ``wanted``, else the collection's only named vector,
    else None (the unnamed vector)."""
    if wanted is not None:
        return wanted or None
    vectors = client.get_collection(collection).config.params.vectors
    if isinstance(vectors, Mapping):
        names = sorted(vectors)
        if len(names) == 1:
            return names[0] or None
        if "" in names:
            return None
        raise ValueError(
            f"collection {collection!r} has the vectors {', '.join(names)}: name the one to "
            "search (vector_name=...)"
        )
    return None


def distance_of(client: QdrantClient, collection: str, vector_name: str | None) -> str:
    """The distance of the searched vector, lower-case (``cosine``, ``euclid``...)."""
    vectors = client.get_collection(collection).config.params.vectors
    if isinstance(vectors, Mapping):
        vectors = vectors[vector_name or ""]
    return str(getattr(vectors, "distance", "cosine")).rsplit(".", 1)[-1].lower()


def search(
    client: QdrantClient,
    route: Route,
    vector: Sequence[float],
    *,
    k: int = 4,
    score_threshold: float | None = None,
    as_of: datetime | date | str | None = None,
    include_historical: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> list[Hit]:
    """The ``k`` best chunks for ``vector`` under the default filter built now (at ``as_of``
    or ``clock.now()``), over the collections the route needs, best first (the nearest under
    the Euclid and Manhattan distances). Quarantined chunks never come back. An archive not
    created yet (no move so far) holds nothing to search."""
    historical = historical_flag(include_historical)
    if inspect.iscoroutinefunction(getattr(client, "query_points", None)):
        raise TypeError(
            "an AsyncQdrantClient cannot be searched here: pass a QdrantClient (ainvoke and "
            "aretrieve search through it in a worker thread)"
        )
    if not client.collection_exists(route.collection):
        raise ValueError(
            f"collection {route.collection!r} does not exist: point the retriever at the "
            "deployment's [index] collection (or run `reconciler ingest` first)"
        )
    archive = route.archive
    if archive is not None and not client.collection_exists(archive):
        archive = None
    using = vector_name_of(client, route.collection, route.vector_name)
    lower = route.lower_is_better
    if lower is None:
        lower = lower_is_better(distance_of(client, route.collection, using))
    extra: dict[str, Any] = {"with_payload": True, "using": using}
    if score_threshold is not None:
        extra["score_threshold"] = score_threshold
    points = query_points(
        client,
        list(vector),
        collection=route.collection,
        archive=archive,
        as_of=query_instant(as_of, historical, clock),
        include_historical=historical,
        limit=k,
        keys=route.keys,
        lower_is_better=lower,
        **extra,
    )
    hits = []
    for point in points:
        payload = point.payload or {}
        hits.append(
            Hit(
                point_id=str(point.id),
                score=float(point.score),
                payload=payload,
                version=route.keys.from_point(payload),
                text=chunk_text(payload, route.text_key),
            )
        )
    return hits


def lower_is_better(distance: str) -> bool:
    """Whether a lower score is a better match under ``distance`` (a Qdrant distance name)."""
    return distance.rsplit(".", 1)[-1].lower() in _LOWER_IS_BETTER
