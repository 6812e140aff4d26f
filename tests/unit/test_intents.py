"""The audit's intent/confirm protocol, once (``writing.intents``): intents and the
confirmation of the batch before go in one commit; a confirmation names the last intent it
covers and closes them."""

from __future__ import annotations

from datetime import UTC, datetime
from types import MappingProxyType, SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import AuditEntry, AuditKind, page_entry
from reconciler.planning import PayloadTarget
from reconciler.writing.applying import Applier
from reconciler.writing.differs import WriteGroup
from reconciler.writing.intents import IntentLog

AT = datetime(2026, 1, 1, tzinfo=UTC)


def intent(target: str) -> AuditEntry:
    return AuditEntry("r", AT, "a", "why", AuditKind.PAYLOAD, target, {"points": [1]}, {})


def test_a_batch_is_intended_with_the_confirmation_of_the_one_before() -> None:
    commits: list[list[AuditEntry]] = []

    def append(entries: list[AuditEntry]) -> str:
        commits.append(entries)
        return f"h{sum(len(c) for c in commits)}"

    log = IntentLog(append, run_id="r", actor="a", now=lambda: AT)
    assert log.intend([intent("d1"), intent("d2")]) == "h2"
    assert log.open == "h2"
    log.intend([intent("d3")], closing=[log.confirmation(points=2)])
    closing, third = commits[1]
    assert (closing.target_type, closing.reason, closing.target) == ("confirm", "confirm", "r")
    assert closing.after == {"through": "h2", "points": 2}
    assert third.target == "d3"
    assert log.open == "h4"
    copied = log.entry(AuditKind.MOVE_COPIED, log.open, points=1)
    assert (copied.target_type, copied.after, log.open) == (
        AuditKind.MOVE_COPIED,
        {"through": "h4", "points": 1},
        "h4",
    )  # an entry about the open intents keeps them open
    done = log.confirmation()
    assert (done.after, log.open, done.at, done.actor) == ({"through": "h4"}, None, AT, "a")


_TEXT = st.text(max_size=4)
_PAYLOADS = st.dictionaries(_TEXT, st.one_of(st.none(), st.integers(), _TEXT), max_size=3)
_GROUPS = st.lists(
    st.builds(
        lambda doc_id, reasons, payload, before, ids: WriteGroup(
            PayloadTarget(doc_id, None, MappingProxyType(payload), len(ids), reasons), before, ids
        ),
        st.one_of(st.none(), _TEXT),
        st.lists(_TEXT, min_size=1, max_size=2).map(tuple),
        _PAYLOADS,
        _PAYLOADS,
        st.lists(st.one_of(_TEXT, st.integers(min_value=0)), max_size=3),
    ),
    min_size=1,
    max_size=4,
)


@given(_GROUPS)
def test_a_batch_s_page_is_the_page_of_an_intent_a_group(groups: list[WriteGroup]) -> None:
    """``Applier._page`` (made at once) is ``page_entry`` of the intent each group had when
    they were made one by one: each document's target, reason, points, before, after."""
    applier = SimpleNamespace(run_id="r", actor="a", clock=SimpleNamespace(now=lambda: AT))
    intents = [
        AuditEntry(
            "r", AT, "a", ", ".join(g.target.reasons), AuditKind.PAYLOAD,
            g.target.doc_id or "(no doc_id)",
            {"points": list(g.point_ids), "payload": g.before},
            {"payload": dict(g.target.payload)},
        )
        for g in groups
    ]  # fmt: skip
    assert Applier._page(applier, groups) == page_entry(intents)  # type: ignore[arg-type]
