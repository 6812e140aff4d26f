"""Records: one source document's logical fields, read from a flat record (an HTTP registry's
JSON entry, a SQL row) and turned into ``SourceDocument`` values; and the one date parser every
connector reads dates with.

Shared by the registry-shaped connectors (``connectors.http``, ``connectors.sql``): both read the
same logical fields (``FIELDS``) with the same rules. An invalid field is taken as absent with a
problem; a record whose ``id`` cannot be read is refused (``RecordRefused``). Imports no HTTP
or database client.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from reconciler.model import (
    ProblemKind,
    SourceDocument,
    SourceProblem,
    VersionState,
    parse_instant,
)

__all__ = [
    "FIELDS",
    "DateOutOfRange",
    "Record",
    "RecordRefused",
    "assemble",
    "break_cycles",
    "cycle_message",
    "cycles",
    "intake",
    "keep",
    "parse_date",
    "parse_status_map",
    "problem",
    "read_date",
    "record_from",
    "sha256_of",
    "shown",
]

log = logging.getLogger(__name__)

_HASH = re.compile(r"(?:sha256:)?([0-9a-f]{64})", re.IGNORECASE)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DIGITS = re.compile(r"[0-9]+")


#: Logical fields of a registry record (the HTTP schema's keys, the sql connector's mapping).
FIELDS: tuple[str, ...] = (
    "id",
    "family",
    "version",
    "status",
    "effective_from",
    "effective_to",
    "superseded_by",
    "title",
    "doc_class",
    "content_hash",
)


class RecordRefused(Exception):
    """A record whose identity cannot be known: it becomes a problem, never a document."""


@dataclass(slots=True)
class Record:
    """One source document's fields, converted, before supersession is resolved."""

    key: str
    family: str | None = None
    version: int | None = None
    state: VersionState | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    successor: str | None = None  # the raw superseded_by key
    title: str | None = None
    doc_class: str | None = None
    content_hash: str | None = None
    #: (``SourceDocument`` field, message) of each field taken as absent.
    invalid: list[tuple[str, str]] = field(default_factory=list)


def sha256_of(body: str) -> str:
    """The ``content_hash`` of a body: sha256 of its UTF-8 bytes, exactly as served."""
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def parse_status_map(value: Mapping[str, str] | None) -> dict[str, VersionState]:
    """``status_map`` option -> source value -> state (validated by ``status_map_problems``)."""
    return {str(k): VersionState(v.lower()) for k, v in (value or {}).items()}


def record_from(raw: Mapping[str, Any], *, status_map: Mapping[str, VersionState]) -> Record:
    """Convert one record's logical fields; raise RecordRefused when ``id`` is unusable."""
    key = _identity(raw.get("id"))
    record = Record(key=key)
    record.family = _text(raw, "family", record.invalid)
    record.title = _text(raw, "title", record.invalid)
    record.doc_class = _text(raw, "doc_class", record.invalid)
    record.version = _version(raw.get("version"), record.invalid)
    record.state = _status(raw.get("status"), status_map, record.invalid)
    record.effective_from = _instant(raw, "effective_from", record.invalid)
    record.effective_to = _instant(raw, "effective_to", record.invalid)
    successor = raw.get("superseded_by")
    if successor is not None:
        try:
            record.successor = _identity(successor)
        except RecordRefused:
            record.invalid.append(
                (
                    "superseded_by",
                    f"superseded_by must name one document id, got {shown(successor)}; "
                    "taken as absent",
                )
            )
    record.content_hash = _hash(raw.get("content_hash"), record.invalid)
    return record


def assemble(
    source: str,
    records: Sequence[Record],
    hashes: Mapping[str, str],
    problems: list[SourceProblem],
    *,
    complete: bool,
) -> tuple[SourceDocument, ...]:
    """Documents of the records that have a hash, supersession resolved; problems appended.

    ``records`` are unique by key. A ``superseded_by`` naming the record itself or part of a
    cycle is dropped with a problem; one naming no record is dropped with a problem when the
    scan was complete, and kept as declared when it was not (the successor may be among the
    records the scan could not read).
    """
    keys = {record.key for record in records}
    successors: dict[str, str] = {}
    for record in records:
        if record.successor is None:
            continue
        doc_id = f"{source}:{record.key}"
        if record.successor == record.key:
            problems.append(
                problem(
                    source,
                    ProblemKind.SELF_SUPERSESSION,
                    "superseded_by names the document itself; ignored",
                    key=record.key,
                )
            )
        elif record.successor in keys or not complete:
            successors[record.key] = record.successor
        else:
            problems.append(
                problem(
                    source,
                    ProblemKind.DANGLING_SUPERSEDED_BY,
                    f"superseded_by {record.successor!r} names no document of {source}; ignored",
                    key=record.key,
                )
            )
            log.debug("%s: %s dangles", source, doc_id)
    problems.extend(
        problem(source, ProblemKind.SUPERSESSION_CYCLE, message, key=key)
        for key, message in break_cycles(successors)
    )
    return tuple(
        SourceDocument(
            source=source,
            source_key=record.key,
            doc_id=f"{source}:{record.key}",
            content_hash=hashes[record.key],
            family=record.family,
            version=record.version,
            state=record.state,
            effective_from=record.effective_from,
            effective_to=record.effective_to,
            superseded_by=(
                f"{source}:{successors[record.key]}" if record.key in successors else None
            ),
            title=record.title,
            doc_class=record.doc_class,
        )
        for record in sorted(records, key=lambda r: r.key)
        if record.key in hashes
    )


def problem(
    source: str,
    kind: ProblemKind,
    message: str,
    *,
    key: str | None = None,
    path: str | None = None,
    field: str | None = None,
) -> SourceProblem:
    """A problem about one document (``key``) or about the scan (no key)."""
    log.debug("%s: %s %s: %s", source, kind.value, key or path, message)
    return SourceProblem(
        source=source,
        kind=kind,
        message=message,
        path=path,
        doc_id=f"{source}:{key}" if key is not None else None,
        source_key=key,
        field=field,
    )


def intake(
    source: str,
    raw: Mapping[str, Any],
    *,
    status_map: Mapping[str, VersionState],
    records: Mapping[str, Record],
    problems: list[SourceProblem],
    where: str,
    duplicate: str,
) -> tuple[bool, Record | None]:
    """Parse one listed document: (identity known?, the new record or None).

    A record whose identity cannot be read makes the scan partial (False); a repeated id is a
    problem and the first one is kept (True, None). The caller adds the new record's
    ``invalid`` messages with ``keep``.
    """
    try:
        record = record_from(raw, status_map=status_map)
    except RecordRefused as exc:
        problems.append(
            problem(
                source,
                ProblemKind.INVALID_FIELD,
                f"{exc}; ignored, and no absent document is taken as deleted this run",
                path=where,
            )
        )
        return False, None
    if record.key in records:
        problems.append(
            problem(
                source,
                ProblemKind.DUPLICATE_ID,
                f"id {record.key!r} {duplicate}; the first is kept",
                key=record.key,
                path=where,
            )
        )
        return True, None
    return True, record


def keep(
    source: str, record: Record, records: dict[str, Record], problems: list[SourceProblem]
) -> None:
    """Register a new record and report its invalid fields."""
    problems.extend(
        problem(source, ProblemKind.INVALID_FIELD, message, key=record.key, field=name)
        for name, message in record.invalid
    )
    records[record.key] = record


def _identity(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RecordRefused(f"id must be a string or an integer, got {shown(value)}")
    text = str(value).strip()
    if not text:
        raise RecordRefused("id is empty")
    return text


def _text(raw: Mapping[str, Any], key: str, invalid: list[tuple[str, str]]) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        invalid.append((key, f"{key} must be a string, got {shown(value)}; taken as absent"))
        return None
    return str(value).strip() or None


def _version(value: Any, invalid: list[tuple[str, str]]) -> int | None:
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, Decimal | float) and value == int(value):
        number = int(value)
    elif isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        number = int(value.strip())
    if number is None or number < 0:
        invalid.append(
            (
                "version",
                f"version must be a non-negative integer, got {shown(value)}; taken as absent",
            )
        )
        return None
    return number


def _status(
    value: Any, status_map: Mapping[str, VersionState], invalid: list[tuple[str, str]]
) -> VersionState | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        invalid.append(("state", f"status must be a string, got {shown(value)}; taken as absent"))
        return None
    text = str(value).strip()
    if not text:
        return None
    if text in status_map:
        return status_map[text]
    folded = {k.lower(): v for k, v in status_map.items()}
    if text.lower() in folded:
        return folded[text.lower()]
    try:
        return VersionState(text.lower())
    except ValueError:
        allowed = "|".join([*(s.value for s in VersionState), *status_map])
        invalid.append(("state", f"status must be one of {allowed}, got {text!r}; taken as absent"))
        return None


def _instant(raw: Mapping[str, Any], key: str, invalid: list[tuple[str, str]]) -> datetime | None:
    return read_date(raw.get(key), key, invalid)


def _hash(value: Any, invalid: list[tuple[str, str]]) -> str | None:
    if value is None or value == "":
        return None
    match = _HASH.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        invalid.append(
            (
                "content_hash",
                f"content_hash must be 'sha256:' and 64 hex digits, got {shown(value)}; "
                "the body is hashed instead",
            )
        )
        return None
    return "sha256:" + match.group(1).lower()


def shown(value: object) -> str:
    """A value's repr, at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- dates ---------------------------------------------------------------------------------


def parse_date(value: object, formats: Sequence[str] = ()) -> datetime:
    """A date or an instant as an aware UTC datetime; ValueError when it is neither.

    Accepts ``datetime`` (naive means UTC) and ``date`` values (a database column) and strings:
    ``YYYY-MM-DD`` (midnight UTC) or an RFC 3339 / ISO 8601 date-time (``Z`` allowed), else
    the first of ``formats`` (``strptime`` formats such as ``%d-%b-%Y``; naive means UTC) that
    reads the whole string.
    """
    try:
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if isinstance(value, date):
            return datetime(value.year, value.month, value.day, tzinfo=UTC)
    except OverflowError:
        raise DateOutOfRange(f"{shown(value)} lies outside the years 1-9999 in UTC") from None
    if isinstance(value, str) and value.strip():
        text = value.strip()
        for form in (None, *formats):
            try:
                if form is None:
                    if _DATE.fullmatch(text):
                        return datetime.fromisoformat(text).replace(tzinfo=UTC)
                    return parse_instant(text)
                parsed = datetime.strptime(text, form)
                return (
                    parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
                )
            except ValueError:
                continue
            except OverflowError:  # it reads, but its offset takes it past 9999 (or before 1)
                raise DateOutOfRange(
                    f"{shown(value)} lies outside the years 1-9999 in UTC"
                ) from None
    raise ValueError(f"not a date or an ISO 8601 date-time: {shown(value)}")


class DateOutOfRange(ValueError):
    """A date that reads as one, but lies outside what a UTC datetime can hold."""


def read_date(
    value: object,
    key: str,
    invalid: list[tuple[str, str]],
    *,
    field: str | None = None,
    formats: Sequence[str] = (),
) -> datetime | None:
    """``value`` (None: absent) as a date; None with an ``invalid`` entry when it is not one.

    ``key`` names the value in the message; ``field`` is the ``SourceDocument`` field it
    fills (default ``key``); ``formats`` are tried after ISO 8601 (``parse_date``).
    """
    if value is None:
        return None
    try:
        return parse_date(value, formats)
    except DateOutOfRange as exc:
        invalid.append((field or key, f"{key} {exc}; taken as absent"))
        return None
    except ValueError:
        accepted = "a date or an ISO 8601 date-time"
        if formats:
            accepted += " or in one of the formats " + ", ".join(repr(f) for f in formats)
        invalid.append(
            (field or key, f"{key} must be {accepted}, got {shown(value)}; taken as absent")
        )
        return None


# -- supersession --------------------------------------------------------------------------


#: How many members of a cycle its message names (a message per member: a cycle of 1,000
#: would otherwise write a million ids into one run's findings).
CYCLE_SHOWN = 6


def cycle_message(cycle: Sequence[str], what: str = "superseded_by") -> str:
    """``what`` forms a cycle: its length and at most ``CYCLE_SHOWN`` of its members."""
    shown = list(cycle) if len(cycle) <= CYCLE_SHOWN else [*cycle[:3], "…", *cycle[-2:]]
    chain = " -> ".join([*shown, cycle[0]])
    return f"{what} forms a cycle of {len(cycle)} ({chain}); ignored"


def break_cycles(successors: dict[str, str], what: str = "superseded_by") -> list[tuple[str, str]]:
    """Drop every link that is part of a cycle from ``successors``; (key, message) of each,
    each message of bounded length (``cycle_message``)."""
    dropped: list[tuple[str, str]] = []
    for cycle in cycles(successors):
        message = cycle_message(cycle, what)
        for key in cycle:
            del successors[key]
            dropped.append((key, message))
    return dropped


def cycles(successors: Mapping[str, str]) -> Iterator[list[str]]:
    """Yield every cycle of a graph where each node has at most one successor, in key order."""
    done: set[str] = set()
    for start in sorted(successors):
        trail: list[str] = []
        on_trail: set[str] = set()
        node: str | None = start
        while node is not None and node not in done and node not in on_trail:
            trail.append(node)
            on_trail.add(node)
            node = successors.get(node)
        if node is not None and node in on_trail:
            yield trail[trail.index(node) :]
        done.update(trail)
