"""SQLite inserts and updates straight through the driver (``reconciler.stores.sql.bulk``)
store what Core's ``executemany`` stores, value for value (each through its column's bind
processor), on a real SQLite file; another dialect, or a default to fill in, is left to Core."""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from sqlalchemy import bindparam, create_engine, insert, update
from sqlalchemy.orm import Session

from reconciler.stores.sql.bulk import _MANY_ROWS, insert_through_driver, update_through_driver
from reconciler.stores.sql.schema import (
    AuditRow,
    Base,
    DeclarationRow,
    DocumentRow,
    FindingRow,
    RunRow,
)

AT = datetime(2026, 12, 5, 1, 2, 3, tzinfo=UTC)
FINDINGS = Base.metadata.tables[FindingRow.__tablename__]
DECLARATIONS = Base.metadata.tables[DeclarationRow.__tablename__]
AUDIT = Base.metadata.tables[AuditRow.__tablename__]
DOCUMENTS = Base.metadata.tables[DocumentRow.__tablename__]


def finding(n: int, expected: object) -> dict[str, object]:
    return {
        "run_id": "r1",
        "outstanding": n % 2 == 0,
        "check": "family",
        "kind": "successor_not_marked",
        "severity": "critical",
        "family": None if n == 3 else f"f-{n}",
        "doc_id": f"d:{n}\x00é",
        "expected": expected,
        "actual": {"version_state": "current", "n": n, "on": True},
        "action": "mark superseded",
    }


def declaration(n: int, at: datetime) -> dict[str, object]:
    return {
        "id": f"d-{n}",
        "kind": "supersede",
        "doc_id": f"a:{n}",
        "target": f"b:{n}",
        "declared_by": "me",
        "declared_at": at,
        "reason": None,
        "evidence": "titles alike",
        "score": 0.86 if n else None,
        "proposal": None,
        "run_id": "r1",
        "revoked_at": None if n else at,
        "revoked_by": None,
    }


def stored(path: Path, table: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()


def both_ways(tmp_path: Path, rows_of: dict[str, list[dict[str, object]]]) -> None:
    """Each table's rows written once by Core and once through the driver: the same rows."""
    files = {}
    for way in ("core", "driver"):
        path = tmp_path / f"{way}.db"
        engine = create_engine(f"sqlite:///{path}")
        Base.metadata.create_all(engine)
        with Session(engine) as session, session.begin():
            session.execute(
                insert(RunRow.__table__).values(
                    run_id="r1", mode="apply", actor="a", status="running", started_at=AT
                )
            )
            for name, rows in rows_of.items():
                table = Base.metadata.tables[name]
                if way == "core":
                    session.execute(insert(table), rows)
                else:
                    assert insert_through_driver(session, table, rows)
        engine.dispose()
        files[way] = path
    for name in rows_of:
        assert stored(files["driver"], name) == stored(files["core"], name)


def test_the_same_rows_as_core(tmp_path: Path) -> None:
    expected: list[object] = [None, {"a": [1, 2.5, None]}, True, 1, "text", [], 0.1]
    other = timezone(timedelta(hours=2))
    both_ways(
        tmp_path,
        {
            FINDINGS.name: [finding(n, e) for n, e in enumerate(expected)],
            DECLARATIONS.name: [
                declaration(n, at)
                for n, at in enumerate([AT, AT, AT.astimezone(other), AT.replace(microsecond=7)])
            ],
        },
    )


def test_a_text_bound_as_it_is(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'a.db'}")
    Base.metadata.create_all(engine)
    row = {
        "run_id": "r1",
        "at": AT,
        "actor": "declare",
        "reason": None,
        "target_type": "row",
        "target": "a:1",
        "before_text": '{"b":1,"a":null}',
        "after_text": "null",
        "prev_hash": "0" * 64,
        "entry_hash": "1" * 64,
    }
    with Session(engine) as session, session.begin():
        as_is = {"before_text": "before", "after_text": "after"}
        assert insert_through_driver(session, AUDIT, [row], as_is=as_is)
    engine.dispose()
    (values,) = stored(tmp_path / "a.db", AUDIT.name)
    assert values[1:] == (
        "r1", "2026-12-05 01:02:03.000000", "declare", None, "row", "a:1",
        '{"b":1,"a":null}', "null", "0" * 64, "1" * 64,
    )  # fmt: skip


def test_a_default_to_fill_in_is_cores(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'a.db'}")
    Base.metadata.create_all(engine)
    row = finding(1, None)
    del row["outstanding"]  # (a column with a default Core fills in)
    with Session(engine) as session, session.begin():
        assert not insert_through_driver(session, FINDINGS, [row])
    engine.dispose()


def test_many_rows_widen_the_page_cache_for_their_insert_only(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'a.db'}")
    Base.metadata.create_all(engine)
    sizes = []
    with Session(engine) as session, session.begin():
        connection = session.connection()
        connection.exec_driver_sql("PRAGMA cache_size=-3000")
        cursors = connection.connection.driver_connection
        cursors.set_trace_callback(lambda sql: sizes.append(sql) if "cache_size" in sql else None)
        rows = [declaration(n, AT) for n in range(_MANY_ROWS)]
        assert insert_through_driver(session, DECLARATIONS, rows)
        assert insert_through_driver(session, DECLARATIONS, [declaration(-1, AT)])
        cursors.set_trace_callback(None)
        assert connection.exec_driver_sql("PRAGMA cache_size").scalar_one() == -3000
    engine.dispose()
    assert sizes == [
        "PRAGMA cache_size",
        f"PRAGMA cache_size=-{256 * 1024}",
        "PRAGMA cache_size=-3000",
    ]  # (widened around the many rows' insert, not the one row's; set back)
    assert len(stored(tmp_path / "a.db", DECLARATIONS.name)) == _MANY_ROWS + 1


_SETS = st.fixed_dictionaries(
    {},
    optional={
        "version_state": st.sampled_from(["current", "superseded", "retired"]),
        "superseded_by": st.sampled_from([None, "a:1", "a:é\x00"]),
        "effective_to": st.sampled_from([AT, AT.astimezone(timezone(timedelta(hours=-3)))]),
        "effective_from": st.sampled_from([None, AT.replace(microsecond=7)]),
        "quarantined": st.booleans(),
        "chunk_count": st.integers(0, 3),
    },
).filter(bool)


@settings(max_examples=examples(20), deadline=None)
@given(sets=_SETS, ids=st.lists(st.integers(0, 4), min_size=1, max_size=6, unique=True))
def test_updates_the_same_rows_as_core(sets: dict[str, object], ids: list[int]) -> None:
    """``update_through_driver`` leaves the rows as Core's ``update … where doc_id = :key``
    executed with the same parameter sets leaves them (an id with no row changes nothing)."""
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for way in ("core", "driver"):
            path = Path(folder) / f"{way}.db"
            engine = create_engine(f"sqlite:///{path}")
            Base.metadata.create_all(engine)
            page = [{**sets, "updated_at": AT, "key": f"a:{n}"} for n in ids]
            with Session(engine) as session, session.begin():
                session.execute(insert(DOCUMENTS), [document_row(n) for n in range(4)])
                if way == "core":
                    by_key = DOCUMENTS.c.doc_id == bindparam("key")
                    session.execute(update(DOCUMENTS).where(by_key), page)
                else:
                    assert update_through_driver(session, DOCUMENTS, "doc_id", "key", page)
            engine.dispose()
            files[way] = path
        assert stored(files["driver"], DOCUMENTS.name) == stored(files["core"], DOCUMENTS.name)


def document_row(n: int) -> dict[str, object]:
    return {
        "doc_id": f"a:{n}",
        "source": "a",
        "source_key": str(n),
        "doc_family_id": f"a:{n}",
        "doc_version": 1,
        "version_state": "current",
        "effective_to": AT + timedelta(days=n),
        "updated_at": AT,
    }
