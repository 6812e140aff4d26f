"""The check's compact per-document state folds a collection exactly as a plain dict would.

``ChunkTally`` keeps no doc id string: rows are found by two independent keys of the id, a page
of chunks at a time with numpy. The promise is that this changes nothing a check sees: for any
rows and any chunks (right, drifted, spelt differently, orphaned, without a doc_id, not even a
string), the tally reads exactly as the reference below, which keys a dict by doc id and
normalises every chunk (the rule the engine used before the tally existed). It holds with the
real keys and with a key so weak that most rows share it, which forces the second key to tell
them apart.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import payload as payload_module
from reconciler.check_inputs import ChunkAggregate, digest, expected_variant, variant_values
from reconciler.model import (
    MANAGED_KEYS,
    Document,
    ManagedPage,
    VersionState,
    parse_instant,
    rfc3339,
    utc,
)
from reconciler.payload import Variant, doc_id_of, instant_text, normalize, payload_values
from reconciler.pipeline.chunk_tally import ChunkTally
from reconciler.ports.index import ABSENT
from reconciler.rules.time_rule import kept_in_main

NOW = datetime(2026, 12, 1, tzinfo=UTC)
IDS = [f"hb:doc-{n}" for n in range(12)] + ["hb:é", "hb:dóc-1", "hb:doc-1 "]


def _row(doc_id: str, n: int) -> Document:
    return Document(
        doc_id=doc_id,
        source="hb",
        source_key=doc_id,
        doc_family_id=f"hb:fam-{n % 3}",
        doc_version=n % 4 + 1,
        version_state=[VersionState.CURRENT, VersionState.SUPERSEDED][n % 2],
        superseded_by=None if n % 2 == 0 else "hb:doc-0",
        effective_from=datetime(2024, 1, 1 + n % 20, tzinfo=UTC),
        doc_class="policy",
    )


#: Ways a chunk's stored values can differ from its row's (None: they do not).
_SPELLINGS: list[dict[str, Any] | None] = [
    None,
    None,
    None,
    {"doc_version": 1.0},  # normalised: the same meaning when the version is 1
    {"effective_from": "2024-01-01T00:00:00+00:00"},  # the same instant for some rows
    {"quarantined": 0},  # 0 == False in Python, not in a payload
    {"doc_version": True},
    {"version_state": "superseded"},
    {"version_state": "current"},
    {"doc_class": ["policy"]},  # unhashable as stored (normalised to a tuple)
    {"doc_class": None},
]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[Document], list[tuple[Any, Any, tuple[Any, ...]]]]:
    registered = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=len(IDS)))
    rows = [_row(doc_id, n) for n, doc_id in enumerate(registered)]
    by_id = {row.doc_id: row for row in rows}
    chunks = []
    for n in range(draw(st.integers(min_value=0, max_value=40))):
        doc_id = draw(st.one_of(st.sampled_from(IDS), st.sampled_from([None, 7, "hb:ghost"])))
        row = by_id.get(doc_id) if isinstance(doc_id, str) else None
        base = row or _row("hb:other", n)
        values = dict(zip(MANAGED_KEYS, payload_values(base), strict=True))
        values.update(draw(st.sampled_from(_SPELLINGS)) or {})
        chunks.append((f"p{n}", doc_id, tuple(values.get(k) for k in MANAGED_KEYS)))
    return rows, chunks


def _reference(
    rows: list[Document], chunks: list[tuple[Any, Any, tuple[Any, ...]]]
) -> tuple[dict[Any, ChunkAggregate], dict[Any, list[Any]]]:
    """doc_id -> aggregate and doc_id -> ids of the chunks that differ, the plain way."""
    expected = {row.doc_id: digest(expected_variant(row)) for row in rows}
    aggregates: dict[Any, ChunkAggregate] = {}
    ids: dict[Any, list[Any]] = {}
    for point_id, stored, values in chunks:
        doc_id = doc_id_of(stored)  # (a doc_id that is no text names no document: none)
        variant: Variant = normalize(dict(zip(MANAGED_KEYS, values, strict=True)))
        aggregate = aggregates.setdefault(doc_id, ChunkAggregate())
        aggregate.count += 1
        if isinstance(doc_id, str) and expected.get(doc_id) == digest(variant):
            aggregate.matching += 1
            continue
        aggregate.variants[variant] = aggregate.variants.get(variant, 0) + 1
        ids.setdefault(doc_id, []).append(point_id)
    return aggregates, ids


def _pages(chunks: list[tuple[Any, Any, tuple[Any, ...]]], size: int) -> list[ManagedPage]:
    pages = []
    for start in range(0, len(chunks), size):
        part = chunks[start : start + size]
        pages.append(
            ManagedPage(
                [(doc_id, *values) for _p, doc_id, values in part],
                lambda index, part=part: part[index][0],
            )
        )
    return pages


def _weak(doc_id: str) -> int:
    return len(doc_id) % 3  # most rows share a key: only the second key tells them apart


@settings(max_examples=300, deadline=None)
@given(worlds(), st.sampled_from([hash, _weak]), st.integers(min_value=1, max_value=9))
def test_the_tally_reads_as_a_dict_of_normalised_chunks(
    world: tuple[list[Document], list[tuple[Any, Any, tuple[Any, ...]]]],
    key: Any,
    page_size: int,
) -> None:
    rows, chunks = world
    aggregates, ids = _reference(rows, chunks)

    by_page = ChunkTally(key=key)
    one_by_one = ChunkTally(key=key)
    for tally in (by_page, one_by_one):
        for row in rows:
            tally.expect(row.doc_id, payload_values(row))
    for page in _pages(chunks, page_size):
        by_page.add_page(page)
    for point_id, doc_id, values in chunks:
        one_by_one.add(point_id, doc_id, values)

    for tally in (by_page, one_by_one):
        assert tally.chunks == len(chunks)
        for doc_id in [*IDS, None, "hb:ghost", "hb:never"]:
            assert (doc_id in tally) == (doc_id in aggregates), doc_id
            assert tally.get(doc_id) == aggregates.get(doc_id), doc_id
            assert (doc_id in tally.registered) == any(r.doc_id == doc_id for r in rows)
            assert sorted(tally.mismatching_ids(doc_id) or []) == sorted(ids.get(doc_id, []))
        registered = {row.doc_id for row in rows}
        assert dict(tally.orphans()) == {d: a for d, a in aggregates.items() if d not in registered}
        assert len(tally.registered) == len(rows)


@settings(max_examples=300, deadline=None)
@given(worlds(), st.data(), st.integers(min_value=1, max_value=9))
def test_a_split_stores_tally_counts_each_documents_archived_chunks_and_misplaced_ones(
    world: tuple[list[Document], list[tuple[Any, Any, tuple[Any, ...]]]],
    data: st.DataObject,
    page_size: int,
) -> None:
    """A split store's scan reads its main collection, then its archive (pages flagged): per
    document the tally counts the chunks it saw in the archive, and names a registered one
    misplaced when a chunk of it is in the other collection than its row's state puts it
    in (``kept_in_main``), whatever that chunk's own payload says."""
    rows, chunks = world
    archived = [data.draw(st.booleans(), label=f"chunk {n} archived") for n in range(len(chunks))]
    tally = ChunkTally(split=True)
    for row in rows:
        tally.expect(row.doc_id, payload_values(row))
    for flag in (False, True):
        for page in _pages(
            [c for c, a in zip(chunks, archived, strict=True) if a == flag], page_size
        ):
            page.archived = flag
            tally.add_page(page)

    by_id = {row.doc_id: row for row in rows}
    counted: dict[Any, list[bool]] = {}
    for (_p, doc_id, _values), flag in zip(chunks, archived, strict=True):
        counted.setdefault(doc_id_of(doc_id), []).append(flag)  # (7 names none)
    misplaced = set()
    for doc_id, flags in counted.items():
        aggregate = tally.get(doc_id)
        assert aggregate is not None
        assert aggregate.archived == sum(flags), doc_id
        row = by_id.get(doc_id) if isinstance(doc_id, str) else None
        if row is not None and any(f == kept_in_main(row.version_state) for f in flags):
            misplaced.add(doc_id)
    assert sorted(tally.misplaced_ids()) == sorted(misplaced)
    assert ChunkTally().misplaced_ids() == []  # (one collection: nothing to place)


def test_a_sharded_run_leaves_other_shards_orphans_alone() -> None:
    tally = ChunkTally()
    tally.expect("hb:doc-0", payload_values(_row("hb:doc-0", 0)))
    mine = payload_values(_row("hb:x", 0))  # family hb:fam-0
    theirs = payload_values(_row("hb:y", 1))  # family hb:fam-1
    page = _pages([("p1", "hb:x", mine), ("p2", "hb:y", theirs), ("p3", "hb:doc-0", mine)], 5)
    tally.add_page(page[0], owns=lambda values: values[0] == "hb:fam-0")

    assert [doc for doc, _a in tally.orphans()] == ["hb:x"]
    assert tally.chunks == 3
    assert tally["hb:doc-0"].count == 1


def test_ids_are_dropped_past_keep_ids_and_the_tally_says_so() -> None:
    tally = ChunkTally(keep_ids=2)
    row = _row("hb:doc-0", 0)
    tally.expect(row.doc_id, payload_values(row))
    drifted = dict(zip(MANAGED_KEYS, payload_values(row), strict=True)) | {"doc_class": "faq"}
    values = tuple(drifted.values())
    tally.add_page(_pages([(f"p{n}", row.doc_id, values) for n in range(3)], 10)[0])

    assert tally.mismatching_ids(row.doc_id) is None
    assert not tally.ids_complete
    assert tally[row.doc_id].drifted == 3


@settings(max_examples=2000, deadline=None)
@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.one_of(st.none(), st.integers(min_value=-23 * 60, max_value=23 * 60)),
)
def test_payload_dates_are_spelt_as_rfc3339_utc(instant: datetime, offset: int | None) -> None:
    """The date text every payload carries (and the expected fingerprints hash): UTC, "Z",
    a four-digit year, microseconds only when there are some; a naive instant is UTC."""
    if offset is not None:
        instant = instant.replace(tzinfo=timezone(timedelta(minutes=offset)))
    at = utc(instant)
    spelt = f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:"
    spelt += f"{at.second:02d}" + (f".{at.microsecond:06d}" if at.microsecond else "") + "Z"
    assert rfc3339(instant) == spelt
    assert parse_instant(spelt) == at


_ZONES = [None, UTC, timezone(timedelta(hours=-5)), timezone(timedelta(minutes=330))]
_ZONES += [ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin")]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
            st.sampled_from(_ZONES),
            st.sampled_from([0, 1]),
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=6),
)
def test_instant_text_is_rfc3339_of_each_instant_whatever_it_remembers(
    instants: list[tuple[datetime, Any, int]], kept: int
) -> None:
    """The remembered text of an instant is ``rfc3339`` of it: for naive and aware values, the
    same instant in other zones, the two readings of a local time a daylight-saving change
    repeats (``fold``), repeats, and a memory small enough to be emptied mid-way."""
    values = [at.replace(tzinfo=zone, fold=fold) for at, zone, fold in instants]
    # The hour a zone's clocks go back, read both ways: equal as keys, an hour apart.
    autumn = datetime(2024, 11, 3, 1, 30, tzinfo=ZoneInfo("America/New_York"))
    values += [autumn, autumn.replace(fold=1), autumn.astimezone(UTC)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(payload_module, "_TEXTS_KEPT", kept)
        patch.setattr(payload_module, "_TEXTS", {})
        for value in values + values[::-1]:
            assert instant_text(value) == rfc3339(value)
            assert len(payload_module._TEXTS) <= kept
        # What it remembers are UTC instants, each under its own text.
        assert all(
            at.tzinfo is UTC and text == rfc3339(at) for at, text in payload_module._TEXTS.items()
        )


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.none(), st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31))
    ),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    st.sampled_from(list(VersionState)),
    st.integers(min_value=0, max_value=10**6),
    st.booleans(),
)
def test_what_payload_for_writes_is_already_normal(
    start: datetime | None, end: datetime, state: VersionState, version: int, quarantined: bool
) -> None:
    """The expected fingerprint is taken from ``payload_values`` as written, unnormalised:
    normalising what ``payload_for`` writes changes nothing, so a chunk written from its row
    matches on the fast path."""
    doc = dataclasses.replace(
        _row("hb:doc-1", 1),
        effective_from=start,
        effective_to=end,
        version_state=state,
        doc_version=version,
        quarantined=quarantined,
    )
    assert variant_values(expected_variant(doc)) == payload_values(doc)


def test_a_spelling_remembered_on_a_drifted_document_is_told_apart_by_its_types() -> None:
    # A drifted document's stale spellings are normalised once and remembered. ``True`` and
    # ``1.0`` are equal values (and so are ``0`` and ``False``), but only ``1.0`` means the
    # row's version 1: each is judged on its own.
    row = _row("hb:doc-0", 0)  # version 1, current, not quarantined
    good = dict(zip(MANAGED_KEYS, payload_values(row), strict=True))
    spellings = [
        {"doc_version": True},
        {"doc_version": 1.0},
        {"doc_version": True},
        {"quarantined": 0},
        {"quarantined": False},
        {"quarantined": 0},
    ]
    chunks = [
        (f"p{n}", row.doc_id, tuple({**good, **changed}.get(k) for k in MANAGED_KEYS))
        for n, changed in enumerate(spellings)
    ]
    tally = ChunkTally()
    tally.expect(row.doc_id, payload_values(row))
    for page in _pages(chunks, 2):
        tally.add_page(page)

    aggregate = tally.get(row.doc_id)
    assert aggregate is not None
    assert (aggregate.count, aggregate.matching) == (6, 2)
    assert tally.mismatching_ids(row.doc_id) == ["p0", "p2", "p3", "p5"]


def test_the_values_the_scan_read_are_kept_beside_each_id_one_tuple_a_spelling() -> None:
    """Issue 38: the applier writes by these ids with no re-read, the audit's *before* taken
    from these values: a ``None`` the scan read is an absent key; chunks spelt alike share one
    tuple (the applier judges each tuple once); past ``keep_ids`` nothing is kept."""
    row = _row("hb:doc-0", 0)
    stale = (*payload_values(row)[:2], "superseded", *payload_values(row)[3:])
    tally = ChunkTally(keep_ids=3)
    tally.expect(row.doc_id, payload_values(row))
    for page in _pages([(f"p{n}", row.doc_id, stale) for n in range(3)], 2):
        tally.add_page(page)
    scanned = tally.scanned(row.doc_id)
    assert scanned is not None
    ids, values = scanned
    assert ids == ["p0", "p1", "p2"]
    assert values[0] is values[1] is values[2]
    reason = MANAGED_KEYS.index("quarantine_reason")
    assert values[0][reason] is ABSENT
    assert values[0][2] == "superseded"
    tally.add_page(next(iter(_pages([("p3", row.doc_id, stale)], 1))))
    assert tally.scanned(row.doc_id) is None  # (more than keep_ids: the filter instead)


# -- the text and the count of a document's chunks ----------------------------------------

HASHES = [None, "sha256:a", "sha256:b", "sha256:c"]


@settings(max_examples=150)
@given(
    rows=st.dictionaries(
        st.sampled_from(IDS[:6]),
        st.tuples(st.sampled_from(HASHES), st.integers(0, 4)),
        max_size=6,
    ),
    chunks=st.lists(
        st.tuples(st.sampled_from([*IDS[:7], None]), st.sampled_from(HASHES)), max_size=24
    ),
    page=st.integers(1, 7),
    paged=st.booleans(),
)
def test_stale_and_missing_chunks_are_what_a_plain_count_says(
    rows: dict[str, tuple[str | None, int]],
    chunks: list[tuple[str | None, str | None]],
    page: int,
    paged: bool,
) -> None:
    """A chunk is stale when both it and its row have a hash and they differ (an adopted
    collection's chunks without ``content_hash`` never are); a row is short when the scan
    found fewer chunks than it says; ``shortfall`` sums what the rows say against what they
    have."""
    tally = ChunkTally()
    documents = {doc_id: _row(doc_id, n) for n, doc_id in enumerate(rows)}
    tally.expect_rows(
        [(doc_id, *payload_values(row)) for doc_id, row in documents.items()],
        contents=[rows[d][0] for d in documents],
        counts=[rows[d][1] for d in documents],
    )
    values = {d: payload_values(r) for d, r in documents.items()}
    blank = tuple(None for _ in MANAGED_KEYS)
    scanned = [(d, values.get(d, blank), h) for d, h in chunks]
    if paged:
        for start in range(0, len(scanned), page):
            part = scanned[start : start + page]
            tally.add_page(
                ManagedPage(
                    [(d, *v) for d, v, _h in part],
                    lambda i, s=start: f"p{s + i}",
                    [h for _d, _v, h in part],
                )
            )
    else:
        for n, (doc_id, vals, content) in enumerate(scanned):
            tally.add(f"p{n}", doc_id, vals, content)

    counted = {d: sum(1 for c, _h in chunks if c == d) for d in rows}
    stale = {
        d: sum(1 for c, h in chunks if c == d and None not in (h, rows[d][0]) and h != rows[d][0])
        for d in rows
    }
    for doc_id in rows:
        aggregate = tally.get(doc_id)
        assert (aggregate.stale if aggregate else 0) == stale[doc_id]
        assert tally.is_short(doc_id) == (counted[doc_id] < rows[doc_id][1])
    assert set(tally.stale_ids()) == {d for d, n in stale.items() if n}
    assert tally.any_short == any(counted[d] < rows[d][1] for d in rows)
    said = {d: want for d, (_h, want) in rows.items() if want}
    assert tally.shortfall() == (
        sum(said.values()),
        sum(min(counted[d], want) for d, want in said.items()),
    )
