"""The audit chain's entry body and head, for ``stores.audit``'s appends and walks: the
canonical text of an entry (composed from its parts' texts, so an append makes each before
and after canonical once and stores that text as it was hashed), its digest, and the head row
locked by one ``UPDATE … RETURNING``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from datetime import UTC, datetime
from itertools import chain
from typing import Any

try:  # (a faster encoder of the same text, where a value allows: ``_plain_texts``)
    import orjson
except ImportError:  # pragma: no cover - a dependency; the same text without it
    orjson = None  # type: ignore[assignment]

from sqlalchemy import Text, bindparam, cast, func, insert, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from reconciler.model import AuditEntry, AuditKind, encoder_of, jsonable, rfc3339
from reconciler.stores.sql.audit_protection import keyed_digest
from reconciler.stores.sql.bulk import bound, driver_connection
from reconciler.stores.sql.schema import AuditDocumentRow, AuditHeadRow, AuditRow, Base

GENESIS = "0" * 64


#: ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``'s
#: encoder, made once: ``json.dumps`` with any argument of its own builds a new
#: ``JSONEncoder`` every call (a declare of 100,000 proposals appends 300,000 entries).
_CANONICAL = encoder_of(json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False))
#: ``json.dumps(value, ensure_ascii=False)``'s (a string: the C function at once).
_TEXT = json.JSONEncoder(ensure_ascii=False).encode


def canonical_plain(plain: Any) -> str:
    """``canonical`` of a value already made plain (``jsonable``)."""
    return _CANONICAL(plain)


@functools.lru_cache(maxsize=4096)
def _string_text(value: str) -> str:
    return _TEXT(value)


def _field_text(value: Any) -> str:
    """``canonical_plain(jsonable(value))`` of one of an entry's small fields: a string's text
    remembered (a batch's entries share their run id, actor, reason, kind and instant)."""
    plain = jsonable(value)
    if type(plain) is str:
        return _string_text(plain)
    return canonical_plain(plain)


def at_text_of(at: datetime) -> str:
    """An entry's instant as its body holds it."""
    return _field_text(rfc3339(at))


def digest(prev_hash: str, body: str, key: bytes | None) -> str:
    if key is not None:
        return keyed_digest(key, f"{prev_hash}\n{body}")
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()


def entry_body(
    entry: AuditEntry, before_text: str, after_text: str, at_text: str | None = None
) -> str:
    """The canonical body ``_hash_of`` hashes, composed from its parts' canonical texts:
    ``json.dumps`` with sorted keys and the same separators is compositional, so this is
    byte for byte ``canonical_plain`` of the whole (the keys below are in sorted order).
    ``at_text``: ``at_text_of(entry.at)``, when a batch has it already."""
    if at_text is None:
        at_text = at_text_of(entry.at)
    return (
        f'{{"actor":{_field_text(entry.actor)}'
        f',"after":{after_text}'
        f',"at":{at_text}'
        f',"before":{before_text}'
        f',"reason":{_field_text(entry.reason)}'
        f',"run_id":{_field_text(entry.run_id)}'
        f',"target":{_field_text(entry.target)}'
        f',"target_type":{_field_text(entry.target_type)}}}'
    )


HEAD = Base.metadata.tables[AuditHeadRow.__tablename__]
LOG = Base.metadata.tables[AuditRow.__tablename__]
DOCUMENTS = Base.metadata.tables[AuditDocumentRow.__tablename__]


#: Kinds whose before and after are plain already (string keys; the values of ids, names,
#: hashes, counts and payloads as the writers hold them): encoded in C, the ``jsonable`` walk
#: only for a value ``json`` cannot encode (the same text either way).
_PLAIN_KINDS = frozenset(
    {AuditKind.PAYLOAD_PAGE, AuditKind.MOVE, AuditKind.MOVE_COPIED, AuditKind.MOVE_DONE,
     AuditKind.CONFIRM}
)  # fmt: skip


def texts_of(entry: AuditEntry) -> tuple[str, str]:
    """The canonical texts of an entry's before and after (``canonical_plain(jsonable(…))``).
    A page of payload intents (``AuditKind.PAYLOAD_PAGE``: string keys, values as the index
    and the planner hold them), a move's entries and a confirmation (``_PLAIN_KINDS``) are
    encoded as they are, in C, without the ``jsonable`` walk, unless one holds a value JSON
    cannot encode (then the walk, as any entry). Any entry's values, once made plain, go to
    ``orjson`` when they allow (``_plain_texts``)."""
    if entry.target_type in _PLAIN_KINDS:
        texts = _plain_texts(entry.before, entry.after)
        if texts is not None:
            return texts
        if _plain([entry.before, entry.after], _JSON_TYPES, keys=True):
            try:
                return canonical_plain(entry.before), canonical_plain(entry.after)
            except (TypeError, ValueError):
                pass
    # (made plain, a row's before and after are dicts of strings, integers, booleans and
    # None: ``orjson``'s, as a page's; a declaration's score, a float, is ``json``'s)
    before, after = jsonable(entry.before), jsonable(entry.after)
    texts = _plain_texts(before, after)
    if texts is not None:
        return texts
    return canonical_plain(before), canonical_plain(after)


#: The types ``orjson`` encodes as ``canonical_plain`` does, byte for byte (``_plain_texts``).
_PLAIN_TYPES = frozenset({dict, list, str, int, bool, type(None)})
#: The types ``json`` encodes as ``canonical_plain(jsonable(…))`` does when the walk is
#: skipped: ``_PLAIN_TYPES`` and floats (a dict's key must still be a string, which ``_plain``
#: checks: ``json`` writes a ``None`` key as "null" where the walk writes "None").
_JSON_TYPES = _PLAIN_TYPES | {float}
#: Levels ``_plain`` looks down before it gives up (``orjson`` itself stops at 254).
_PLAIN_DEPTH = 32
_STR = frozenset({str})
_IS_DICT = dict.__instancecheck__
_IS_LIST = list.__instancecheck__


def _plain_texts(before: Any, after: Any) -> tuple[str, str] | None:
    """``canonical_plain`` of ``before`` and ``after`` by ``orjson`` (a tenth of the C
    encoder's time on a page of intents: issue 38, repair round 6), when they hold only
    values it spells alike: dicts, lists, strings, integers, booleans and ``None``, of
    exactly those types (no float: the two spell exponents otherwise; no subclass, enum,
    date or UUID, which ``orjson`` encodes itself). Its sorted keys are ``sort_keys``' order
    (code points), its escapes ``json``'s with ``ensure_ascii=False``. ``None`` (the caller
    encodes them with ``json``) for anything else, and where ``orjson`` refuses a value (an
    integer past 64 bits, a lone surrogate, a key that is not a string)."""
    if orjson is None or not _plain([before, after], _PLAIN_TYPES):
        return None
    try:
        return (
            orjson.dumps(before, option=orjson.OPT_SORT_KEYS).decode(),
            orjson.dumps(after, option=orjson.OPT_SORT_KEYS).decode(),
        )
    except TypeError:  # (orjson.JSONEncodeError is one)
        return None


def _plain(values: list[Any], allowed: frozenset[object], *, keys: bool = False) -> bool:
    """Whether ``values``, and everything in them at any depth, are of the ``allowed`` types
    exactly (``keys``: and every dict's keys strings; ``orjson`` refuses any other key
    itself): a level at a time, each pass in C."""
    for _level in range(_PLAIN_DEPTH):
        if not values:
            return True
        types = set(map(type, values))
        if not types <= allowed:
            return False
        nested: list[Any] = []
        if dict in types:
            dicts = list(filter(_IS_DICT, values))
            if keys and not set(map(type, chain.from_iterable(dicts))) <= _STR:
                return False
            nested += chain.from_iterable(map(dict.values, dicts))
        if list in types:
            nested += chain.from_iterable(filter(_IS_LIST, values))
        values = nested
    return False  # (deeper than any entry's: json's own checks, circular references too)


#: The head's move at the end of an append (one statement, built once).
MOVE_HEAD = (
    update(HEAD)
    .where(HEAD.c.id == 1)
    .values(entry_hash=bindparam("new_hash"), entries=bindparam("new_count"))
)
#: ``_LOCK`` and ``MOVE_HEAD`` as SQLite's driver takes them.
_LOCK_SQL = "UPDATE audit_head SET updated_at = ? WHERE id = 1 RETURNING entry_hash, entries"
_MOVE_SQL = "UPDATE audit_head SET entry_hash = ?, entries = ? WHERE id = 1"


def move_head(session: Session, head: str, entries: int) -> None:
    """The head moved to ``head`` after ``entries`` entries (in the caller's transaction)."""
    connection = driver_connection(session)
    if connection is None:
        session.execute(MOVE_HEAD, {"new_hash": head, "new_count": entries})
    else:
        connection.exec_driver_sql(_MOVE_SQL, (head, entries))


_LOCK = (
    update(HEAD)
    .where(HEAD.c.id == 1)
    .values(updated_at=bindparam("locked_at"))
    .returning(HEAD.c.entry_hash, HEAD.c.entries)
)


@functools.cache
def _insert(postgresql: bool) -> Any:
    text = {name: bindparam(name, type_=Text) for name in ("before_text", "after_text")}
    stored = {k: cast(v, JSONB) if postgresql else v for k, v in text.items()}
    return insert(LOG).values(before=stored["before_text"], after=stored["after_text"])


def insert_statement(session: Session) -> Any:
    """The log's insert (built once a dialect): before and after bound as their canonical
    texts and stored as they are, with no second serialisation by the column type (text on
    SQLite, cast to JSONB on PostgreSQL)."""
    return _insert(session.get_bind().dialect.name == "postgresql")


def lock_head(session: Session) -> tuple[str, int]:
    """Take the chain's head for this transaction: one appender at a time, on every dialect;
    its hash and entry count.

    The first statement is a write to the head row (one ``UPDATE … RETURNING``): PostgreSQL
    holds that row's lock until the transaction ends, SQLite takes its single write lock
    (waiting out its busy timeout), so a second appender reads the head only after the first
    one has committed.
    """
    at = datetime.now(UTC)
    connection = driver_connection(session)
    if connection is None:
        head = session.execute(_LOCK, {"locked_at": at}).first()
    else:  # (the same statement straight to SQLite's driver: bulk.py)
        locked_at = bound(connection, HEAD.c.updated_at, at)
        head = connection.exec_driver_sql(_LOCK_SQL, (locked_at,)).first()
    if head is not None:
        return head[0], head[1]
    # Lost (deleted by hand): rebuilt from the log.
    last = session.scalar(select(LOG.c.entry_hash).order_by(LOG.c.seq.desc()).limit(1))
    count = session.scalar(select(func.count()).select_from(LOG)) or 0
    session.execute(
        insert(HEAD).values(id=1, entry_hash=last or GENESIS, entries=count, updated_at=at)
    )
    return last or GENESIS, count
