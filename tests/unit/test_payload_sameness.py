"""Whether two payloads are the same is decided in one module (``reconciler.payload``): the
check's scan, the planner, the applier and the trail's replay call it. Each decision it took
over is held here to the definition it replaced, kept below as it was, on random payloads:
the checks' findings and the repair writes cannot have changed with the move."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import hypothesis_kit
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.model import MANAGED_KEYS, parse_instant
from reconciler.payload import (
    fingerprint,
    holds,
    instant_text,
    normalize,
    same_payload,
    same_value,
    same_variant,
)
from reconciler.planning import PayloadTarget, needs_write
from reconciler.writing.differs import changed_keys

# -- the definitions the one module replaced, as they were --------------------------------


def old_normalize(payload: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``check_inputs.normalize``."""
    items: list[tuple[str, Any]] = []
    for key in MANAGED_KEYS:
        value = payload.get(key)
        if key in ("effective_from", "effective_to") and isinstance(value, str):
            with contextlib.suppress(ValueError, OverflowError):
                value = instant_text(parse_instant(value))
        elif key == "doc_version" and isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, list):
            value = tuple(value)
        items.append((key, value))
    return tuple(items)


def old_same_variant(found: Any, expected: Any) -> bool:
    """``check_inputs.same_variant``."""
    return found == expected and all(
        type(a) is type(b) for (_ka, a), (_kb, b) in zip(found, expected, strict=True)
    )


def old_needs_write(current: Mapping[str, Any], payload: Mapping[str, Any], partial: bool) -> bool:
    """``planning.needs_write``."""
    if partial:
        return any(
            type(current.get(k)) is not type(v) or current.get(k) != v for k, v in payload.items()
        )
    return not old_same_variant(old_normalize(current), old_normalize(payload))


def old_holds(payload: Mapping[str, Any], key: str, value: Any) -> bool:
    """``writing.differs._holds``."""
    if value is None:
        return key not in payload
    if key not in payload:
        return False
    held = payload[key]
    return type(held) is type(value) and bool(held == value)


def old_same_payload(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """``trail.replay.same_payload`` (on its payloads as dicts)."""
    return old_same_variant(old_normalize(a), old_normalize(b))


# -- payloads that are often the same, spelt otherwise ------------------------------------

NAN = float("nan")
DATES = (
    "2024-01-01T00:00:00Z",
    "2024-01-01T00:00:00+00:00",
    "2024-01-01T01:00:00+01:00",
    "2024-01-01",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59+01:00",
    "not a date",
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 2, 0.0, 1.0, 2.5, NAN, "", "current", "superseded", *DATES]),
    st.integers(-3, 3),
    st.lists(st.sampled_from([0, 1, True, "a", NAN]), max_size=2),
)
payloads = st.dictionaries(st.sampled_from([*MANAGED_KEYS, "doc_id", "text"]), values)


def respelt(value: Any) -> Any:
    """The same meaning in another spelling (or another type of equal value)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return list(value)
    if value in DATES:
        return DATES[(DATES.index(value) + 1) % len(DATES)]
    return value


@st.composite
def pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two payloads: unrelated, or the second the first with some keys re-spelt, removed or
    set to None."""
    first = draw(payloads)
    if draw(st.booleans()):
        return first, draw(payloads)
    second = dict(first)
    for key in draw(st.lists(st.sampled_from([*MANAGED_KEYS, "doc_id"]), max_size=3)):
        change = draw(st.sampled_from(["respell", "drop", "none"]))
        if change == "respell" and key in second:
            second[key] = respelt(second[key])
        elif change == "drop":
            second.pop(key, None)
        else:
            second[key] = None
    return first, second


@settings(max_examples=hypothesis_kit.examples(150))
@given(pairs())
@example(({"quarantined": 0}, {"quarantined": False}))
@example(({"doc_version": 1.0}, {"doc_version": 1}))
@example(({"effective_from": DATES[0]}, {"effective_from": DATES[2]}))
@example(({"doc_version": NAN}, {"doc_version": NAN}))
@example(({"quarantine_reason": None}, {}))
def test_every_decision_is_the_one_it_replaced(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    current, written = pair
    assert repr(normalize(current)) == repr(old_normalize(current))
    assert same_payload(current, written) == old_same_payload(current, written)
    assert same_variant(normalize(current), normalize(written)) == old_same_variant(
        old_normalize(current), old_normalize(written)
    )
    for partial in (False, True):
        target = PayloadTarget("d", None, written, 1, ("payload/drift",), partial=partial)
        assert needs_write(current, target) == old_needs_write(current, written, partial)
    # (the applier's keys to send: ``holds`` spelt out inside it, the same answer)
    assert changed_keys(current, written) == frozenset(
        key for key, value in written.items() if not old_holds(current, key, value)
    )
    for key, value in written.items():
        assert holds(current, key, value) == old_holds(current, key, value)
        assert same_value(current.get(key), value) == (
            type(current.get(key)) is type(value) and bool(current.get(key) == value)
        )
    raw = tuple(current.get(key) for key in MANAGED_KEYS)
    assert fingerprint(("d", *raw), at=1) == old_fingerprint(("d", *raw), at=1)


def old_fingerprint(values: tuple[Any, ...], *, at: int = 0) -> int:
    """``check_inputs.fingerprint``."""
    version, quarantined = MANAGED_KEYS.index("doc_version"), MANAGED_KEYS.index("quarantined")
    if type(values[at + version]) is not int or type(values[at + quarantined]) is not bool:
        return -1
    try:
        return hash(values)
    except TypeError:
        return -1


def test_the_same_meaning_in_other_spellings_is_the_same_payload() -> None:
    """What the one definition says, in words: dates and an integral version may be spelt
    otherwise; a type may not (``0`` is not ``False``); an absent key is a ``None`` one."""
    row = {"doc_version": 2, "effective_from": DATES[0], "quarantined": False}
    assert same_payload(row, {**row, "doc_version": 2.0, "effective_from": DATES[2]})
    assert not same_payload(row, {**row, "quarantined": 0})
    assert same_payload({**row, "superseded_by": None}, row)
    assert holds(row, "superseded_by", None)
    assert not holds({**row, "superseded_by": None}, "superseded_by", None)
    assert not holds(row, "doc_version", 2.0)
