"""``reconciler search QUERY``: what retrieval returns, through the configured embedder and
the default route, at the instant of the search (or ``as_of``): the operator's way to see what
an assistant would cite.

It runs the retrievers' own search (``reconciler.integrations.retrieving``): the filter built
at the query's instant, a split store's archive searched on the historical route, quarantined
chunks never returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from reconciler.app.wiring import index_location, local_folder_missing, open_qdrant_index
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.embedding import make_embedder
from reconciler.errors import CollectionMissing, ConfigError
from reconciler.integrations.retrieving import Hit, Route, query_instant, search, vector_name_of
from reconciler.model import OPEN_END, OPEN_START, rfc3339
from reconciler.settings import Settings

__all__ = ["render_search", "search_corpus"]

#: Characters of a hit's text shown (whitespace folded).
EXCERPT = 160


def search_corpus(
    settings: Settings,
    query: str,
    *,
    k: int = 5,
    as_of: datetime | None = None,
    include_historical: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> dict[str, Any]:
    """The ``k`` best chunks for ``query`` on the route asked, best first, each with its
    document, version state and window."""
    instant = query_instant(as_of, include_historical, clock)
    embedder = make_embedder(
        settings.ingest.embedder, dim=settings.ingest.dim, model=settings.ingest.model
    )
    vector = embedder.embed([query])[0]
    route = Route.from_settings(settings)
    missing = CollectionMissing(
        f"collection {settings.index.collection!r} does not exist at "
        f"{index_location(settings)}; run `reconciler ingest` (or point index.collection "
        "at an existing collection)"
    )
    if local_folder_missing(settings):
        raise missing  # (opening the client would create the folder)
    index = open_qdrant_index(settings, needed_by="reconciler search")
    try:
        if not index.exists():  # (the retrievers' ValueError was a traceback here)
            raise missing
        _same_width(index.client, route, len(vector), settings)
        hits = search(
            index.client,
            route,
            vector,
            k=k,
            as_of=instant,
            include_historical=include_historical,
            clock=clock,
        )
        # (a split store's archive, on the historical route, once there is one: before the
        # first move there is none, and nothing was searched there)
        searched = [route.collection]
        if include_historical and route.archive and index.client.collection_exists(route.archive):
            searched.append(route.archive)
    finally:
        index.close()
    return {
        "query": query,
        "route": "historical" if include_historical else "default",
        "as_of": rfc3339(instant) if instant is not None else None,
        "collections": searched,
        "k": k,
        "hits": [_hit(rank, hit) for rank, hit in enumerate(hits, start=1)],
    }


def _same_width(client: Any, route: Route, width: int, settings: Settings) -> None:
    """The query vector is as wide as the vector it searches: an ``[ingest]`` changed since
    the collection was built is refused as ``ingest`` refuses it (it was a numpy traceback)."""
    vectors = client.get_collection(route.collection).config.params.vectors
    if isinstance(vectors, Mapping):
        vectors = vectors.get(vector_name_of(client, route.collection, route.vector_name) or "")
    size = getattr(vectors, "size", None)
    if size is not None and size != width:
        raise ConfigError(
            [
                (
                    "ingest.dim",
                    f"{width} differs from the vector size {size} of collection "
                    f"{route.collection!r}",
                )
            ],
            origin=settings.origin,
        )


def _hit(rank: int, hit: Hit) -> dict[str, Any]:
    version = hit.version
    text = " ".join((hit.text or "").split())
    return {
        "rank": rank,
        "score": round(hit.score, 6),
        "point_id": hit.point_id,
        "doc_id": version.get("doc_id"),
        "chunk_id": version.get("chunk_id"),
        "family": version.get("doc_family_id"),
        "version": version.get("doc_version"),
        "version_state": version.get("version_state"),
        "effective_from": version.get("effective_from"),
        "effective_to": version.get("effective_to"),
        "superseded_by": version.get("superseded_by"),
        "text": text[:EXCERPT] + ("…" if len(text) > EXCERPT else ""),
    }


def _window(hit: Mapping[str, Any]) -> str:
    start, end = hit["effective_from"], hit["effective_to"]
    start = "the beginning" if start in (None, rfc3339(OPEN_START)) else start
    end = "open-ended" if end in (None, rfc3339(OPEN_END)) else f"until {end}"
    return f"from {start}, {end}"


def render_search(data: Mapping[str, Any]) -> str:
    """The hits for a person: rank, score, document and state, window, then the text."""
    at = data["as_of"] or "any instant"
    lines = [
        f"{data['query']!r} on the {data['route']} route at {at} "
        f"({', '.join(data['collections'])}): {len(data['hits'])} hit(s)"
    ]
    for hit in data["hits"]:
        lines.append(
            f"{hit['rank']:>3}. {hit['score']:.4f}  {hit['doc_id']}  {hit['version_state']}  "
            f"{_window(hit)}"
        )
        if hit["text"]:
            lines.append(f"     {hit['text']}")
    if not data["hits"]:
        lines.append("no chunk in force matches (try --historical to search every version)")
    return "\n".join(lines)
