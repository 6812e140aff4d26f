"""The audit chain: one chain however many processes append, and ``verify`` that names what is
wrong (an entry altered or unreadable, an end cut off with or without its runs) instead of
raising. Real SQLite files and the real PostgreSQL, real processes."""

from __future__ import annotations

import enum
import hashlib
import multiprocessing
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from reconciler.model import VersionState, jsonable, rfc3339
from reconciler.stores.sql import SqlDocumentTable, audit
from reconciler.stores.sql.schema import AuditRow

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)


def entries(run: str, n: int) -> list[audit.AuditEntry]:
    return [
        audit.AuditEntry(
            run_id=run,
            at=AT,
            actor="cli",
            reason="test",
            target_type="row",
            target=f"h:doc-{i}",
            before={"version_state": "current"},
            after={"version_state": "superseded"},
        )
        for i in range(n)
    ]


def _appender(url: str, name: str, batches: int) -> None:
    table = SqlDocumentTable.from_url(url)
    try:
        for b in range(batches):
            table.append_audit(entries(f"{name}-{b}", 3))
    finally:
        table.close()


def test_parallel_appenders_extend_one_chain(table: SqlDocumentTable, table_url: str) -> None:
    """Four processes append 25 batches each at once: one unbroken chain of 300 entries."""
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_appender, args=(table_url, f"w{i}", 25)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    result = audit.verify(table.engine)
    assert result.problems == []
    assert result.entries == 300


def test_two_entries_can_never_follow_one_predecessor(table: SqlDocumentTable) -> None:
    table.append_audit(entries("r1", 1))
    with Session(table.engine) as session:
        first = session.scalars(select(AuditRow).order_by(AuditRow.seq).limit(1)).one()
        session.add(
            AuditRow(
                run_id="forged",
                at=AT,
                actor="cli",
                reason=None,
                target_type="row",
                target="h:x",
                before=None,
                after=None,
                prev_hash=first.prev_hash,
                entry_hash="f" * 64,
            )
        )
        with pytest.raises(IntegrityError):
            session.commit()


def test_verify_catches_a_removed_trailing_run(table: SqlDocumentTable) -> None:
    """The last run's entries and its run record removed together: the chain alone still
    links, but its head record no longer matches."""
    for run in ("r1", "r2"):
        run_id = table.start_run(mode="apply", actor="cli", run_id=run)
        head = table.append_audit(entries(run_id, 2))
        table.finish_run(run_id, status="succeeded", counts={"audit_head": head})
    assert audit.verify(table.engine).ok
    with table.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_log WHERE run_id = 'r2'"))
        conn.execute(text("DELETE FROM runs WHERE run_id = 'r2'"))
    result = audit.verify(table.engine)
    assert not result.ok
    assert any("removed from the end" in p for p in result.problems), result.problems
    # An append after the cut does not hide it either.
    table.append_audit(entries("r3", 1))
    assert any("removed from the end" in p for p in audit.verify(table.engine).problems)


def test_verify_names_an_unreadable_entry(sqlite_url: str) -> None:
    """JSON that does not parse, a time that does not parse: named by seq, the walk goes on."""
    table = SqlDocumentTable.from_url(sqlite_url)
    table.ensure_schema(create=True)
    try:
        table.append_audit(entries("r1", 4))
        with table.engine.begin() as conn:
            conn.execute(text("UPDATE audit_log SET after = '{not json' WHERE seq = 2"))
            conn.execute(text("UPDATE audit_log SET at = 'yesterday' WHERE seq = 3"))
        result = audit.verify(table.engine)
        assert result.entries == 4
        assert [p.split(":")[0] for p in result.problems] == ["entry 2", "entry 3"]
        assert "not JSON" in result.problems[0]
        assert all("cannot be read" in p for p in result.problems)
    finally:
        table.close()


_PLAIN = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.text(max_size=8),
        st.datetimes(timezones=st.just(UTC)),
        st.sampled_from(list(VersionState)),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(max_size=10),
    st.one_of(st.none(), st.text(max_size=10)),
    st.sampled_from(["intent", "payload", "table"]),
    _PLAIN,
    _PLAIN,
)
def test_an_entry_hash_is_sha256_of_the_previous_and_the_canonical_body(
    run_id: str, reason: str | None, target_type: str, before: object, after: object
) -> None:
    """The chain's hash, however an append computes it: sha256 over the previous hash and the
    canonical JSON of the entry's content (what ``verify`` recomputes from the stored rows)."""
    at = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    entry = audit.AuditEntry(run_id, at, "cli", reason, target_type, "doc", before, after)
    body = audit.canonical(
        {
            "run_id": run_id,
            "at": "2026-12-01T23:00:00Z",
            "actor": "cli",
            "reason": reason,
            "target_type": target_type,
            "target": "doc",
            "before": before,
            "after": after,
        }
    )
    expected = hashlib.sha256(f"{'0' * 64}\n{body}".encode()).hexdigest()

    assert audit.entry_hash_of("0" * 64, entry) == expected
    plain = jsonable(before), jsonable(after)
    assert audit._hash_of("0" * 64, entry, *plain) == expected
    # An append composes the body from the canonical texts it stores: the same bytes.
    texts = audit._canonical_plain(plain[0]), audit._canonical_plain(plain[1])
    assert audit._entry_body(entry, *texts) == body


class _Level(enum.IntEnum):
    LOW = 1


class _Word(str):
    pass


def _jsonable_as_specified(value: object) -> object:
    """``jsonable`` as its docstring defines it, without the fast paths."""
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable_as_specified(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable_as_specified(v) for v in value]
    return value


_ODD = st.recursive(
    st.one_of(
        _PLAIN,
        st.floats(allow_nan=False),
        st.just(_Level.LOW),
        st.text(max_size=4).map(_Word),
        st.frozensets(st.integers(), max_size=3),
    ),
    lambda inner: st.one_of(
        st.dictionaries(
            st.one_of(st.integers(), st.text(max_size=3).map(_Word)), inner, max_size=3
        ),
        st.lists(inner, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=examples(300), deadline=None)
@given(_ODD)
def test_jsonable_fast_paths_give_what_its_definition_gives(value: object) -> None:
    made = jsonable(value)
    assert made == _jsonable_as_specified(value)
    assert repr(made) == repr(_jsonable_as_specified(value))  # types too (1 and True, _Word)
