"""The one derivation of chunk payloads from document rows, the payload key layout, and the one
definition of whether two payloads are the same.

``payload_for`` is the rule that makes repair possible: a chunk's managed payload is a pure
function of its document row. Ingestion and the reconciler both call it, so they can never
disagree about what a chunk should say.
"""

from __future__ import annotations

import contextlib
import json
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
    PLACEMENT_KEYS,
    Document,
    VersionState,
    is_stored_form,
    parse_instant,
    rfc3339,
    stored_instant,
)


def payload_for(document: Document) -> dict[str, Any]:
    """Return the managed payload (logical key names) every chunk of ``document`` must carry."""
    return dict(zip(MANAGED_KEYS, payload_values(document), strict=True))


def payload_values(row: Document) -> tuple[Any, ...]:
    """The values of ``payload_for`` in ``MANAGED_KEYS`` order: what the check fingerprints as
    a row's expected payload, and what ``payload_for`` names (one derivation for the two)."""
    return managed_values(
        row.doc_family_id,
        row.doc_version,
        row.version_state,
        row.superseded_by,
        row.effective_from,
        row.effective_to,
        row.doc_class,
        row.quarantined,
        row.quarantine_reason,
    )


def managed_values(
    family: str,
    version: int,
    state: str,
    superseded_by: str | None,
    effective_from: datetime | str | None,
    effective_to: datetime | str | None,
    doc_class: str | None,
    quarantined: bool,
    reason: str | None,
) -> tuple[Any, ...]:
    """``payload_values`` of a row given as its fields (``Document``'s, in ``MANAGED_KEYS``
    order; the state as stored, or as a ``VersionState``; an instant as a ``datetime`` or as
    the SQLite table's stored text of it): the check's scan reads the table's rows as these,
    not as ``Document`` values (issue 38). (``instant_text``'s look-ups are spelt out here:
    the scan calls this once a row.)"""
    # (``is None``: a value that is not an instant, an integer 0 that another writer left in
    # SQLite's column say, is an error below, never the open window)
    start = OPEN_START if effective_from is None else effective_from
    end = OPEN_END if effective_to is None else effective_to
    texts, cuts = _TEXTS, CUT_TEXTS
    return (
        family,
        int(version),
        _STATE_TEXTS.get(state, _UNKNOWN_TEXT),  # (``str(state_of(state))``)
        superseded_by,
        (cuts.get(start) or _cut(start))
        if start.__class__ is str
        else (start.__class__ is datetime and start.tzinfo is UTC and texts.get(start))
        or instant_text(start),
        (cuts.get(end) or _cut(end))
        if end.__class__ is str
        else (end.__class__ is datetime and end.tzinfo is UTC and texts.get(end))
        or instant_text(end),
        doc_class,
        bool(quarantined),
        reason,
    )


#: ``str(state_of(text))`` of each state's text (a state itself looks up alike): the text.
_STATE_TEXTS: dict[str, str] = {state.value: state.value for state in VersionState}
_UNKNOWN_TEXT = VersionState.UNKNOWN.value


#: ``rfc3339`` of UTC instants seen lately (``instant_text``); emptied when it reaches this size.
_TEXTS_KEPT = 1024
_TEXTS: dict[datetime, str] = {}


def instant_text(value: datetime | str) -> str:
    """``rfc3339(value)``; the text of a UTC instant is remembered until a thousand or so
    others have been seen: a corpus repeats its dates (every open end, a version's end that is
    its successor's start, a policy date many documents share), and formatting one costs
    several times looking it up. The table reads its dates back in UTC. Any other value is
    formatted each time: two local times of a zone with daylight saving, an hour apart, are
    equal as keys when they differ only in ``fold``.

    A text is the SQLite table's stored text of an instant (``stored_text``)."""
    if isinstance(value, str):
        return stored_text(value)
    if value.__class__ is not datetime or value.tzinfo is not UTC:
        if not isinstance(value, datetime):
            raise TypeError(f"an instant is a datetime or a stored text, not {value!r}")
        return rfc3339(value)
    text = _TEXTS.get(value)
    if text is None:
        if len(_TEXTS) >= _TEXTS_KEPT:
            _TEXTS.clear()
        text = _TEXTS[value] = _utc_text(value)
    return text


#: ``stored_text`` of texts in the stored form seen lately, and only of those (so a text found
#: here is one: ``pipeline.settling`` compares them as instants); emptied at ``_TEXTS_KEPT``.
CUT_TEXTS: dict[str, str] = {}


def stored_text(text: str) -> str:
    """``rfc3339`` of the instant the SQLite table stores as ``text``. In the table's own form
    ("2026-01-02 03:04:05.000006", ``is_stored_form``) the payload's text is cut from it, not
    parsed and formatted (issue 38: the check's table pass reads every row's two instants);
    any other text is read as the table reads it back (``stored_instant``)."""
    return CUT_TEXTS.get(text) or _cut(text)


def _cut(text: str) -> str:
    """``stored_text`` of a text not remembered."""
    if not is_stored_form(text):
        return _utc_text(stored_instant(text))
    if len(CUT_TEXTS) >= _TEXTS_KEPT:
        CUT_TEXTS.clear()
    known = CUT_TEXTS[text] = (
        f"{text[:19].replace(' ', 'T')}Z"
        if text.endswith("000000")
        else f"{text.replace(' ', 'T')}Z"
    )
    return known


#: "00" to "99": the two-digit fields of an instant's text (``_utc_text``).
_TWO = tuple(f"{n:02d}" for n in range(100))
#: Year -> its four digits, for the years met (at most 9,999).
_YEARS: dict[int, str] = {}


def _utc_text(value: datetime) -> str:
    """``rfc3339`` of a ``datetime`` in UTC, spelt from its fields: ``isoformat`` formats
    through C's printf, several times the cost (issue 38: a corpus's dates are mostly
    distinct, so most rows of the check's table pass format one)."""
    two, year = _TWO, value.year
    digits = _YEARS.get(year) or _YEARS.setdefault(year, f"{year:04d}")
    text = (
        f"{digits}-{two[value.month]}-{two[value.day]}"
        f"T{two[value.hour]}:{two[value.minute]}:{two[value.second]}"
    )
    micro = value.microsecond
    return f"{text}.{micro:06d}Z" if micro else f"{text}Z"


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

    def reread_paths(self) -> list[str]:
        """Dotted paths of doc_id and the managed keys: what the re-read before a payload write
        reads (``ChunkReader.retrieve_managed``)."""
        return [self.path(key) for key in ("doc_id", *MANAGED_KEYS)]

    def placement_paths(self) -> list[str]:
        """Dotted paths of what a placement scan reads (``ChunkReader.scan_managed`` with
        ``placement``): doc_id and doc_family_id, where a chunk belongs and whose it is."""
        return [self.path(key) for key in PLACEMENT_KEYS]

    def scan_paths(self) -> list[str]:
        """Dotted paths of the keys the check's lean scan reads: doc_id, the managed keys and
        content_hash (which text the chunk holds; not chunk_id, which it never looks at)."""
        return [self.path(key) for key in ("doc_id", *MANAGED_KEYS, "content_hash")]


DEFAULT_KEYS = KeyMap()


@dataclass(frozen=True)
class Layout:
    """How a framework lays out a chunk's payload (``[index] layout``): where the version
    keys live (``prefix``), where the text is (``text_key``), the stored name of the document
    id, and whether the text is a serialised LlamaIndex node."""

    name: str
    prefix: str = ""
    text_key: str = "text"
    doc_id_key: str = "doc_id"
    node_content: bool = False

    def chunk_fields(self, text: str, *, doc_id: str, point_id: str) -> tuple[str, dict[str, Any]]:
        """What a new chunk stores under ``text_key``, and the payload keys the framework
        reads beside the version keys (top level in LlamaIndex's flat layout)."""
        if not self.node_content:
            return text, {}
        return _node_content(text, doc_id=doc_id, point_id=point_id), {
            "_node_type": "TextNode",
            "document_id": doc_id,
            "ref_doc_id": doc_id,
        }


#: The payload layouts ``[index] layout`` names. LangChain's ``QdrantVectorStore`` keeps a
#: ``Document`` as ``{"page_content": ..., "metadata": {...}}`` and names its origin
#: ``metadata.source``; LlamaIndex's flattens a node's metadata to the top level, serialises
#: the node (with its text) under ``_node_content``, and names its source document under
#: ``doc_id``, ``document_id`` and ``ref_doc_id``.
LAYOUTS: dict[str, Layout] = {
    "default": Layout("default"),
    "langchain": Layout(
        "langchain", prefix="metadata.", text_key="page_content", doc_id_key="source"
    ),
    "llamaindex": Layout("llamaindex", text_key="_node_content", node_content=True),
}


def _node_content(text: str, *, doc_id: str, point_id: str) -> str:
    """A LlamaIndex ``TextNode`` as its Qdrant store serialises it (``node_to_metadata_dict``):
    the point's id, the text, and the source document as its ``SOURCE`` relationship ("1")."""
    node: dict[str, Any] = {
        "id_": point_id,
        "embedding": None,
        "metadata": {},
        "excluded_embed_metadata_keys": [],
        "excluded_llm_metadata_keys": [],
        "relationships": {
            "1": {
                "node_id": doc_id,
                "node_type": None,
                "metadata": {},
                "hash": None,
                "class_name": "RelatedNodeInfo",
            }
        },
        "metadata_template": "{key}: {value}",
        "metadata_separator": "\n",
        "text": text,
        "mimetype": "text/plain",
        "start_char_idx": None,
        "end_char_idx": None,
        "text_template": "{metadata_str}\n\n{content}",
        "class_name": "TextNode",
    }
    return json.dumps(node, ensure_ascii=False)


def chunk_text(payload: Mapping[str, Any], text_key: str) -> str | None:
    """A chunk's text from its payload: the value at ``text_key``, or the text of the
    LlamaIndex node serialised there."""
    value = payload.get(text_key)
    if not isinstance(value, str):
        return None
    if text_key == "_node_content":
        try:
            node = json.loads(value)
        except ValueError:
            return value
        text = node.get("text") if isinstance(node, dict) else None
        return text if isinstance(text, str) else None
    return value


__all__ = [
    "DEFAULT_KEYS",
    "LAYOUTS",
    "MANAGED_KEYS",
    "KeyMap",
    "Layout",
    "chunk_id_for",
    "chunk_payload",
    "chunk_text",
    "payload_for",
    "point_id_for",
]


# -- are two payloads the same ---------------------------------------------------------------
# The one definition: the check's scan (``fingerprint``, ``normalize``), the planner and the
# applier (``same_payload``, ``same_variant``, ``holds``), recovery and the trail's replay all
# decide by these.

#: A managed payload in canonical, hashable form: ((key, value), ...) over MANAGED_KEYS,
#: an absent key read as None (Qdrant removes a key written as null).
Variant = tuple[tuple[str, Any], ...]

_DATE_KEYS = ("effective_from", "effective_to")


def normalize(payload: Mapping[str, Any]) -> Variant:
    """Canonical form of a managed payload, so equal meanings compare equal."""
    items: list[tuple[str, Any]] = []
    for key in MANAGED_KEYS:
        value = payload.get(key)
        if key in _DATE_KEYS and isinstance(value, str):
            # An unparseable date stays as found: it differs, so it is drift.
            with contextlib.suppress(ValueError, OverflowError):  # (a year 1 or 9999 offset)
                value = instant_text(parse_instant(value))
        elif key == "doc_version" and isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, list | dict):
            value = _frozen(value)
        items.append((key, value))
    return tuple(items)


class FrozenObject(dict[str, Any]):
    """A JSON object a chunk holds where a managed value belongs, as ``normalize`` keeps it:
    a dict (it reads and prints as one) that hashes, so a variant holding it can be counted
    (it is drift, never a row's value; its values are frozen too)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))


def _frozen(value: Any) -> Any:
    """A stored JSON value made hashable: lists as tuples, objects as ``FrozenObject``s, all
    the way down."""
    if isinstance(value, list | tuple):
        return tuple(map(_frozen, value))
    if isinstance(value, dict):
        return FrozenObject((key, _frozen(inner)) for key, inner in value.items())
    return value


def doc_id_of(value: Any) -> str | None:
    """A chunk's stored doc_id as the reconciler reads it: the text, else ``None``. A doc_id is
    a keyword: a number, a boolean, a JSON object or list that another writer left there names
    no document, as a missing doc_id names none (``bootstrap`` says the same: "no string
    document id"); such a chunk is an orphan without a doc_id, reported and quarantined by
    point id. (Its JSON text would name one: ``7`` would read as ``"7"``, a row's id.)"""
    return value if type(value) is str else None


def same_variant(found: Variant, expected: Variant) -> bool:
    """Whether two canonical payloads are the same, value and type: ``1 == True`` and
    ``0 == False`` in Python, not in a payload (``quarantined: 0`` is not ``False``), as the
    scan's ``fingerprint`` holds. ``normalize`` has made an integral float version an int."""
    return found == expected and all(
        type(a) is type(b) for (_ka, a), (_kb, b) in zip(found, expected, strict=True)
    )


def same_payload(found: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """Whether two managed payloads (logical keys) mean the same: their canonical forms are
    the same, value and type (dates in another spelling, ``1.0`` for a version ``1``)."""
    return same_variant(normalize(found), normalize(expected))


def same_value(held: Any, value: Any) -> bool:
    """Whether a payload holds ``value`` exactly under a key it holds ``held``: the same type
    (``1.0`` is not ``1``, ``0`` is not ``False``) and an equal value, nothing normalised."""
    return type(held) is type(value) and bool(held == value)


def holds(payload: Mapping[str, Any], key: str, value: Any) -> bool:
    """Whether writing ``value`` under ``key`` leaves ``payload`` as it is: the key held with
    ``same_value``, or, for ``None`` (which removes a key), no key at all."""
    if value is None:
        return key not in payload
    return key in payload and same_value(payload[key], value)


_DOC_VERSION = MANAGED_KEYS.index("doc_version")
_QUARANTINED = MANAGED_KEYS.index("quarantined")
#: A fingerprint no value tuple has (``hash`` never returns -1 in CPython).
_NO_MATCH = -1


def fingerprint(values: tuple[Any, ...], *, at: int = 0) -> int:
    """A 64-bit fingerprint of raw managed values in ``MANAGED_KEYS`` order (from index ``at``
    of ``values``: the scan's rows lead with the doc_id), for equality with an expected
    payload; ``-1`` when they cannot equal one (unhashable, or a ``doc_version`` that is not an
    int or a ``quarantined`` that is not a bool: ``1 == True == 1.0`` in Python, and the old
    repr digest told them apart).

    ``hash`` of a tuple of str/int/bool/None is exact-equality-preserving and per process
    (SipHash for strings): two different tuples collide with probability about 2**-64. It is
    compared only within one run, never stored.
    """
    if type(values[at + _DOC_VERSION]) is not int or type(values[at + _QUARANTINED]) is not bool:
        return _NO_MATCH
    try:
        return hash(values)
    except TypeError:  # a list or object value: never what payload_for writes
        return _NO_MATCH
