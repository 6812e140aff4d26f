"""What a vocabulary reads of a source, field by field, before anything is served
(``reconciler vocabulary check``, and ``ingest`` on a fresh deployment): for each field the
configuration maps (``fields``, and the groups of ``body_patterns``), how many documents gave
it, gave it twice over, gave it unreadable, or did not give it; and what each reader held of
each field in one document.

Pure: notes in, counts out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connectors.vocabulary.document import Note, Vocabulary
from connectors.vocabulary.fields import FIELDS, LINK_FIELDS

__all__ = ["FieldCount", "field_counts", "readings", "surveyed_fields", "unread_fields"]

#: ``Note.invalid`` names a ``SourceDocument`` field; the vocabulary's field of the same value.
_FIELD_OF = {"state": "status"}


@dataclass(frozen=True, slots=True)
class FieldCount:
    """How one mapped field read across a source's documents (each counted once)."""

    field: str
    #: The source's key names for it, or ``("body_patterns",)``.
    keys: tuple[str, ...]
    found: int = 0
    #: Given by several readers that disagree, or several values where one is expected.
    ambiguous: int = 0
    #: Given, but taken as absent (a status no mapping names, a date no format reads).
    invalid: int = 0
    missing: int = 0

    @property
    def read(self) -> int:
        """Documents that gave the field at all."""
        return self.found + self.ambiguous + self.invalid

    def to_json(self) -> dict[str, Any]:
        """As ``--format json`` spells it."""
        return {
            "field": self.field,
            "keys": list(self.keys),
            "found": self.found,
            "ambiguous": self.ambiguous,
            "invalid": self.invalid,
            "missing": self.missing,
        }


def surveyed_fields(vocabulary: Vocabulary) -> dict[str, tuple[str, ...]]:
    """field -> its keys, for each field the configuration maps, in ``FIELDS`` order."""
    groups = {
        name
        for pattern in vocabulary.body_patterns
        for name in pattern.groupindex
        if "body" in vocabulary.readers
    }
    keyed = vocabulary.mapped if set(vocabulary.readers) - {"body"} else frozenset()
    return {
        name: vocabulary.keys[name] if name in keyed else ("body_patterns",)
        for name in FIELDS
        if name in keyed or name in groups
    }


def field_counts(vocabulary: Vocabulary, notes: Iterable[Note]) -> tuple[FieldCount, ...]:
    """Each mapped field's counts over ``notes``."""
    fields = surveyed_fields(vocabulary)
    tally: dict[str, dict[str, int]] = {name: {} for name in fields}
    for note in notes:
        invalid = {_FIELD_OF.get(name, name) for name, _ in note.invalid}
        for name in fields:
            if name in invalid:
                outcome = "invalid"
            elif name not in note.found:
                outcome = "missing"
            elif _ambiguous(name, note.readings.get(name, {})):
                outcome = "ambiguous"
            else:
                outcome = "found"
            tally[name][outcome] = tally[name].get(outcome, 0) + 1
    return tuple(FieldCount(name, fields[name], **tally[name]) for name in fields)


def unread_fields(counts: Iterable[FieldCount], unread: Iterable[str] = ()) -> list[str]:
    """The mapped fields no document gave: link fields only when ``unread`` names them (a
    young corpus has no supersession, but a link key written and not read is a mistake)."""
    named = set(unread)
    return [
        count.field
        for count in counts
        if count.read == 0 and (count.field not in LINK_FIELDS or count.field in named)
    ]


def _ambiguous(name: str, held: Mapping[str, Any]) -> bool:
    values = list(held.values())
    if name not in LINK_FIELDS and any(
        isinstance(v, list) and len(set(map(str, v))) > 1 for v in values
    ):
        return True
    return len({str(v) for v in values}) > 1


def readings(note: Note) -> dict[str, dict[str, str]]:
    """field -> reader -> the value as it reads in a report (long values cut)."""
    return {
        name: {reader: _shown(value) for reader, value in held.items()}
        for name, held in note.readings.items()
    }


def _shown(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."
