"""A scoped run's rows read once (``pipeline.scope_rows.ScopeRows``): asked for exactly the
scope's families, in any order, the same rows in the same order as the table streams them;
any other question is the table's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import Document, VersionState
from reconciler.pipeline.scope_rows import ScopeRows
from reconciler.stores.sql import SqlDocumentTable

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
FAMILIES = ["k:b", "k:a", "k:B", "k:é", "k:a-2", "k:ä"]


def _row(n: int, family: str, version: int) -> Document:
    return Document(
        doc_id=f"k:{n:03d}",
        source="k",
        source_key=f"{n:03d}",
        doc_family_id=family,
        doc_version=version,
        version_state=VersionState.CURRENT,
        effective_from=EPOCH + timedelta(days=n),
    )


def _table(tmp_path: Path) -> SqlDocumentTable:
    table = SqlDocumentTable.from_url(f"sqlite:///{tmp_path / 'rows.db'}")
    table.ensure_schema(create=True)
    rows = [_row(n, FAMILIES[n % len(FAMILIES)], 1 + n % 3) for n in range(40)]
    table.upsert_documents(rows)
    return table


def test_the_scope_is_read_once_and_answered_as_the_table_would(tmp_path: Path) -> None:
    table = _table(tmp_path)
    try:

        @settings(max_examples=30, deadline=None)
        @given(
            st.sets(st.sampled_from(FAMILIES), min_size=1),
            st.permutations(FAMILIES),
            st.integers(1, 7),
        )
        def check(scope: set[str], order: list[str], batch: int) -> None:
            rows = ScopeRows.read(table, frozenset(scope), batch)
            asked = [f for f in order if f in scope]
            assert list(rows.iter_documents(batch_size=batch, families=asked)) == list(
                table.iter_documents(batch_size=batch, families=asked)
            )
            other = [f for f in order if f not in scope][:2] or None
            assert list(rows.iter_documents(families=other)) == list(
                table.iter_documents(families=other)
            )
            assert list(rows.iter_documents(families=asked, source="k")) == list(
                table.iter_documents(families=asked, source="k")
            )
            assert rows.get_documents(["k:001", "k:nope"]) == table.get_documents(
                ["k:001", "k:nope"]
            )

        check()
    finally:
        table.close()
