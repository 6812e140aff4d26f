"""Where the check's scan saw drift, kept for the applier to write by id: the point ids of the
mismatching chunks, each with the managed values the scan read there (the audit's *before*:
docs/engine.md, "Why no re-read"), up to ``limit`` in all. Past it none are kept: the applier
then selects those documents' points again."""

from __future__ import annotations

from typing import Any

from reconciler.ports.index import ABSENT

#: A document's kept chunks: by its slot (a registered row) or, an orphan, by its doc_id.
Key = tuple[bool, Any]


class KeptIds:
    """The kept ids and values, one list each a document; one values tuple for all the chunks
    that spell them alike."""

    __slots__ = ("_ids", "_kept", "_spellings", "_values", "complete", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: False once more mismatching chunks were seen than ``limit``: ids were dropped.
        self.complete = True
        self._kept = 0
        self._ids: dict[Key, list[str | int]] = {}
        self._values: dict[Key, list[tuple[Any, ...]]] = {}
        self._spellings: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def keep(self, key: Key, point_id: str | int, values: tuple[Any, ...]) -> None:
        """One more mismatching chunk of the document ``key``, as the scan read it."""
        if not self.complete:
            return
        if self._kept >= self.limit:
            self.complete = False
            self._ids.clear()
            self._values.clear()
            self._spellings.clear()
            return
        self._ids.setdefault(key, []).append(point_id)
        self._values.setdefault(key, []).append(self._spelt_as(values))
        self._kept += 1

    def scanned(self, key: Key) -> tuple[list[str | int], list[tuple[Any, ...]]] | None:
        """The document's kept ids and, beside each, its values (``None``: not all kept)."""
        if not self.complete:
            return None
        return list(self._ids.get(key, ())), self._values.get(key, [])

    def _spelt_as(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """``values`` as ``retrieve_managed`` gives them (a ``None`` the scan read is an absent
        key: nulls are never stored), one tuple kept for the chunks that spell them alike."""
        try:
            spelling = (values, tuple(map(type, values)))
            return self._spellings[spelling]
        except KeyError:
            kept = self._spellings[spelling] = tuple(ABSENT if v is None else v for v in values)
            return kept
        except TypeError:  # an unhashable value (a list): kept alone
            return tuple(ABSENT if v is None else v for v in values)
