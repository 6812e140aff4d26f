"""Values as the stores and the JSON output hold them: instants in UTC (RFC 3339 in payloads),
text the stores accept, plain values made JSON and a row's fields read back from it."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring,
    encode_basestring_ascii,
)
from typing import Any


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive values are taken to be UTC."""
    zone = value.tzinfo
    if zone is UTC:
        return value
    if zone is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def rfc3339(value: datetime) -> str:
    """Format an instant as the RFC 3339 UTC string written to payloads (``...Z``)."""
    # isoformat zero-pads the year to four digits and writes microseconds only when there are
    # some; in UTC it ends in "+00:00", spelt "Z" here.
    return f"{utc(value).isoformat()[:-6]}Z"


def stored_form(value: datetime) -> str:
    """The text the SQLite table stores ``value`` as: naive, in UTC, microseconds always
    written ("2026-01-02 03:04:05.000006"). Such texts are all of one width, so two of them
    compare as their instants do (the check's scan compares them so, issue 38)."""
    return utc(value).replace(tzinfo=None).isoformat(" ", "microseconds")


def is_stored_form(text: object) -> bool:
    """Whether ``text`` is a text ``stored_form`` writes: 26 characters, its separators where
    that form has them, read by ``fromisoformat`` as a naive instant. (Then every other
    character is a digit: ``fromisoformat`` takes only ASCII digits in a date's and a time's
    fields, and a fraction of five digits or fewer would leave room only for an offset, which
    makes it aware. A date alone, an offset, a ``T``, a comma, fewer digits of a second, or
    any text not an instant are not the form.)"""
    if text.__class__ is not str or len(text) != 26 or text[4:20:3] != _STORED_SEPARATORS:
        return False
    try:
        return datetime.fromisoformat(text).tzinfo is None
    except ValueError:
        return False


#: The characters at 4, 7, 10, 13, 16 and 19 of a stored instant ("2026-01-02 03:04:05.000006").
_STORED_SEPARATORS = "-- ::."


def stored_instant(text: str) -> datetime:
    """The instant a stored text says, as the SQLite table reads it back (``UTCDateTime``):
    ISO 8601, naive meaning UTC."""
    return utc(datetime.fromisoformat(text))


def storable(text: str) -> str:
    """``text`` with NUL characters and lone surrogates spelled out, for messages, paths and
    findings: PostgreSQL's text and JSONB refuse NUL, UTF-8 encoders refuse surrogates."""
    text = text.replace("\x00", "\\0")
    if text.isascii():  # (no surrogate: the usual text, checked without encoding it)
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def parse_instant(text: str) -> datetime:
    """Parse an RFC 3339 / ISO 8601 instant (``Z`` allowed; naive means UTC)."""
    return utc(datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00")))


#: Types ``jsonable`` leaves as they are, matched exactly (a subclass, an ``IntEnum`` say,
#: goes the long way).
_PLAIN_LEAVES = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any) -> Any:
    """Plain JSON-ready values: datetimes as RFC 3339, enums as their value."""
    kind = type(value)
    if kind in _PLAIN_LEAVES:  # (the usual values first: an audit entry is mostly these)
        return value
    # (a plain leaf inside a dict or a list is taken as it is, without a call a leaf: a
    # finding's and an audit entry's values are mostly text, numbers and None)
    if kind is dict:
        return {
            k if type(k) is str else str(k): v if type(v) in _PLAIN_LEAVES else jsonable(v)
            for k, v in value.items()
        }
    if kind is list:
        return [v if type(v) in _PLAIN_LEAVES else jsonable(v) for v in value]
    if kind is datetime and value.tzinfo is UTC:
        return _utc_text(value)
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


@lru_cache(maxsize=8192)
def _utc_text(value: datetime) -> str:
    """``rfc3339`` of a UTC instant, remembered: a run's findings and audit entries repeat a
    few instants (every open end, a version's end that is its successor's start, the run's
    own time) tens of thousands of times, and a look-up costs a fraction of formatting one.
    Only a plain ``datetime`` in ``UTC`` comes here: two local times an hour apart that
    differ only in ``fold`` are equal keys (``payload.instant_text`` keeps the same rule)."""
    return rfc3339(value)


# -- writes and their audit entries ---------------------------------------------------------


#: Document fields that audited JSON holds as RFC 3339 text.
_DATETIME_FIELDS = frozenset({"effective_from", "effective_to", "ingested_at", "updated_at"})


def fields_from_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn audited JSON field values back into row values (datetimes parsed)."""
    return {
        name: parse_instant(value) if name in _DATETIME_FIELDS and isinstance(value, str) else value
        for name, value in values.items()
    }


def encoder_of(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode``, the same text and the same errors, without what
    ``JSONEncoder.encode`` does again on every call: ``iterencode`` and its ``floatstr``
    closure made anew, the options read off the encoder (a declare of 100,000 proposals
    encodes ~2 million values: the report's lines, the findings' columns, the audit's texts).
    Each call still gets a C encoder of its own with fresh circular-reference markers
    (``_json.make_encoder``), as ``encode`` does: an error leaves nothing behind, and threads
    share nothing. Where the C encoder is absent, or ``indent`` is set (the Python encoder),
    ``encoder.encode`` itself."""
    if c_make_encoder is None or encoder.indent is not None:
        return encoder.encode
    strings = encode_basestring_ascii if encoder.ensure_ascii else encode_basestring
    default, circular = encoder.default, encoder.check_circular
    options = (
        encoder.key_separator, encoder.item_separator, encoder.sort_keys, encoder.skipkeys,
        encoder.allow_nan,
    )  # fmt: skip
    make, join = c_make_encoder, "".join

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return strings(value)
        markers: dict[int, Any] | None = {} if circular else None
        return join(make(markers, default, strings, None, *options)(value, 0))

    return encode
