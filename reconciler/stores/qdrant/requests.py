"""What the qdrant-client adapter sends, in the client's models: the doc_id filter, the
payload writes grouped into ``batch_update_points`` calls of about a batch of points each,
the port's name of a payload index type, and a collection's vector layout as plain data and
back (the archive of a split store is created with its main collection's). Pure: no client
is called here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from reconciler.model import PayloadWrite
from reconciler.payload import KeyMap
from reconciler.stores.chunking_rules import point_batches

__all__ = ["collection_config", "doc_filter", "layout_of", "payload_batches", "schema_name"]


def doc_filter(keys: KeyMap, doc_ids: list[str]) -> models.Filter:
    """The points of these documents."""
    return models.Filter(
        must=[models.FieldCondition(key=keys.path("doc_id"), match=models.MatchAny(any=doc_ids))]
    )


def by_id(
    client: QdrantClient, collection: str, point_ids: Sequence[str | int], paths: list[str]
) -> list[models.Record]:
    """The given points with the payload keys at ``paths`` (no vectors; missing ids absent)."""
    if not point_ids:
        return []
    selector = models.PayloadSelectorInclude(include=paths)
    return client.retrieve(
        collection, ids=list(point_ids), with_payload=selector, with_vectors=False
    )


def our_id(point_id: Any) -> str | int:
    """An id as qdrant-client hands it back: int or str (a UUID object as its string)."""
    return point_id if isinstance(point_id, int | str) else str(point_id)


def payload_batches(
    writes: Iterable[PayloadWrite], batch_size: int, keys: KeyMap
) -> Iterator[tuple[list[models.UpdateOperation], int]]:
    """Group writes into calls of ~``batch_size`` points (``chunking_rules.point_batches``),
    each a list of ``set_payload`` operations and its number of points."""
    for batch in point_batches(writes, batch_size, keys):
        operations: list[models.UpdateOperation] = [
            models.SetPayloadOperation(
                set_payload=models.SetPayload(payload=stored, points=part, key=keys.nest_key)
            )
            for part, stored in batch
        ]
        yield operations, sum(len(part) for part, _stored in batch)


def schema_name(data_type: models.PayloadSchemaType | str) -> str:
    """The port's name of a payload index type (``keyword``, ``integer``, ...)."""
    return data_type.value if isinstance(data_type, models.PayloadSchemaType) else str(data_type)


def layout_of(params: models.CollectionParams) -> dict[str, Any]:
    """A collection's dense and sparse vector configuration as plain JSON data."""
    return {"vectors": _plain(params.vectors), "sparse_vectors": _plain(params.sparse_vectors)}


def _plain(params: Any) -> Any:
    if params is None:
        return None
    if isinstance(params, Mapping):
        return {name: _plain(value) for name, value in params.items()}
    return params.model_dump(mode="json", exclude_none=True)


def collection_config(
    layout: Mapping[str, Any],
) -> tuple[
    models.VectorParams | dict[str, models.VectorParams],
    dict[str, models.SparseVectorParams] | None,
]:
    """``create_collection``'s vectors and sparse vectors of a ``layout_of``."""
    vectors = layout.get("vectors")
    sparse = layout.get("sparse_vectors")
    dense: models.VectorParams | dict[str, models.VectorParams] = (
        models.VectorParams.model_validate(vectors)
        if isinstance(vectors, Mapping) and "size" in vectors
        else {name: models.VectorParams.model_validate(v) for name, v in (vectors or {}).items()}
    )
    named = {n: models.SparseVectorParams.model_validate(v) for n, v in (sparse or {}).items()}
    return dense, named or None
