"""Acceptance: the blast-radius guard weighs direction. Hiding what is served counts against
``max_changed_fraction``; serving again what a forced run quarantined, once its cause is gone,
does not — so a cron deployment recovers from a refused run without a second ``--force``
(issue 27, item 6); and a fresh ingest leaves its first run nothing the guard would weigh
(issue 24, item 12)."""

from __future__ import annotations

import pytest
from acceptance_kit import Deployment, body, day, writes_zero


def edited_vault(deploy: Deployment, notes: int, edited: int) -> list[str]:
    """``notes`` current notes ingested clean, then ``edited`` of them edited in place."""
    deploy.configure(fraction=0.2)
    for n in range(notes):
        deploy.note(
            f"note{n:02d}",
            body(f"note {n}", f"text of {n}", f"more of {n}"),
            id=f"note{n:02d}",
            status="current",
        )
    deploy.init_ingest()
    assert deploy.json("check")[0] == 0
    for n in range(edited):
        path = deploy.vault / f"note{n:02d}.md"
        path.write_text(path.read_text(encoding="utf-8").replace("text of", "new text of"))
    return [f"hb:note{n:02d}" for n in range(notes)]


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_a_forced_run_is_recovered_from_without_forcing_again(deploy: Deployment) -> None:
    everything = edited_vault(deploy, notes=20, edited=16)
    assert deploy.served() == set(everything)

    code, refused = deploy.json("run")
    assert (code, refused["refused"]) == (3, True)
    assert refused["guard"]["over"] == ["changed"]
    assert refused["guard"]["hiding_families"] == 16
    text = deploy.cli("run").output
    assert "REFUSED by the blast-radius guard (too much would change): 16 of 20 families" in text
    assert "16 families, 32 chunks hiding what is served" in text

    code, forced = deploy.json("run", "--force")
    assert (code, forced["forced"]) == (0, True)
    assert deploy.served() == set(everything[16:])  # the edited ones wait for their re-ingest

    code, ingested = deploy.json("ingest")
    assert (code, ingested["totals"]["reingested"]) == (0, 16)
    code, recovered = deploy.json("run")  # cron: no --force
    assert (code, recovered["refused"]) == (0, False), recovered["guard"]
    guard = recovered["guard"]
    assert (guard["changed_families"], guard["restoring_families"]) == (0, 16)
    assert (guard["restoring_chunks"], recovered["writes"]["points"]) == (32, 32)
    assert "over" not in guard
    assert deploy.served() == set(everything)
    code, clean = deploy.json("check")
    assert (code, clean["findings"]) == (0, [])


def test_restores_have_their_own_limit(deploy: Deployment) -> None:
    edited_vault(deploy, notes=20, edited=16)
    assert deploy.json("run", "--force")[0] == 0
    assert deploy.json("ingest")[0] == 0
    deploy.config.write_text(
        deploy.config.read_text(encoding="utf-8") + "max_restored_fraction = 0.5\n",
        encoding="utf-8",
    )
    code, refused = deploy.json("run")
    assert (code, refused["refused"]) == (3, True)
    assert refused["guard"]["over"] == ["restored"]
    assert {f["actual"]["direction"] for f in refused["findings"] if f["check"] == "guard"} == {
        "restored"
    }
    assert writes_zero(refused)
    text = deploy.cli("run").output
    assert "REFUSED by the blast-radius guard (too many quarantines would be lifted)" in text
    assert "16 of 20 families, 32 of 40 chunks would be served again" in text
    assert "(max_restored_fraction 50%)" in text


def test_a_fresh_ingest_of_scheduled_successors_leaves_the_first_run_nothing_to_weigh(
    deploy: Deployment,
) -> None:
    """12 of 20 families have a successor that comes into force in ten days: the ingest closes
    each predecessor's window at its successor's start, as the first check would."""
    deploy.configure(fraction=0.2)
    for n in range(20):
        deploy.note(f"f{n:02d}-v1", id=f"f{n:02d}-v1", family=f"f{n:02d}", version="1",
                    status="current", effective_from=day(-100))  # fmt: skip
        if n < 12:
            deploy.note(f"f{n:02d}-v2", id=f"f{n:02d}-v2", family=f"f{n:02d}", version="2",
                        status="current", effective_from=day(10))  # fmt: skip
    deploy.init_ingest()
    code, checked = deploy.json("check")
    assert (code, checked["findings"]) == (0, [])
    code, first = deploy.json("run")
    assert (code, first["refused"]) == (0, False), first["guard"]
    assert writes_zero(first)
    rows = deploy.rows()
    assert rows["hb:f00-v1"]["effective_to"] == rows["hb:f00-v2"]["effective_from"]
    assert deploy.served() == {f"hb:f{n:02d}-v1" for n in range(20)}
