"""Issue 38: ``managed_values`` spells out ``instant_text``'s look-up and reads a state's text
from a table; the promise is the plain definition's result, value for value and type for
type, whatever ``instant_text`` remembers (naive and aware instants, other zones, the two
readings of a repeated local hour, states as stored, as states, or unknown)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import payload as payload_module
from reconciler.model import OPEN_END, OPEN_START, VersionState, rfc3339, state_of
from reconciler.payload import managed_values

_ZONES = [None, UTC, timezone(timedelta(hours=-5)), ZoneInfo("America/New_York")]
_instants = st.one_of(
    st.none(),
    st.builds(
        lambda at, zone, fold: at.replace(tzinfo=zone, fold=fold),
        st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
        st.sampled_from(_ZONES),
        st.sampled_from([0, 1]),
    ),
)


def plainly(
    family: Any, version: Any, state: Any, successor: Any, start: Any, end: Any, *rest: Any
) -> tuple[Any, ...]:
    """``managed_values`` as it was defined before issue 38's round 7."""
    doc_class, quarantined, reason = rest
    return (
        family,
        int(version),
        str(state_of(state)),
        successor,
        rfc3339(start or OPEN_START),
        rfc3339(end or OPEN_END),
        doc_class,
        bool(quarantined),
        reason,
    )


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([*VersionState, *(s.value for s in VersionState), "", "Current"]),
            _instants,
            _instants,
            st.sampled_from([0, 1, True, 3]),
        ),
        min_size=1,
        max_size=12,
    ),
    kept=st.integers(min_value=1, max_value=4),
)
def test_managed_values_is_the_plain_definition(
    rows: list[tuple[Any, datetime | None, datetime | None, Any]], kept: int
) -> None:
    autumn = datetime(2024, 11, 3, 1, 30, tzinfo=ZoneInfo("America/New_York"))
    rows += [
        ("current", autumn.astimezone(UTC), autumn, 1),
        ("current", autumn.replace(fold=1), None, 1),
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(payload_module, "_TEXTS_KEPT", kept)
        patch.setattr(payload_module, "_TEXTS", {})
        for state, start, end, version in rows + rows[::-1]:
            values = ("f", version, state, None, start, end, "policy", version == 1, None)
            got, want = managed_values(*values), plainly(*values)
            assert got == want
            assert list(map(type, got)) == list(map(type, want))


@settings(max_examples=500, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_the_text_of_a_utc_instant_is_rfc3339(at: datetime) -> None:
    """``instant_text`` spells a UTC instant from its fields, not through ``isoformat``."""
    instant = at.replace(tzinfo=UTC)
    assert payload_module._utc_text(instant) == rfc3339(instant)
