"""The sql document-control connector on real SQLite and PostgreSQL databases: the contract,
the column mapping, the status map, the filter, streaming, and every way a table breaks."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import (
    Column,
    Date,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import Engine

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.sql import SqlTableSource
from connectors.testing import SystemOfRecordContract
from reconciler.errors import ConfigError
from reconciler.model import ProblemKind, SourceSnapshot, VersionState
from reconciler.settings import load_settings

#: The DMS's own column names, mapped to the logical fields.
COLUMNS = {
    "id": "doc_no",
    "family": "series",
    "version": "rev",
    "status": "state_code",
    "effective_from": "valid_from",
    "effective_to": "valid_until",
    "superseded_by": "replaced_by",
    "title": "heading",
    "body": "text_body",
}
STATUS_MAP = {"A": "current", "S": "superseded", "W": "retired", "D": "draft"}


def sha(body: str) -> str:
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def dms_table(metadata: MetaData, *, with_hash: bool = False, name: str = "dms_docs") -> Table:
    columns: list[Column[Any]] = [
        Column("doc_no", Integer, primary_key=True, autoincrement=False),
        Column("series", String(50)),
        Column("rev", Integer),
        Column("state_code", String(20)),
        Column("valid_from", Date),
        Column("valid_until", DateTime(timezone=True)),
        Column("replaced_by", Integer),
        Column("heading", String(200)),
        Column("doc_class", String(50)),  # mapped by its logical name, no entry needed
        Column("library", String(20)),
        Column("text_body", Text),
    ]
    if with_hash:
        columns.append(Column("checksum", String(80)))
    return Table(name, metadata, *columns)


ROWS: list[dict[str, Any]] = [
    {
        "doc_no": 101,
        "series": "leave",
        "rev": 1,
        "state_code": "S",
        "valid_from": date(2023, 1, 1),
        "replaced_by": 102,
        "heading": "Leave 2023",
        "library": "hr",
        "text_body": "# Leave\n\n25 days.",
    },
    {
        "doc_no": 102,
        "series": "leave",
        "rev": 2,
        "state_code": "A",
        "valid_from": date(2024, 1, 1),
        "heading": "Leave 2024",
        "doc_class": "policy",
        "library": "hr",
        "text_body": "# Leave\n\n27 days.",
    },
    {
        "doc_no": 201,
        "series": "security",
        "rev": 1,
        "state_code": "W",
        "valid_until": datetime(2024, 6, 30, 12, 0, tzinfo=UTC),
        "library": "it",
        "text_body": "# Security\n\nRotate keys. Ünïcödé.",
    },
    {
        "doc_no": 301,
        "state_code": "D",
        "library": "drafts",
        "text_body": "# Draft\n\nNot yet.",
    },
]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both dialects: every test of this module runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'dms.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


class Dms:
    """The document-control database a test works on."""

    def __init__(self, url: str, *, with_hash: bool = False) -> None:
        self.url = url
        self.engine = create_engine(url)
        self.metadata = MetaData()
        self.table = dms_table(self.metadata, with_hash=with_hash)
        self.metadata.create_all(self.engine)

    def insert(self, *rows: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                self.table.insert(), [{**dict.fromkeys(self.table.c.keys()), **r} for r in rows]
            )

    def update(self, doc_no: int, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(self.table.update().where(self.table.c.doc_no == doc_no).values(**values))

    def source(self, **kwargs: Any) -> SqlTableSource:
        kwargs.setdefault("columns", COLUMNS)
        kwargs.setdefault("status_map", STATUS_MAP)
        return SqlTableSource("dms", url=self.url, table="dms_docs", **kwargs)


@pytest.fixture
def dms(db_url: str) -> Iterator[Dms]:
    db = Dms(db_url)
    db.insert(*ROWS)
    yield db
    db.engine.dispose()


def docs(snapshot: SourceSnapshot) -> dict[str, Any]:
    return {d.source_key: d for d in snapshot.documents}


def problems_of(snapshot: SourceSnapshot) -> list[tuple[ProblemKind, str | None]]:
    return [(p.kind, p.doc_id) for p in snapshot.problems]


# -- the contract, on both dialects ------------------------------------------------------------


class TestSqlContract(SystemOfRecordContract):
    @pytest.fixture
    def source(self, dms: Dms) -> SqlTableSource:
        return dms.source()

    @pytest.fixture
    def unavailable_source(self, db_url: str, tmp_path: Path) -> SqlTableSource:
        if db_url.startswith("sqlite"):
            url = f"sqlite:///{tmp_path / 'no-such-folder' / 'dms.db'}"
        else:
            url = "postgresql+psycopg://postgres@127.0.0.1:1/nothing?connect_timeout=2"
        return SqlTableSource("dms", url=url, table="dms_docs", columns=COLUMNS)


class TestSqlContractWithHashColumn(SystemOfRecordContract):
    @pytest.fixture
    def source(self, db_url: str) -> Iterator[SqlTableSource]:
        db = Dms(db_url, with_hash=True)
        db.insert(*({**r, "checksum": sha(r["text_body"])} for r in ROWS))
        yield db.source(columns={**COLUMNS, "content_hash": "checksum"})
        db.engine.dispose()

    @pytest.fixture
    def unavailable_source(self, tmp_path: Path) -> SqlTableSource:
        return SqlTableSource(
            "dms", url=f"sqlite:///{tmp_path / 'nope' / 'x.db'}", table="dms_docs"
        )


# -- mapping -----------------------------------------------------------------------------------


def test_columns_are_mapped_to_logical_fields(dms: Dms) -> None:
    snapshot = dms.source().scan()
    assert snapshot.complete
    assert snapshot.problems == ()
    found = docs(snapshot)
    assert sorted(found) == ["101", "102", "201", "301"]  # integer ids become keys
    old, new = found["101"], found["102"]
    assert (old.doc_id, old.family, old.version, old.state) == (
        "dms:101",
        "leave",
        1,
        VersionState.SUPERSEDED,
    )
    assert old.superseded_by == "dms:102"
    assert old.effective_from == datetime(2023, 1, 1, tzinfo=UTC)  # a DATE is midnight UTC
    assert old.title == "Leave 2023"
    assert new.doc_class == "policy"  # the unmapped logical field found its same-named column
    assert found["201"].state is VersionState.RETIRED
    assert found["201"].effective_to == datetime(2024, 6, 30, 12, 0, tzinfo=UTC)
    assert found["301"].state is VersionState.DRAFT
    assert found["102"].content_hash == sha("# Leave\n\n27 days.")


def test_status_map_and_unknown_status(dms: Dms) -> None:
    dms.update(201, state_code="X")
    dms.update(301, state_code="current")  # a state's own name needs no mapping
    snapshot = dms.source().scan()
    found = docs(snapshot)
    assert found["201"].state is None
    assert found["301"].state is VersionState.CURRENT
    [problem] = snapshot.problems
    assert (problem.kind, problem.doc_id) == (ProblemKind.INVALID_FIELD, "dms:201")
    assert "'X'" in problem.message


def test_filter_is_a_mapping_of_bound_values(dms: Dms) -> None:
    only_hr = dms.source(filters={"library": "hr"}).scan()
    assert sorted(docs(only_hr)) == ["101", "102"]
    some = dms.source(filters={"library": ["it", "drafts"]}).scan()
    assert sorted(docs(some)) == ["201", "301"]
    # A value is a value, never SQL.
    hostile = dms.source(filters={"library": "hr' OR '1'='1"})
    assert hostile.scan().documents == ()
    with pytest.raises(DocumentUnreadable):
        dms.source(filters={"library": "hr"}).read_body("201")  # outside the filter


def test_a_hash_column_is_trusted_and_bodies_are_not_streamed(db_url: str) -> None:
    db = Dms(db_url, with_hash=True)
    db.insert(*({**r, "checksum": sha(r["text_body"])} for r in ROWS))
    db.update(102, checksum="SHA256:" + "AB" * 32)  # case and prefix are normalised
    db.update(201, checksum="md5:abc")  # invalid: its body is hashed instead
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        snapshot = db.source(columns={**COLUMNS, "content_hash": "checksum"}).scan()
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
        db.engine.dispose()
    found = docs(snapshot)
    assert found["102"].content_hash == "sha256:" + "ab" * 32
    assert found["201"].content_hash == sha(ROWS[2]["text_body"])
    assert problems_of(snapshot) == [(ProblemKind.INVALID_FIELD, "dms:201")]
    [streamed] = [s for s in statements if "ORDER BY dms_docs.doc_no" in s]
    assert "text_body" not in streamed


def test_unusable_rows_are_problems(dms: Dms) -> None:
    dms.update(301, text_body=None)
    dms.update(201, rev=-3, valid_from=None, replaced_by=201)
    dms.update(102, replaced_by=999)
    snapshot = dms.source().scan()
    assert snapshot.complete
    assert sorted(problems_of(snapshot)) == sorted(
        [
            (ProblemKind.UNREADABLE, "dms:301"),  # NULL body: no hash, not yielded
            (ProblemKind.INVALID_FIELD, "dms:201"),  # negative version
            (ProblemKind.SELF_SUPERSESSION, "dms:201"),
            (ProblemKind.DANGLING_SUPERSEDED_BY, "dms:102"),
        ]
    )
    assert sorted(docs(snapshot)) == ["101", "102", "201"]
    assert docs(snapshot)["201"].version is None
    with pytest.raises(DocumentUnreadable, match="NULL"):
        dms.source().read_body("301")


def test_text_ids_and_duplicate_ids(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dms.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE docs (id TEXT, status TEXT, body BLOB)"))
        conn.execute(
            text("INSERT INTO docs VALUES (:i, :s, :b)"),
            [
                {"i": "HR-1", "s": "current", "b": b"Leave."},
                {"i": "HR-1", "s": "draft", "b": b"Again."},
                {"i": "HR-2", "s": "current", "b": b"caf\xe9"},
                {"i": None, "s": "current", "b": b"who?"},
            ],
        )
    engine.dispose()
    src = SqlTableSource("kb", url=url, table="docs")  # every field by its logical name
    snapshot = src.scan()
    assert [d.source_key for d in snapshot.documents] == ["HR-1"]
    assert snapshot.documents[0].content_hash == sha("Leave.")
    assert sorted(problems_of(snapshot), key=str) == sorted(
        [
            (ProblemKind.INVALID_FIELD, None),  # no id: the scan is not complete
            (ProblemKind.DUPLICATE_ID, "kb:HR-1"),
            (ProblemKind.UNDECODABLE, "kb:HR-2"),
        ],
        key=str,
    )
    assert not snapshot.complete
    with pytest.raises(DocumentUnreadable, match="several rows"):
        src.read_body("HR-1")


def test_which_of_two_rows_with_one_id_is_kept_does_not_follow_the_physical_order(
    pg_url: str,
) -> None:
    """Rows come ordered by id, and PostgreSQL returns rows of one id in whatever order its
    heap holds them: an UPDATE that changes nothing moves the row it touches to the end. The
    row kept was the first returned, so it flipped with each such write, and with it the
    document's state and hash (a run retired and quarantined it, the next brought it back)."""
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE docs (id TEXT, status TEXT, body TEXT)"))
        conn.execute(
            text(
                "INSERT INTO docs VALUES ('HR-1', 'retired', 'Withdrawn.'), "
                "('HR-1', 'current', 'Leave.'), ('HR-2', 'current', 'Sick leave.')"
            )
        )
    src = SqlTableSource("kb", url=pg_url, table="docs")
    kept = []
    try:
        for _ in range(3):
            snapshot = src.scan()
            assert (ProblemKind.DUPLICATE_ID, "kb:HR-1") in problems_of(snapshot)
            [doc] = [d for d in snapshot.documents if d.source_key == "HR-1"]
            kept.append((doc.state, doc.content_hash))
            with engine.begin() as conn:  # rewrite the row returned first, as it is
                conn.execute(
                    text(
                        "UPDATE docs SET body = body WHERE ctid = "
                        "(SELECT min(ctid) FROM docs WHERE id = 'HR-1')"
                    )
                )
    finally:
        engine.dispose()
    assert kept == [(VersionState.CURRENT, sha("Leave."))] * 3


def test_streams_rows_in_batches(db_url: str) -> None:
    db = Dms(db_url)
    db.insert(
        *(
            {"doc_no": n, "series": f"f{n}", "rev": 1, "state_code": "A", "text_body": f"B{n}"}
            for n in range(1, 1201)
        )
    )
    executions: list[tuple[Any, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: Any) -> None:
        if "ORDER BY dms_docs.doc_no" in statement:
            executions.append((context.execution_options.get("yield_per"), cursor))

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        snapshot = db.source(batch_size=100).scan()
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
        db.engine.dispose()
    assert len(snapshot.documents) == 1200
    [(yield_per, cursor)] = executions
    assert yield_per == 100
    if db_url.startswith("postgresql"):
        assert type(cursor).__name__ == "ServerCursor"  # rows stay on the server


# -- failures ----------------------------------------------------------------------------------


def test_a_connection_lost_mid_stream_gives_a_partial_snapshot(tmp_path: Path) -> None:
    """SQLite only: a view calls a function that fails on the 150th row, as a dropped link would."""
    url = f"sqlite:///{tmp_path / 'dms.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT, status TEXT)"))
        conn.execute(
            text("INSERT INTO t VALUES (:i, :b, 'current')"),
            [{"i": n, "b": f"B{n}"} for n in range(1, 301)],
        )
        conn.execute(text("CREATE VIEW v AS SELECT id, boom(id) AS body, status FROM t"))
    engine.dispose()

    def boom(n: int) -> str:
        if n >= 150:
            raise ValueError("link down")
        return f"B{n}"

    def register(dbapi_conn: sqlite3.Connection, record: Any) -> None:
        dbapi_conn.create_function("boom", 1, boom)

    event.listen(Engine, "connect", register)
    try:
        snapshot = SqlTableSource("kb", url=url, table="v", batch_size=20).scan()
        boom_first = SqlTableSource("kb", url=url, table="v", filters={"id": [150, 151]})
        with pytest.raises(SourceUnavailable, match="user-defined function"):
            boom_first.scan()
    finally:
        event.remove(Engine, "connect", register)
    assert not snapshot.complete
    assert 0 < len(snapshot.documents) < 150
    [problem] = snapshot.problems
    assert problem.kind is ProblemKind.UNREADABLE
    assert "stopped part-way" in problem.message


def test_unreachable_database_is_unavailable_and_bad_mappings_are_config_errors(
    dms: Dms, tmp_path: Path
) -> None:
    with pytest.raises(ConnectorConfigError, match=r"lacks .*title -> 'caption'.*columns are"):
        dms.source(columns={**COLUMNS, "title": "caption"}).scan()
    with pytest.raises(ConnectorConfigError, match="filter column 'shelf'"):
        dms.source(filters={"shelf": "a"}).scan()
    with pytest.raises(ConnectorConfigError, match="does not exist"):
        SqlTableSource("dms", url=dms.url, table="nope", columns=COLUMNS).scan()
    with pytest.raises(ConnectorConfigError, match="no column 'id'"):
        SqlTableSource("dms", url=dms.url, table="dms_docs").scan()


def test_url_from_the_environment(dms: Dms, monkeypatch: pytest.MonkeyPatch) -> None:
    src = SqlTableSource("dms", url_env="DMS_DATABASE_URL", table="dms_docs", columns=COLUMNS)
    with pytest.raises(ConnectorConfigError, match="DMS_DATABASE_URL"):
        src.scan()
    monkeypatch.setenv("DMS_DATABASE_URL", dms.url)
    assert len(src.scan().documents) == 4
    assert "DMS_DATABASE_URL" in repr(src)


def test_config_problems_are_listed_at_load_time(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.toml"
    config.write_text(
        "[[sources]]\n"
        'name = "dms"\n'
        'type = "sql"\n'
        'url = "postgresql+psycopg://app:hunter2@db/dms"\n'
        "[sources.options]\n"
        'url_env = "RECONCILER_DMS"\n'
        'columns = { id = "doc_no", colour = "c" }\n'
        "filter = { library = { nested = 1 } }\n"
        'status_map = { A = "valid" }\n'
        'where = "1=1"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as raised:
        load_settings(config)
    message = str(raised.value)
    for expected in (
        "sources[0].url: set exactly one of url",
        "sources[0].url: a URL with a password never goes in the config file",
        "sources[0].options.table: a sql source needs the table's name",
        "sources[0].options.url_env: RECONCILER_DMS",
        "sources[0].options.columns.colour: unknown field",
        "sources[0].options.filter.library: a string, number or boolean",
        "sources[0].options.status_map.A: must be one of",
        "sources[0].options.where: unknown option",
    ):
        assert expected in message, expected
    assert "hunter2" not in message


def test_importing_the_sql_connector_loads_no_http_client() -> None:
    """The sql connector shares the record model (connectors.records), not the HTTP connector."""
    code = (
        "import connectors.sql, sys; "
        "assert 'requests' not in sys.modules and 'connectors.http' not in sys.modules"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_a_bad_field_and_a_broken_cross_field_rule_are_listed_together() -> None:
    settings = SimpleNamespace(
        name="dms", path=None, url=None, options={"table": "docs", "batch_size": 0}
    )
    assert SqlTableSource.config_problems(settings) == [
        ("options.batch_size", "a positive integer"),
        (
            "url",
            "set exactly one of url (a SQLAlchemy URL without a password) or options.url_env "
            "(a variable holding the URL)",
        ),
    ]
    with pytest.raises(ConnectorConfigError, match=r"options\.batch_size: .*; url: set exactly"):
        SqlTableSource.from_settings(settings)


def test_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "reconciler.toml"
    config.write_text(
        "[[sources]]\n"
        'name = "dms"\n'
        'type = "sql"\n'
        "[sources.options]\n"
        'url_env = "DMS_URL"\n'
        'table = "docs.controlled"\n'
        "batch_size = 50\n"
        'filter = { library = ["hr", "it"] }\n'
        "[sources.options.columns]\n"
        'id = "doc_no"\n',
        encoding="utf-8",
    )
    src = SqlTableSource.from_settings(load_settings(config).sources[0])
    assert (src.url_env, src.table_name, src.batch_size) == ("DMS_URL", "docs.controlled", 50)
    assert src.filters == {"library": ["hr", "it"]}
    assert src.column_names == {"id": "doc_no"}


def test_binary_bodies_and_schema_qualified_tables(pg_url: str) -> None:
    """PostgreSQL: a table in another schema, bodies in a bytea column."""
    db_url = pg_url
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE SCHEMA dms"))
    metadata = MetaData(schema="dms")
    table = Table(
        "controlled",
        metadata,
        Column("id", String(20), primary_key=True),
        Column("status", String(20)),
        Column("body", LargeBinary),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": "A", "status": "current", "body": "Ä".encode()}])
    engine.dispose()
    src = SqlTableSource("dms", url=db_url, table="dms.controlled")
    [doc] = src.scan().documents
    assert src.read_body("A") == "Ä"
    assert doc.content_hash == sha("Ä")


def test_the_updated_at_watermark_moves_with_every_change(dms: Dms) -> None:
    """``probe`` (serve's watch polls it before it scans): the column's maximum and the row
    count (and an integer column's sum), on both dialects; None without ``updated_at``; a
    missing column is a config error."""
    assert dms.source().probe(None) is None
    source = dms.source(updated_at="rev")
    first = source.probe(None)
    assert first is not None
    assert source.probe(first) == first  # nothing changed
    dms.update(101, rev=2)  # (a row's counter forward, not past the greatest: the sum)
    forward = source.probe(first)
    assert forward not in (None, first)
    dms.update(101, rev=9)
    moved = source.probe(forward)
    assert moved not in (None, first, forward)
    with dms.engine.begin() as conn:
        conn.execute(dms.table.delete().where(dms.table.c.doc_no == 301))
    assert source.probe(moved) not in (None, moved)  # a deletion: the count
    with pytest.raises(ConnectorConfigError, match="no column 'nope'"):
        dms.source(updated_at="nope").probe(None)


def test_a_time_watermark_moves_when_a_row_is_replaced_by_one_of_an_older_time(
    dms: Dms,
) -> None:
    """A date or time ``updated_at`` on both dialects: a row deleted and another inserted with
    an older time (an ETL copying its upstream's time) leaves the maximum and the count as
    they were; the sum of the instants moves. Neither a time nor a date column answers the
    same as before such a change."""
    dms.update(101, valid_until=datetime(2024, 1, 1, 8, 0, tzinfo=UTC))
    for column in ("valid_until", "valid_from"):
        source = dms.source(updated_at=column)
        first = source.probe(None)
        assert first is not None
        assert source.probe(first) == first
        with dms.engine.begin() as conn:
            conn.execute(dms.table.delete().where(dms.table.c.doc_no == 101))
        older = {"valid_until": datetime(2024, 1, 1, 7, 0, tzinfo=UTC), "valid_from": date(2022, 6, 1)}  # fmt: skip
        dms.insert({**ROWS[0], "doc_no": 103, column: older[column]})
        assert source.probe(first) not in (None, first), column
        with dms.engine.begin() as conn:  # (back as it was for the other column)
            conn.execute(dms.table.delete().where(dms.table.c.doc_no == 103))
        dms.insert({**ROWS[0], "valid_until": datetime(2024, 1, 1, 8, 0, tzinfo=UTC)})


def test_an_integer_watermark_of_huge_values_does_not_overflow(tmp_path: Path) -> None:
    """An integer ``updated_at`` holding huge values (epoch nanoseconds): their sum would
    overflow 64 bits, where SQLite's ``sum`` raises; the probe sums residues, and answers (a
    counterexample: the watch could not poll such a table)."""
    db = tmp_path / "huge.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT, stamp INTEGER)")
        conn.executemany(
            "INSERT INTO t VALUES (?, 'x', ?)", [("a", 2**62), ("b", 2**62 + 1), ("c", 2**62)]
        )
    source = SqlTableSource("huge", url=f"sqlite:///{db}", table="t", updated_at="stamp")
    first = source.probe(None)
    assert first is not None
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE t SET stamp = ? WHERE id = 'c'", (2**62 + 1,))
    assert source.probe(first) not in (None, first)


def test_a_time_watermark_sees_a_second_in_a_large_table(tmp_path: Path) -> None:
    """A date or time ``updated_at`` on SQLite over a large table: the sum of the rows' Julian
    days is a double near 3e11, a unit in its last place some five seconds, so a row replaced
    by one a second older left the token as it was (131072 rows of one bulk load's time).
    The probe sums each instant's milliseconds modulo ``_RESIDUE``: exact."""
    db = tmp_path / "large.db"
    rows = 2**17
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT, stamp DATETIME)")
        conn.executemany(
            "INSERT INTO t VALUES (?, 'x', '2024-01-01 00:00:00')", ((n,) for n in range(rows))
        )
    source = SqlTableSource("large", url=f"sqlite:///{db}", table="t", updated_at="stamp")
    first = source.probe(None)
    assert first is not None
    assert source.probe(first) == first
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM t WHERE id = ?", (rows - 1,))
        conn.execute("INSERT INTO t VALUES (?, 'x', '2023-12-31 23:59:59')", (rows,))
    assert source.probe(first) not in (None, first)


def test_a_row_change_is_dated_by_its_updated_at_where_it_is_a_date(dms: Dms) -> None:
    """``changed_at`` (serve's watch dates a change so): the row's ``updated_at`` as the last
    scan read it, on both dialects; None where it is empty or a counter, not a date."""
    source = dms.source(updated_at="valid_until")
    assert source.changed_at("201") is None  # (not scanned yet)
    source.scan()
    assert source.changed_at("201") == datetime(2024, 6, 30, 12, 0, tzinfo=UTC)
    assert source.changed_at("101") is None  # (no date in the column)
    counted = dms.source(updated_at="rev")
    counted.scan()
    assert counted.changed_at("101") is None


def test_a_sqlite_date_that_does_not_parse_is_that_rows_problem(tmp_path: Path) -> None:
    """SQLite checks no type: a ``DATETIME`` or ``DATE`` cell holding text that is no date
    (typed by hand, left by an import) raised ``ValueError`` out of the whole scan and out of
    every probe of a watched ``updated_at``, so the source was unreadable until the cell was
    fixed. It is that row's invalid field now (absent, with a problem); every other row reads
    as before, and the probe answers the same on every poll."""
    url = f"sqlite:///{tmp_path / 'dms.db'}"
    db = Dms(url)
    db.insert(*ROWS)
    with sqlite3.connect(tmp_path / "dms.db") as conn:  # (as a hand edit writes it)
        conn.execute("UPDATE dms_docs SET valid_until = 'soon-ish' WHERE doc_no = 201")
        conn.execute("UPDATE dms_docs SET valid_from = '2024-13-01' WHERE doc_no = 102")
    source = db.source(updated_at="valid_until")

    snapshot = source.scan()

    assert len(snapshot.documents) == len(ROWS)
    assert sorted(problems_of(snapshot)) == [
        (ProblemKind.INVALID_FIELD, "dms:102"),
        (ProblemKind.INVALID_FIELD, "dms:201"),
    ]
    by_id = {d.doc_id: d for d in snapshot.documents}
    assert by_id["dms:101"].effective_from == datetime(2023, 1, 1, tzinfo=UTC)  # (as before)
    first = source.probe(None)
    assert first is not None
    assert source.probe(first) == first
    db.engine.dispose()


def test_a_time_watermark_sums_numeric_instants_on_every_postgresql() -> None:
    """PostgreSQL's ``extract(epoch ...)`` is numeric from 14 on and a double before it, and a
    parallel aggregate adds doubles in whatever order its workers finish, so the same table
    could answer another sum poll to poll (a spurious scan each time). The probe sums the
    instants cast to numeric, exact whatever the server's version (checked on the statement:
    the PostgreSQL here is newer than 14)."""
    from sqlalchemy.dialects import postgresql  # noqa: PLC0415

    from connectors.sql.source import _instants  # noqa: PLC0415

    table = Table("t", MetaData(), Column("stamp", DateTime(timezone=True)))
    conn = SimpleNamespace(dialect=postgresql.dialect())
    summed = select(func.sum(_instants(conn, table.c.stamp)))  # type: ignore[arg-type]
    statement = str(summed.compile(dialect=postgresql.dialect()))
    assert "sum(CAST(EXTRACT(epoch FROM t.stamp) AS NUMERIC))" in statement
