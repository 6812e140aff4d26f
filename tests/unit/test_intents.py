"""The audit's intent/confirm protocol, once (``writing.intents``): intents and the
confirmation of the batch before go in one commit; a confirmation names the last intent it
covers and closes them."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.model import AuditEntry, AuditKind
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
