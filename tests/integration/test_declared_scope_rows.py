"""A scoped run's rows read once with its declarations (``pipeline.reading.with_declarations``
given the run's scope): what it makes of the declarations is what it makes without the scope;
the rows it keeps are the scope's statement's (``ScopeRows.read``), and ``widen`` finds the
same families from them as from the table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import Declaration, DeclarationKind, Document, VersionState
from reconciler.pipeline import membership
from reconciler.pipeline.reading import with_declarations
from reconciler.pipeline.scope_rows import ScopeRows
from reconciler.pipeline.values import SourcesRead
from reconciler.stores.sql import SqlDocumentTable

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
FAMILIES = ["k:b", "k:a", "k:B", "k:é", "k:a-2", "k:ä"]
DOCS = [f"k:{n:03d}" for n in range(24)]


def _row(n: int) -> Document:
    return Document(
        doc_id=DOCS[n],
        source="k",
        source_key=f"{n:03d}",
        doc_family_id=FAMILIES[n % len(FAMILIES)],
        doc_version=1 + n % 3,
        version_state=VersionState.SUPERSEDED if n % 5 == 4 else VersionState.CURRENT,
        effective_from=EPOCH + timedelta(days=n % 7),
        superseded_by=DOCS[(n + 1) % len(DOCS)] if n % 5 == 4 else None,
    )


def _read() -> SourcesRead:
    return SourcesRead(
        states={},
        by_id={},
        family_of={},
        problems={},
        loose_problems=(),
        last_seen={},
        identities={},
        present={},
    )


_DECLARED = st.lists(
    st.one_of(
        st.tuples(
            st.just(DeclarationKind.SUPERSEDE),
            st.sampled_from([*DOCS, "k:unknown"]),
            st.sampled_from([*DOCS, "k:unknown"]),
        ),
        st.tuples(
            st.just(DeclarationKind.FAMILY),
            st.sampled_from(DOCS),
            st.sampled_from([*FAMILIES, "k:new"]),
        ),
    ),
    min_size=1,
    max_size=8,
)


def test_the_scope_read_first_changes_nothing_the_declarations_make(tmp_path: Path) -> None:
    table = SqlDocumentTable.from_url(f"sqlite:///{tmp_path / 'rows.db'}")
    table.ensure_schema(create=True)
    table.upsert_documents([_row(n) for n in range(len(DOCS))])
    try:

        @settings(max_examples=60, deadline=None)
        @given(
            _DECLARED,
            st.sets(st.sampled_from([*FAMILIES, "k:new"])),
            st.sets(st.sampled_from(FAMILIES), max_size=2),
            st.integers(1, 5),
        )
        def check(
            declared: list[tuple[DeclarationKind, str, str]],
            extra: set[str],
            dropped: set[str],
            batch: int,
        ) -> None:
            declarations = [
                Declaration(f"d-{n:012x}", kind, doc, target, "test", EPOCH)
                for n, (kind, doc, target) in enumerate(declared)
            ]
            plain = with_declarations(
                table, _read(), declarations, configured=frozenset(), batch=batch
            )
            rows = table.get_documents(DOCS)
            # the families a declare run's scope holds (those its documents are in, those
            # it names), and sometimes others or fewer
            scope = frozenset(
                {rows[d.doc_id].doc_family_id for d in declarations if d.doc_id in rows}
                | {d.target for d in declarations if d.kind is DeclarationKind.FAMILY}
                | extra
            ) - dropped or frozenset({"k:a"})
            scoped = with_declarations(
                table, _read(), declarations, configured=frozenset(), batch=batch, scope=scope
            )
            assert scoped == plain  # (``touched_rows`` aside: not compared)
            assert plain.touched_rows is None
            kept = scoped.touched_rows
            assert kept is not None
            assert kept.scope == scope
            assert kept.rows == ScopeRows.read(table, scope, batch).rows
            assert membership.widen(kept, scope, scoped, batch=batch) == membership.widen(
                table, scope, scoped, batch=batch
            )

        check()
    finally:
        table.close()
