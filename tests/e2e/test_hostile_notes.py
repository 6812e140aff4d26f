"""One hostile note never stops a run: random bytes, random YAML with anchors and aliases
("billion laughs"), out-of-range and oversize values, NUL characters and duplicate ids, beside
good notes, through the real vault connector, ingestion and engine, on SQLite and PostgreSQL.

No exception escapes; each hostile note costs bounded memory (the scan is measured with
tracemalloc); the good notes reconcile as if the hostile ones were not there.
"""

from __future__ import annotations

import shutil
import tempfile
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from acceptance_kit import migrated_sqlite
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from qdrant_client import QdrantClient
from sqlalchemy import create_engine, text

from connectors.vault import VaultSource
from reconciler import default_filter
from reconciler.embedding import HashingEmbedder
from reconciler.ingesting import Ingestor
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.sql import SqlDocumentTable

T = datetime(2026, 6, 1, 12, tzinfo=UTC)
#: A generous bound on what scanning the whole vault may allocate at once: a kilobyte of
#: nested aliases used to take gigabytes.
SCAN_PEAK_BYTES = 64 * 2**20

GOOD = {
    f"good/{family}-v{v}.md": (
        f"---\nid: {family}-v{v}\nfamily: {family}\nversion: {v}\n"
        f"status: {'current' if v == 2 else 'superseded'}\n"
        + (f"superseded_by: {family}-v2\n" if v == 1 else "")
        + f"effective_from: 202{v}-01-01\n---\n# {family} v{v}\n\nThe rules, version {v}.\n"
    ).encode()
    for family in ("leave", "travel", "expenses")
    for v in (1, 2)
}
#: What retrieval must serve at T whatever sits beside the good notes.
IN_FORCE = {"hb:leave-v2", "hb:travel-v2", "hb:expenses-v2"}

BOMB = (
    "---\nid: h-bomb\na: &a [x,x,x,x,x,x,x,x,x]\n"
    + "".join(
        f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "title: *i\n---\nbody\n"
)

_values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=30).map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    st.sampled_from(['"\\0"', '"a\\0b"', "&x [1, 2]", "*x", "[*x, *x]", "{a: 1}", "~", ""]),
    st.integers(min_value=300, max_value=6000).map(lambda n: "y" * n),
    st.sampled_from(["99999-01-01", "2026-02-30", "2026-13-01", "0000-01-01", "9999-12-31"]),
)
_keys = st.sampled_from(
    ["id", "family", "version", "status", "effective_from", "effective_to", "superseded_by",
     "title", "doc_class", "x"]
)  # fmt: skip


@st.composite
def yaml_notes(draw: st.DrawFn) -> bytes:
    lines = [f"{draw(_keys)}: {draw(_values)}" for _ in range(draw(st.integers(0, 6)))]
    if draw(st.booleans()):
        lines.append(f"id: h-{draw(st.sampled_from(['dup', 'x', 'y']))}")  # hostile ids only
    lines.append(f"family: h-{draw(st.integers(0, 3))}")  # never a good family
    return ("---\n" + "\n".join(lines) + "\n---\n" + draw(st.text(max_size=200))).encode(
        "utf-8", "surrogatepass"
    )


hostile = st.lists(
    st.one_of(st.binary(max_size=1500), yaml_notes(), st.just(BOMB.encode())),
    min_size=1,
    max_size=6,
)


@contextmanager
def fresh_table(dialect: str, folder: Path, pg_url: str | None) -> Iterator[SqlDocumentTable]:
    if dialect == "sqlite":
        shutil.copy(migrated_sqlite(), folder / "table.db")
        table = SqlDocumentTable.from_url(f"sqlite:///{folder / 'table.db'}")
    else:
        assert pg_url is not None
        engine = create_engine(pg_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()
        table = SqlDocumentTable.from_url(pg_url)
        table.ensure_schema(create=True)
    try:
        yield table
    finally:
        table.close()


def check_hostile(files: list[bytes], dialect: str, pg_url: str | None) -> None:
    folder = Path(tempfile.mkdtemp(prefix="reconciler-hostile-"))
    try:
        vault = folder / "vault"
        for name, data in {**GOOD, **{f"hostile/n{i}.md": d for i, d in enumerate(files)}}.items():
            (vault / name).parent.mkdir(parents=True, exist_ok=True)
            (vault / name).write_bytes(data)
        source = VaultSource("hb", vault, clock=lambda: T)
        tracemalloc.start()
        try:
            snapshot = source.scan()
            _current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < SCAN_PEAK_BYTES, peak
        assert {d.doc_id for d in snapshot.documents} >= {f"hb:{n[5:-3]}" for n in GOOD}

        with fresh_table(dialect, folder, pg_url) as table:
            index = QdrantChunkIndex(QdrantClient(location=":memory:"), collection="corpus")
            try:
                Ingestor(table=table, index=index, embedder=HashingEmbedder(dim=8)).run(
                    [source], now=T
                )
                engine = Reconciler(table=table, index=index, sources=[source])
                options = Options(mode="apply", now=T, guard=Guard(max_changed_fraction=1.0))
                report = engine.run(options)
                assert report.error is None
                again = engine.run(Options(mode="check", now=T))
                assert again.plan.empty, [f.to_json() for f in again.findings if f.changes]
                points, _ = index.client.scroll(
                    "corpus", scroll_filter=default_filter(T), limit=10_000, with_payload=True
                )
                served = {(p.payload or {})["doc_id"] for p in points}
                assert served & {f"hb:{n[5:-3]}" for n in GOOD} == IN_FORCE
            finally:
                index.close()
    finally:
        shutil.rmtree(folder)


def slow(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@slow(40)
@example([BOMB.encode(), b"---\nid: h-dup\n---\nA\n", b"---\nid: h-dup\n---\nB\n"])
@example([b'---\nid: "h-\\0nul"\ntitle: "a\\0b"\nversion: 9223372036854775808\n---\nx\n'])
@example([b'---\nid: "h-\\udc00"\n---\nx\n', b'---\nid: h-s\ntitle: "a\\ud800b"\n---\nx\n'])
@given(hostile)
def test_hostile_notes_beside_good_ones_on_sqlite(files: list[bytes]) -> None:
    check_hostile(files, "sqlite", None)


@pytest.fixture
def pg_admin(pg_server: str) -> str:
    """The session's PostgreSQL database (each example resets its schema)."""
    return pg_server


@slow(12)
@example([b'---\nid: "h-\\0nul"\ntitle: "a\\0b"\ndoc_class: ' + b"c" * 300 + b"\n---\nx\n"])
@example([b'---\nid: "h-\\udc00"\n---\nx\n', b'---\nid: h-s\ntitle: "a\\ud800b"\n---\nx\n'])
@given(hostile)
def test_hostile_notes_beside_good_ones_on_postgresql(pg_admin: str, files: list[bytes]) -> None:
    check_hostile(files, "postgresql", pg_admin)
