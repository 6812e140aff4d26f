"""The shared record model (connectors.records): the one date parser every connector reads
dates with, and a flat record's fields read as a ``Record``."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from connectors.records import parse_date, read_date, record_from
from reconciler.model import VersionState


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-03-01", datetime(2024, 3, 1, tzinfo=UTC)),
        (" 2024-03-01 ", datetime(2024, 3, 1, tzinfo=UTC)),
        ("2024-03-01T10:30:00Z", datetime(2024, 3, 1, 10, 30, tzinfo=UTC)),
        ("2024-03-01T12:30:00+02:00", datetime(2024, 3, 1, 10, 30, tzinfo=UTC)),
        ("2024-03-01T10:30:00", datetime(2024, 3, 1, 10, 30, tzinfo=UTC)),  # naive is UTC
        (date(2024, 3, 1), datetime(2024, 3, 1, tzinfo=UTC)),
        (datetime(2024, 3, 1, 10, 30), datetime(2024, 3, 1, 10, 30, tzinfo=UTC)),
        (
            datetime(2024, 3, 1, 12, 30, tzinfo=timezone(timedelta(hours=2))),
            datetime(2024, 3, 1, 10, 30, tzinfo=UTC),
        ),
    ],
)
def test_parse_date_reads_dates_and_instants_as_utc(value: object, expected: datetime) -> None:
    parsed = parse_date(value)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "value", ["", "  ", "tomorrow", "2024-13-01", "01/03/2024", 20240301, None]
)
def test_parse_date_refuses_anything_else(value: object) -> None:
    with pytest.raises(ValueError, match="not a date or an ISO 8601 date-time"):
        parse_date(value)


def test_read_date_takes_an_invalid_date_as_absent_with_a_message() -> None:
    invalid: list[tuple[str, str]] = []
    assert read_date(None, "effective_to", invalid) is None
    assert invalid == []
    assert read_date("soon", "property valid_from", invalid, field="effective_from") is None
    assert invalid == [
        (
            "effective_from",
            "property valid_from must be a date or an ISO 8601 date-time, got 'soon'; "
            "taken as absent",
        )
    ]


def test_record_from_reads_a_flat_record() -> None:
    record = record_from(
        {
            "id": 7,
            "family": "SEC",
            "version": "2",
            "status": "Approved",
            "effective_from": "2024-01-01",
            "effective_to": "later",
            "superseded_by": "8",
        },
        status_map={"approved": VersionState.CURRENT},
    )
    assert (record.key, record.family, record.version, record.state, record.successor) == (
        "7",
        "SEC",
        2,
        VersionState.CURRENT,
        "8",
    )
    assert record.effective_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert record.effective_to is None
    assert [name for name, _ in record.invalid] == ["effective_to"]


def test_a_date_its_offset_takes_past_9999_says_so() -> None:
    """Issue 24: such a date read as 'not a date', which sent people looking for a typo."""
    invalid: list[tuple[str, str]] = []
    assert read_date("9999-12-31T23:00:00-05:00", "effective_to", invalid) is None
    assert invalid == [
        (
            "effective_to",
            "effective_to '9999-12-31T23:00:00-05:00' lies outside the years 1-9999 in UTC; "
            "taken as absent",
        )
    ]
    assert str(parse_date("9999-12-31T23:00:00+05:00")) == "9999-12-31 18:00:00+00:00"
