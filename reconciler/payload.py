"""The one derivation of chunk payloads from document rows, and the payload key layout.

``payload_for`` is the rule that makes repair possible: a chunk's managed payload is a pure
function of its document row. Ingestion and the reconciler both call it, so they can never
disagree about what a chunk should say.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.model import (
    ALL_KEYS,
    MANAGED_KEYS,
    OPEN_END,
    OPEN_START,
    Document,
    rfc3339,
    state_of,
)


def payload_for(document: Document) -> dict[str, Any]:
    """Return the managed payload (logical key names) every chunk of ``document`` must carry."""
    return dict(zip(MANAGED_KEYS, payload_values(document), strict=True))


def payload_values(row: Document) -> tuple[Any, ...]:
    """The values of ``payload_for`` in ``MANAGED_KEYS`` order: what the check fingerprints as
    a row's expected payload, and what ``payload_for`` names (one derivation for the two)."""
    return (
        row.doc_family_id,
        int(row.doc_version),
        str(state_of(row.version_state)),
        row.superseded_by,
        instant_text(row.effective_from or OPEN_START),
        instant_text(row.effective_to or OPEN_END),
        row.doc_class,
        bool(row.quarantined),
        row.quarantine_reason,
    )


#: ``rfc3339`` of UTC instants seen lately (``instant_text``); emptied when it reaches this size.
_TEXTS_KEPT = 1024
_TEXTS: dict[datetime, str] = {}


def instant_text(value: datetime) -> str:
    """``rfc3339(value)``; the text of a UTC instant is remembered until a thousand or so
    others have been seen: a corpus repeats its dates (every open end, a version's end that is
    its successor's start, a policy date many documents share), and formatting one costs
    several times looking it up. The table reads its dates back in UTC. Any other value is
    formatted each time: two local times of a zone with daylight saving, an hour apart, are
    equal as keys when they differ only in ``fold``."""
    if value.__class__ is not datetime or value.tzinfo is not UTC:
        return rfc3339(value)
    text = _TEXTS.get(value)
    if text is None:
        if len(_TEXTS) >= _TEXTS_KEPT:
            _TEXTS.clear()
        text = _TEXTS[value] = rfc3339(value)
    return text


#: Namespace of point ids: uuid5(namespace, chunk_id), so re-ingesting is idempotent.
POINT_NAMESPACE = uuid.UUID("6f1d3c2a-8f4e-4b8e-9a51-2c7d0e5b9f10")


def point_id_for(chunk_id: str) -> str:
    """The stable Qdrant point id of a chunk (the reference ingestion's)."""
    return str(uuid.uuid5(POINT_NAMESPACE, chunk_id))


def chunk_id_for(doc_id: str, n: int) -> str:
    """The id of the ``n``-th chunk of a document, as the reference ingestion names it."""
    return f"{doc_id}#{n}"


def chunk_payload(document: Document, *, chunk_id: str) -> dict[str, Any]:
    """Return the full logical payload of a new chunk: identity keys plus ``payload_for``.

    Null values are left out: Qdrant's ``set_payload`` removes a key written as null, so an
    absent key is how a null reads everywhere, and a rollback can restore it exactly.
    """
    payload = {
        "doc_id": document.doc_id,
        "chunk_id": chunk_id,
        "content_hash": document.source_hash,
        **payload_for(document),
    }
    return {key: value for key, value in payload.items() if value is not None}


@dataclass(frozen=True)
class KeyMap:
    """Where each logical payload key lives in a collection: renames and a nested prefix.

    ``prefix`` is ``""`` for top-level keys or a dotted path ending in ``.`` (``"metadata."``
    for collections built by LangChain's Qdrant store).
    """

    prefix: str = ""
    renames: Mapping[str, str] = field(default_factory=dict)
    #: (logical key, stored leaf name) of every key, worked out once (``from_point`` reads
    #: them for every point a repair re-reads).
    _stored: tuple[tuple[str, str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.renames) - set(ALL_KEYS))
        if unknown:
            raise ValueError(f"unknown payload key(s) to rename: {', '.join(unknown)}")
        if self.prefix and not self.prefix.endswith("."):
            object.__setattr__(self, "prefix", self.prefix + ".")
        object.__setattr__(self, "_stored", tuple((key, self.name(key)) for key in ALL_KEYS))

    def name(self, key: str) -> str:
        """The stored (renamed) leaf name of a logical key."""
        return self.renames.get(key, key)

    def path(self, key: str) -> str:
        """The dotted path of a logical key, as filters and payload selectors spell it."""
        return f"{self.prefix}{self.name(key)}"

    @property
    def nest_key(self) -> str | None:
        """The object the keys live in (``set_payload(key=...)``), or None at top level."""
        return self.prefix[:-1] if self.prefix else None

    def to_stored(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Rename logical keys to stored leaf names (the caller nests under ``nest_key``)."""
        return {self.name(key): value for key, value in payload.items()}

    def to_point(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Build a whole point payload from logical keys, nested under the prefix."""
        stored: dict[str, Any] = self.to_stored(payload)
        if self.prefix:
            for part in reversed(self.prefix[:-1].split(".")):
                stored = {part: stored}
        return stored

    def from_point(self, point_payload: Mapping[str, Any] | None) -> dict[str, Any]:
        """Read the logical keys present in a point payload; absent keys stay absent."""
        node: Any = point_payload or {}
        if self.prefix:
            for part in self.prefix[:-1].split("."):
                node = node.get(part) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            return {}
        return {key: node[stored] for key, stored in self._stored if stored in node}

    def managed_paths(self) -> list[str]:
        """Dotted paths of every key a scroll reads (identity plus managed)."""
        return [self.path(key) for key in ALL_KEYS]

    def scan_paths(self) -> list[str]:
        """Dotted paths of the keys the check's lean scan reads: doc_id, the managed keys and
        content_hash (which text the chunk holds; not chunk_id, which it never looks at)."""
        return [self.path(key) for key in ("doc_id", *MANAGED_KEYS, "content_hash")]


DEFAULT_KEYS = KeyMap()

__all__ = [
    "DEFAULT_KEYS",
    "MANAGED_KEYS",
    "KeyMap",
    "chunk_id_for",
    "chunk_payload",
    "payload_for",
    "point_id_for",
]
