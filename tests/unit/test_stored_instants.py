"""Issue 38: the check's scan reads the SQLite table's instants as the texts stored, never
parsed. The promises it rests on: every instant's stored text is told as one
(``is_stored_form``), two stored texts compare as their instants do, and the payload's text
cut from one is ``rfc3339`` of its instant; any other spelling a writer left in the table is
read as the table reads it back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import (
    OPEN_END,
    OPEN_START,
    is_stored_form,
    rfc3339,
    stored_form,
    stored_instant,
)
from reconciler.payload import CUT_TEXTS, instant_text, managed_values, stored_text

instants = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
zones = st.builds(
    timezone, st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: timedelta(minutes=m))
)


@given(instants, instants)
def test_stored_texts_compare_as_their_instants(a: datetime, b: datetime) -> None:
    sa, sb = stored_form(a), stored_form(b)
    assert is_stored_form(sa)
    assert is_stored_form(sb)
    assert len(sa) == len(sb) == 26
    assert (sa < sb, sa == sb, sa > sb) == (a < b, a == b, a > b)
    assert stored_instant(sa) == a


@given(instants, zones)
def test_the_payloads_text_cut_from_a_stored_text_is_its_instants(
    at: datetime, zone: timezone
) -> None:
    """Whatever zone the instant was given in, and whether the cut is remembered or not."""
    text = stored_form(at.astimezone(zone))
    assert stored_text(text) == rfc3339(at)
    assert stored_text(text) == rfc3339(at)  # (the second time, from memory)
    assert instant_text(text) == instant_text(at) == rfc3339(at)
    assert text in CUT_TEXTS  # (remembered as one in the stored form)


@given(instants, zones, st.data())
def test_any_other_spelling_is_read_as_the_table_reads_it(
    at: datetime, zone: timezone, data: st.DataObject
) -> None:
    local = at.astimezone(zone)
    spellings = [
        local.isoformat(),
        at.replace(tzinfo=None).isoformat(),
        at.replace(tzinfo=None).isoformat(" "),
        at.isoformat(" ", "milliseconds"),
        f"{at.replace(tzinfo=None).isoformat(' ', 'microseconds')}Z",
    ]
    text = data.draw(st.sampled_from(spellings))
    if text == stored_form(at):  # (the stored form itself, for an instant of no offset)
        return
    assert not is_stored_form(text)
    assert stored_text(text) == rfc3339(stored_instant(text))
    assert text not in CUT_TEXTS  # (never remembered as one)


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-02",
        "2026-01-02 03:04:05",
        "2026-01-02T03:04:05.000006",
        "2026-01-02 03:04:05.00006Z",
        "2026-13-02 03:04:05.000006",
        "2026-01-02 03:04:05.000006 ",
        "xxxx-xx-xx xx:xx:xx.xxxxxx",
        "",
    ],
)
def test_texts_not_in_the_stored_form(text: str) -> None:
    assert not is_stored_form(text)


def test_a_text_that_is_no_instant_is_an_error_as_when_the_table_reads_it() -> None:
    with pytest.raises(ValueError, match="isoformat"):
        stored_text("not an instant")


@given(instants, instants, st.booleans())
def test_managed_values_of_stored_texts_are_those_of_the_instants(
    start: datetime, end: datetime, open_start: bool
) -> None:
    """The scan's ``managed_values`` of a row read as stored texts is that of the row read
    as ``datetime`` values (and the open window's ends are stored as any instant is)."""
    first = None if open_start else start
    fields = ("fam", 2, "current", None)
    rest = ("policy", False, None)
    as_read = managed_values(*fields, first, end, *rest)
    stored = managed_values(
        *fields, None if first is None else stored_form(first), stored_form(end), *rest
    )
    assert stored == as_read
    assert stored_text(stored_form(OPEN_START)) == rfc3339(OPEN_START)
    assert stored_text(stored_form(OPEN_END)) == rfc3339(OPEN_END)
