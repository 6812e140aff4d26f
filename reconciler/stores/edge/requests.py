"""What the Qdrant Edge adapter hands the engine, in Edge's own types: point ids both ways
(Edge takes unsigned integers and UUIDs, and hands UUIDs back as ``uuid.UUID``: they are
returned as their canonical string, so ids round-trip exactly as on qdrant-client), the
doc_id filter, payload-write batches (Edge has no batch operation: a batch is a list of
``set_payload`` calls) and the payload index types. Pure: no shard is opened here."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import countOf
from typing import Any

import qdrant_edge as qe

from reconciler.model import PayloadWrite
from reconciler.payload import KeyMap
from reconciler.ports.index import StoredPoint
from reconciler.stores.chunking_rules import point_batches

__all__ = [
    "EDGE_SCHEMAS",
    "EdgeId",
    "IdMemory",
    "answered",
    "doc_filter",
    "edge_id",
    "edge_ids",
    "our_id",
    "payload_batches",
    "schema_name",
    "stored_ids",
]

#: Edge's type of each payload index schema ``create_payload_index`` accepts.
EDGE_SCHEMAS: dict[str, qe.PayloadSchemaType] = {
    "keyword": qe.PayloadSchemaType.Keyword,
    "integer": qe.PayloadSchemaType.Integer,
    "datetime": qe.PayloadSchemaType.Datetime,
    "bool": qe.PayloadSchemaType.Bool,
    "float": qe.PayloadSchemaType.Float,
}
_SCHEMA_NAMES: list[tuple[qe.PayloadSchemaType, str]] = [
    *((edge, name) for name, edge in EDGE_SCHEMAS.items()),
    (qe.PayloadSchemaType.Geo, "geo"),
    (qe.PayloadSchemaType.Text, "text"),
    (qe.PayloadSchemaType.Uuid, "uuid"),
]
#: A point id as Edge takes it.
EdgeId = int | uuid.UUID | str
#: A UUID in its canonical spelling (what Edge and qdrant-client hand back): taken as it is.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def edge_id(point_id: str | int) -> str | int:
    """A point id as Edge takes it: an unsigned integer or a UUID string."""
    if type(point_id) is str and _CANONICAL_UUID.fullmatch(point_id):
        return point_id  # (the usual id: a quarter of the cost of parsing it)
    if isinstance(point_id, bool) or not isinstance(point_id, int | str):
        raise TypeError(f"a point id is an int or a UUID string, not {type(point_id).__name__}")
    if isinstance(point_id, int) and point_id < 0:
        raise ValueError(f"point id {point_id}: Qdrant takes unsigned integers or UUIDs")
    if isinstance(point_id, str):
        try:
            uuid.UUID(point_id)
        except ValueError:
            raise ValueError(
                f"point id {point_id!r}: Qdrant takes unsigned integers or UUIDs"
            ) from None
    return point_id


#: A write's canonical UUIDs checked together (``edge_ids``): their lines' ASCII with each
#: lowercase hex digit made ``0`` is this shape, a line an id, when every one is canonical.
_HEX_AS_ZERO = bytes.maketrans(b"0123456789abcdef", b"0" * 16)
_CANONICAL_SHAPE = b"00000000-0000-0000-0000-000000000000\n"


def edge_ids(point_ids: Sequence[str | int]) -> list[EdgeId]:
    """``edge_id`` of each id: a write's canonical UUID strings (the usual ids: those a scan
    hands back) checked together, in C (one ``translate`` and one comparison, a tenth of a
    regular expression's match: issue 38, repair round 6), any other id one at a time."""
    try:
        lines = "\n".join(point_ids) + "\n"  # type: ignore[arg-type]
    except TypeError:  # (an int among them)
        lines = ""
    shape = _CANONICAL_SHAPE * len(point_ids)
    if (
        lines.isascii()
        and len(lines) == len(shape) > 0
        and lines.encode("ascii").translate(_HEX_AS_ZERO) == shape
    ):
        return list(point_ids)
    return [edge_id(p) for p in point_ids]


def stored_ids(points: Sequence[StoredPoint]) -> list[EdgeId]:
    """The ids of whole points as Edge takes them: the ``uuid.UUID``s Edge handed back when
    it read them, where every point keeps its own (``StoredPoint.native``: Edge takes the
    object without parsing text, 2.4 µs a ``qe.Point`` and 1.6 a delete against 3.9 and 2.6
    for the text, and ``answered`` compares ids without making text), else ``edge_ids`` of
    their ids."""
    natives = [p.native for p in points]
    if countOf(map(type, natives), uuid.UUID) == len(natives):
        return natives
    return edge_ids([p.point_id for p in points])


def answered(records: Sequence[Any], ids: list[EdgeId], points: Sequence[StoredPoint]) -> list[Any]:
    """Edge's records of a ``retrieve`` of ``ids`` (``stored_ids(points)``), one a point (None
    where missing): by position where every id came back in the order asked (Edge answers in
    that order, a missing id left out: checked on the ids each time, ``uuid.UUID`` against
    ``uuid.UUID`` in 0.2 µs), else by id."""
    if [r.id for r in records] == ids:
        return list(records)
    held = {str(r.id): r for r in records}  # (as text on both sides: an int id too)
    return [held.get(str(p.point_id)) for p in points]


def our_id(point_id: Any) -> str | int:
    """An id as Edge hands it back, as qdrant-client would: int, or the UUID's string."""
    if isinstance(point_id, int):
        return point_id
    return str(point_id)


#: UUIDs an ``IdMemory`` holds at most (~150 bytes each beside the string the scan keeps).
ID_MEMORY = 100_000


class IdMemory:
    """The ``uuid.UUID``s Edge handed back for the ids a scan converted (``our_id``), by the
    string each became, so that a write of those ids hands Edge the same objects again
    (``edge_ids``). Edge makes a ``set_payload`` of a UUID string in ~1.1 µs an id (pyo3 tries
    it as an integer, then as a ``uuid.UUID``, each failure a Python exception, before it
    parses the string) and of a ``uuid.UUID`` in ~0.7 µs; making the object again costs what
    it saves (issue 38, round 5), keeping the one Edge made costs a dict entry. The lean scan
    converts only the ids of the chunks it keeps (the drifted ones), so these are the ids a
    repair writes. At most ``limit`` are held; an id not held goes as its string, as before.
    A string is the UUID's own spelling (``str``), so either names the same point. (The held
    objects are collectable ones: a repair sets them aside from the collector with the rest of
    the scan, ``applying.set_aside``; without it, at 100k chunks, their 20,000 made a full
    collection land inside the repair: issue 38, repair round 8.)"""

    __slots__ = ("_uuids", "limit")

    def __init__(self, limit: int = ID_MEMORY) -> None:
        self.limit = limit
        self._uuids: dict[str, uuid.UUID] = {}

    def __len__(self) -> int:
        return len(self._uuids)

    def clear(self) -> None:
        """Forget every id (a new scan converts its own)."""
        self._uuids.clear()

    def our_id(self, point_id: Any) -> str | int:
        """``our_id``, the UUID remembered under its string."""
        if type(point_id) is not uuid.UUID:
            return our_id(point_id)
        text = str(point_id)
        if len(self._uuids) < self.limit:
            self._uuids[text] = point_id
        return text

    def edge_ids(self, point_ids: list[EdgeId]) -> list[EdgeId]:
        """Ids checked by ``edge_ids`` with each one held as its ``uuid.UUID`` (the others as
        they are)."""
        uuids = self._uuids
        if not uuids:
            return point_ids
        return list(map(uuids.get, point_ids, point_ids))  # type: ignore[arg-type]


def doc_filter(keys: KeyMap, doc_ids: list[str]) -> qe.Filter:
    """The points of these documents."""
    return qe.Filter(must=[qe.FieldCondition(key=keys.path("doc_id"), match=qe.MatchAny(doc_ids))])


def payload_batches(
    writes: Iterable[PayloadWrite], batch_size: int, keys: KeyMap
) -> Iterator[list[tuple[list[EdgeId], dict[str, Any]]]]:
    """Group writes into calls of ~``batch_size`` points (``chunking_rules.point_batches``),
    ids as Edge takes them; a larger write is split by ids. Consecutive writes of the same
    payload (a batch's documents repaired alike) are one ``set_payload`` of their ids together
    (``merged``)."""
    for batch in point_batches(joined(writes), batch_size, keys, edge_ids):
        yield merged(batch)


def joined(writes: Iterable[PayloadWrite]) -> Iterator[PayloadWrite]:
    """Consecutive writes of the same logical payload (``_same``) as one write of their ids
    together, before any is converted: a batch's ids checked by one match and its payload
    made Edge's once, not once a document. The points and the payload at each, in order, are
    those of ``writes`` (so ``point_batches`` cuts the calls where it would have)."""
    held: PayloadWrite | None = None
    ids: list[str | int] = []
    for write in writes:
        if held is not None and _same(held.payload, write.payload):
            ids += write.point_ids
            continue
        if held is not None:
            yield PayloadWrite(point_ids=tuple(ids), payload=held.payload)
        held, ids = write, list(write.point_ids)
    if held is not None:
        yield PayloadWrite(point_ids=tuple(ids), payload=held.payload)


def merged(
    batch: list[tuple[list[EdgeId], dict[str, Any]]],
) -> list[tuple[list[EdgeId], dict[str, Any]]]:
    """A batch's consecutive (ids, payload) writes of the same payload as one write: the same
    points end as the writes one after the other leave them (only neighbours are joined, so
    a later write of the same point still comes after an earlier one). The same payload: the
    same keys, each value of the same plain type (``1`` is not ``True``, nor ``1.0``) and equal."""
    joined: list[tuple[list[EdgeId], dict[str, Any]]] = []
    for ids, stored in batch:
        if joined and _same(joined[-1][1], stored):
            joined[-1][0].extend(ids)
        else:
            joined.append((ids, stored))  # (a list of its own: point_batches slices it)
    return joined


def _same(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    if one is other:
        return True
    if one.keys() != other.keys():
        return False
    for key, value in one.items():
        theirs = other[key]
        if type(value) is not type(theirs) or type(value) not in _PLAIN or value != theirs:
            return False
    return True


#: Values compared by ``_same`` (anything else is never judged the same: written apart).
_PLAIN = frozenset({str, int, float, bool, type(None)})


def schema_name(data_type: qe.PayloadSchemaType) -> str:
    """The port's name of an Edge payload index type (``keyword``, ``integer``, ...)."""
    for edge, name in _SCHEMA_NAMES:
        if data_type == edge:
            return name
    return str(data_type).rsplit(".", 1)[-1].lower()
