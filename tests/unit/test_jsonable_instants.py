"""``jsonable`` remembers the text of the UTC instants it formats (``encoding._utc_text``): the
text it gives an instant is ``rfc3339``'s whatever it saw before, whatever the instant's zone
(naive, UTC, an offset, a zone with daylight saving where two local times differ only in
``fold``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import jsonable, rfc3339

_ZONES = st.sampled_from(
    [None, UTC, timezone(timedelta(hours=-5)), ZoneInfo("Europe/Berlin"), ZoneInfo("UTC")]
)
_INSTANTS = st.builds(
    lambda at, zone, fold: at.replace(tzinfo=zone, fold=fold),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    _ZONES,
    st.integers(0, 1),
)


@given(st.lists(_INSTANTS, max_size=30), st.data())
def test_an_instant_is_written_as_rfc3339_writes_it_whatever_was_written_before(
    instants: list[datetime], data: st.DataObject
) -> None:
    again = data.draw(st.permutations(instants))
    for value in [*instants, *again]:
        assert jsonable(value) == rfc3339(value)
        assert jsonable({"at": [value]}) == {"at": [rfc3339(value)]}


def test_two_local_times_that_differ_only_in_fold_are_written_apart() -> None:
    first = datetime(2026, 10, 25, 2, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    second = first.replace(fold=1)
    assert jsonable([first, second]) == [rfc3339(first), rfc3339(second)]
    assert rfc3339(first) != rfc3339(second)
    same_instant = second.astimezone(UTC)
    assert jsonable(same_instant) == rfc3339(second)
