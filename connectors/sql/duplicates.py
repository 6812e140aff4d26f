"""The rows of one id in an order of their own values, not the database's.

The scan reads rows ordered by the id column and keeps the first row of an id (the others are
``duplicate_id`` problems). Rows of one id come in whatever order the database holds them:
PostgreSQL returns them in heap order, and an ``UPDATE`` that changes nothing moves the row it
touches to the end. So the row kept flipped with such writes, and the document's state and hash
with it. Here the rows of one id (adjacent, the id being the sort key) are put in the order of
their values, field by field in ``LOGICAL_FIELDS`` order, so the same rows keep the same row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from connectors.sql.options import LOGICAL_FIELDS

__all__ = ["by_values"]


def by_values(rows: Iterable[Mapping[Any, Any]], *, ignored: str) -> Iterator[dict[str, Any]]:
    """``rows`` (ordered by id) with each run of rows of one id sorted by their values;
    ``ignored`` names a column left out of the comparison (the watch's change stamp, which an
    UPDATE that changes nothing moves)."""
    group: list[dict[str, Any]] = []
    for row in rows:
        current = dict(row)
        if group and _id_of(current) != _id_of(group[0]):
            yield from _sorted(group, ignored)
            group = []
        group.append(current)
    yield from _sorted(group, ignored)


def _id_of(row: Mapping[str, Any]) -> str:
    return str(row.get("id")).strip()


def _sorted(group: list[dict[str, Any]], ignored: str) -> list[dict[str, Any]]:
    if len(group) < 2:
        return group
    return sorted(group, key=lambda row: _order(row, ignored))


def _order(row: Mapping[str, Any], ignored: str) -> tuple[tuple[int, str, str], ...]:
    """A total order over rows whose values may be of any type (a NULL first)."""
    fields = [f for f in LOGICAL_FIELDS if f in row] + sorted(
        k for k in row if k not in LOGICAL_FIELDS and k != ignored
    )
    return tuple(_value(row[field]) for field in fields)


def _value(value: Any) -> tuple[int, str, str]:
    if value is None:
        return (0, "", "")
    if isinstance(value, memoryview):
        value = value.tobytes()
    return (1, type(value).__name__, value.hex() if isinstance(value, bytes) else str(value))
