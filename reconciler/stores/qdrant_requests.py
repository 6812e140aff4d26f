"""What the qdrant-client adapter sends, in the client's models: the doc_id filter, the
payload writes grouped into ``batch_update_points`` calls of about a batch of points each,
and the port's name of a payload index type. Pure: no client is called here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from qdrant_client import models

from reconciler.model import PayloadWrite
from reconciler.payload import KeyMap
from reconciler.stores.chunking_rules import point_batches

__all__ = ["doc_filter", "payload_batches", "schema_name"]


def doc_filter(keys: KeyMap, doc_ids: list[str]) -> models.Filter:
    """The points of these documents."""
    return models.Filter(
        must=[models.FieldCondition(key=keys.path("doc_id"), match=models.MatchAny(any=doc_ids))]
    )


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
