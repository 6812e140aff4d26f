"""Issue 38: the scan settles quiet families (``pipeline.settling``) and the assess stage reads
only the others again. The promise: over random corpora (families of random versions, states,
windows, links and quarantines; chunks right, drifted, stale, missing or orphaned), random
instants and random choices of the checks, a run gives exactly the findings, plan and summary
of the same run with the shortcut turned off. On a real SQLite table and the in-memory index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from unittest import mock

import pytest
from acceptance_kit import memory_engine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from sqlalchemy import text

from reconciler.errors import StoreFault
from reconciler.model import OPEN_END, Document, VersionState
from reconciler.payload import chunk_payload
from reconciler.pipeline import running
from reconciler.pipeline.settling import QUIET_CHECKS
from reconciler.pipeline.values import Options, Report

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
SRC = "kb"
_offsets = st.one_of(st.none(), st.integers(min_value=-4, max_value=4))


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[Document], list[dict[str, Any]]]:
    """Rows of up to four families (tidy ones most often) and the payloads of their chunks,
    some of them drifted, stale, missing, or without a row."""
    rows: list[Document] = []
    points: list[dict[str, Any]] = []
    for f in range(draw(st.integers(min_value=1, max_value=4))):
        tidy = draw(st.booleans())
        members: list[Document] = []
        for v in range(draw(st.integers(min_value=1, max_value=3))):
            start = (v - 3) * 2 if tidy else draw(_offsets)
            end = draw(_offsets)
            last = tidy and v == 0
            state = (
                (VersionState.CURRENT if v == 0 else VersionState.SUPERSEDED)
                if tidy
                else draw(st.sampled_from(list(VersionState)))
            )
            quarantined = not tidy and draw(st.booleans())
            members.append(
                Document(
                    doc_id=f"{SRC}:f{f}v{v}",
                    source=SRC,
                    source_key=f"f{f}v{v}",
                    doc_family_id=f"{SRC}:f{f}",
                    doc_version=10 - v if tidy else v + 1,
                    version_state=state,
                    effective_from=None if start is None else NOW + start * DAY,
                    effective_to=(OPEN_END if last or end is None or tidy else NOW + end * DAY),
                    superseded_by=(
                        draw(st.sampled_from([d.doc_id for d in members]))
                        if members and (tidy or draw(st.booleans()))
                        else None
                    ),
                    source_hash=draw(st.sampled_from([None, "h1"])),
                    quarantined=quarantined,
                    quarantine_reason="stale_chunks" if quarantined else None,
                    chunk_count=draw(st.integers(min_value=0, max_value=2)),
                )
            )
        rows += members
        for doc in members:
            for n in range(doc.chunk_count + draw(st.integers(min_value=-1, max_value=1))):
                payload = chunk_payload(doc, chunk_id=f"{doc.doc_id}#{n}")
                trouble = draw(st.sampled_from(["none"] * 6 + ["drift", "stale", "orphan"]))
                if trouble == "drift":
                    payload["version_state"] = "current"
                elif trouble == "stale":
                    payload["content_hash"] = "h2"
                elif trouble == "orphan":
                    payload["doc_id"] = f"{doc.doc_id}-gone"
                points.append(payload)
    return rows, points


#: Other spellings of an instant than the one the table stores it in, as another writer of
#: the table may leave them: each reads back as the same instant (``UTCDateTime``).
SPELLINGS = (
    lambda at: at.isoformat(),
    lambda at: at.astimezone(timezone(timedelta(hours=2))).isoformat(),
    lambda at: at.replace(tzinfo=None).isoformat(),
    lambda at: at.replace(tzinfo=None).isoformat(" "),
)


def respell(table: Any, rows: list[Document], respelt: tuple[tuple[str, str, int], ...]) -> None:
    """Rewrite the instants ``respelt`` names (doc id, column, spelling) in another spelling
    (``SPELLINGS``), as another writer of the table may."""
    by_id = {doc.doc_id: doc for doc in rows}
    with table.engine.begin() as conn:
        for doc_id, column, spelling in respelt:
            conn.execute(
                text(f"UPDATE documents SET {column} = :t WHERE doc_id = :d"),
                {"t": SPELLINGS[spelling](getattr(by_id[doc_id], column)), "d": doc_id},
            )


def _seen(report: Report) -> tuple[Any, ...]:
    return (
        [f.to_json() for f in report.findings],
        report.plan,
        report.summary,
        sorted(report.timings),
    )


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpus=corpora(),
    hours=st.integers(min_value=-5 * 24, max_value=5 * 24),
    checks=st.lists(st.sampled_from([*sorted(QUIET_CHECKS), "index"]), unique=True, min_size=1),
)
def test_a_run_that_settles_families_finds_what_the_full_check_finds(
    corpus: tuple[list[Document], list[dict[str, Any]]], hours: int, checks: list[str]
) -> None:
    rows, points = corpus
    options = Options(mode="check", checks=frozenset(checks), now=NOW + timedelta(hours=hours))
    with memory_engine(rows, points) as runner:
        settled = runner.run(options)
        with mock.patch.object(running, "settling", return_value=None):
            full = runner.run(options)
    assert _seen(settled) == _seen(full)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    corpus=corpora(),
    hours=st.integers(min_value=-5 * 24, max_value=5 * 24),
)
def test_instants_spelt_otherwise_in_the_table_change_nothing(
    data: st.DataObject, corpus: tuple[list[Document], list[dict[str, Any]]], hours: int
) -> None:
    """The scan reads SQLite's stored instants as texts (issue 38). A table where another
    writer spelt some of them otherwise (an offset, a ``T``, fewer digits) gives a run the
    findings, plan and summary of the same table as the reconciler writes it, with the
    scan's shortcut and without."""
    rows, points = corpus
    respelt = tuple(
        (doc.doc_id, column, data.draw(st.integers(0, len(SPELLINGS) - 1)))
        for doc in rows
        for column in ("effective_from", "effective_to")
        if getattr(doc, column) is not None and data.draw(st.booleans())
    )
    options = Options(
        mode="check", checks=frozenset(QUIET_CHECKS), now=NOW + timedelta(hours=hours)
    )
    with memory_engine(rows, points) as runner:
        written = runner.run(options)
        respell(runner.table, rows, respelt)
        settled = runner.run(options)
        with mock.patch.object(running, "settling", return_value=None):
            full = runner.run(options)
    assert _seen(settled) == _seen(full) == _seen(written)


def test_a_tidy_corpus_is_settled_by_the_scan_and_a_drifted_one_is_not() -> None:
    """Not vacuous: the scan settles every family of a corpus as the time rule leaves it,
    every chunk right, and settles none once a chunk drifts (the findings say why)."""
    old = Document(
        doc_id=f"{SRC}:a1", source=SRC, source_key="a1", doc_family_id=f"{SRC}:a", doc_version=1,
        version_state=VersionState.SUPERSEDED, effective_from=NOW - 9 * DAY,
        effective_to=NOW - 2 * DAY, superseded_by=f"{SRC}:a2", chunk_count=2,
    )  # fmt: skip
    new = Document(
        doc_id=f"{SRC}:a2", source=SRC, source_key="a2", doc_family_id=f"{SRC}:a", doc_version=2,
        version_state=VersionState.CURRENT, effective_from=NOW - 2 * DAY, chunk_count=2,
    )  # fmt: skip
    lone = Document(
        doc_id=f"{SRC}:b1", source=SRC, source_key="b1", doc_family_id=f"{SRC}:b", doc_version=1,
        version_state=VersionState.CURRENT, chunk_count=1,
    )  # fmt: skip
    rows = [old, new, lone]
    points = [
        chunk_payload(doc, chunk_id=f"{doc.doc_id}#{n}")
        for doc in rows
        for n in range(doc.chunk_count)
    ]
    options = Options(mode="check", checks=frozenset(QUIET_CHECKS), now=NOW)
    with memory_engine(rows, points) as runner:
        sources = runner.read_sources(options, NOW)
        scan = runner.scan(options, None, settling=running.settling(options, NOW, sources, None))
        assert (scan.settled, scan.unsettled) == (2, ())
        report = runner.run(options)
        assert report.findings == ()
        assert report.summary["siblings"] == {"checked": 2, "findings": 0}
    points[0]["version_state"] = "current"
    with memory_engine(rows, points) as runner:
        scan = runner.scan(options, None, settling=running.settling(options, NOW, sources, None))
        assert (scan.settled, scan.unsettled) == (0, None)
        assert [f.kind for f in runner.run(options).findings] == ["payload_drift"]


@pytest.mark.parametrize("value", [0, "0", 1_700_000_000, "not an instant", ""])
def test_a_row_holding_no_instant_where_one_belongs_stops_the_check_by_its_name(
    value: object,
) -> None:
    """A value another writer left in an instant's column (SQLite keeps ``0`` as an integer)
    is never read as the open window, nor settled: the check stops, naming the row."""
    row = Document(
        doc_id=f"{SRC}:b1", source=SRC, source_key="b1", doc_family_id=f"{SRC}:b", doc_version=1,
        version_state=VersionState.CURRENT, chunk_count=1,
    )  # fmt: skip
    points = [chunk_payload(row, chunk_id=f"{row.doc_id}#0")]
    options = Options(mode="check", checks=frozenset(QUIET_CHECKS), now=NOW)
    with memory_engine([row], points) as runner:
        assert runner.run(options).findings == ()
        with runner.table.engine.begin() as conn:
            conn.execute(text("UPDATE documents SET effective_to = :v"), {"v": value})
        with pytest.raises(StoreFault, match=f"row '{row.doc_id}' cannot be read"):
            runner.run(options)
