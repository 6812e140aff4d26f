"""The document table's contract (``reconciler.testing.table_contract``) on each adapter the
``table`` fixture yields (SQLite and PostgreSQL); a new document table adds itself there. Below
it, the SQL adapter's own: its set-based row writes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from reconciler.model import RowChange, VersionState
from reconciler.ports import DocumentTable
from reconciler.stores.sql import outbox
from reconciler.testing.table_contract import *  # noqa: F403 (its tests, for pytest to collect)
from reconciler.testing.table_contract import AT, document, request

#: A change of a row: which of four rows, and the columns it sets (one to three of them).
ROW_CHANGES = st.tuples(
    st.integers(0, 3),
    st.fixed_dictionaries(
        {},
        optional={
            "version_state": st.sampled_from(list(VersionState)),
            "superseded_by": st.sampled_from([None, "h:doc-0", "h:doc-3"]),
            "doc_family_id": st.sampled_from(["h:fam-0", "h:fam-x"]),
        },
    ).filter(bool),
)


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(changes=st.lists(ROW_CHANGES, max_size=12), page=st.integers(1, 4))
@example(  # a row set twice, the second time with other columns, between two pages
    changes=[
        (0, {"version_state": VersionState.RETIRED}),
        (1, {"version_state": VersionState.SUPERSEDED, "superseded_by": "h:doc-0"}),
        (0, {"version_state": VersionState.DRAFT, "doc_family_id": "h:fam-x"}),
        (0, {"version_state": VersionState.CURRENT}),
    ],
    page=2,
)
def test_row_changes_are_written_as_if_one_by_one_in_their_order(
    table: DocumentTable,
    monkeypatch: pytest.MonkeyPatch,
    changes: list[tuple[int, dict[str, object]]],
    page: int,
) -> None:
    """The run's row writes are set-based (a page of rows a statement, by the columns they
    set); the rows end as the changes, applied one at a time in order, leave them."""
    monkeypatch.setattr(outbox, "_PAGE", page)
    docs = [document(n) for n in range(4)]
    table.upsert_documents(docs)  # (each example starts from the same rows)
    expected = {d.doc_id: dataclasses.replace(d) for d in docs}
    for n, after in changes:
        doc_id = f"h:doc-{n}"
        expected[doc_id] = dataclasses.replace(expected[doc_id], **after)  # type: ignore[arg-type]
    pending = table.pending_reingest_for(["h:doc-1"])  # (from an earlier example)
    _head, queued = table.write_rows_and_outbox(
        run_id="r-rows",
        actor="cli",
        changes=[RowChange(f"h:doc-{n}", "x/y", {}, after) for n, after in changes],
        reingests=[(request(1), "hash/changed"), (request(1), "hash/changed")],
        at=AT,
    )
    written = table.get_documents(expected)
    fields = ("version_state", "superseded_by", "doc_family_id")
    assert {i: [getattr(d, f) for f in fields] for i, d in written.items()} == {
        i: [getattr(d, f) for f in fields] for i, d in expected.items()
    }
    assert queued == (0 if pending else 1)  # (one request a document, once)
