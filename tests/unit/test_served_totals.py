"""The scan's count of what is served (``scanning._Served``: the families with a row served
now or later, and those rows' chunks), which the guard weighs a change of the served set
against, agrees with the guard's own reading of a row (``guarding._served_from``, now or
later), whatever the rows (Hypothesis)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import Document, VersionState
from reconciler.payload import managed_values
from reconciler.pipeline.directions import _served_from
from reconciler.pipeline.scanning import _Served

NOW = datetime(2026, 12, 1, tzinfo=UTC)
_OFFSETS = st.one_of(st.none(), st.integers(-5, 5).map(lambda d: NOW + timedelta(days=d)))


@st.composite
def rows(draw: st.DrawFn) -> Document:
    start = draw(_OFFSETS)
    end = draw(_OFFSETS)
    fields = {"effective_from": start}
    if end is not None:
        fields["effective_to"] = end
    return Document(
        doc_id=f"s:{draw(st.integers(0, 10**6))}",
        source="s",
        source_key="k",
        doc_family_id=f"s:f{draw(st.integers(0, 4))}",
        doc_version=1,
        version_state=draw(st.sampled_from(list(VersionState))),
        quarantined=draw(st.booleans()),
        chunk_count=draw(st.integers(0, 3)),
        **fields,  # type: ignore[arg-type]
    )


@given(st.lists(rows(), max_size=12))
def test_the_served_count_is_the_guards_reading(docs: list[Document]) -> None:
    docs.sort(key=lambda d: d.doc_family_id)  # (the scan passes family by family)
    served = _Served(NOW)
    family = None
    for doc in docs:
        if doc.doc_family_id != family:
            served.family()
            family = doc.doc_family_id
        values = managed_values(
            doc.doc_family_id, doc.doc_version, doc.version_state, doc.superseded_by,
            doc.effective_from, doc.effective_to, doc.doc_class, doc.quarantined,
            doc.quarantine_reason,
        )  # fmt: skip
        served.row(values, doc.chunk_count)
    live = [doc for doc in docs if _served_from(doc, NOW) or _now(doc)]
    assert served.families == len({doc.doc_family_id for doc in live})
    assert served.chunks == sum(doc.chunk_count or 0 for doc in live)


def _now(doc: Document) -> bool:
    from reconciler.rules.time_rule import row_served  # noqa: PLC0415

    return row_served(doc, NOW)
