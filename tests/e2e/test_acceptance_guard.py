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
    assert (
        "REFUSED by the blast-radius guard (too much of what is served would change): 16 of 20 "
        "served families, 32 of 40 served chunks would be hidden, 0 families, 0 chunks revealed"
        in text
    )
    assert "Held back: hb:note00, hb:note01" in text

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


# -- issue 37: the guard weighs the served set ---------------------------------------------


def handbook(
    deploy: Deployment, *, notes: int = 15, source_extra: str = "", status: str = "current"
) -> list[str]:
    """``notes`` current notes in a family each, the first of two chunks, ingested clean."""
    deploy.configure(fraction=0.2, source_extra=source_extra)
    for n in range(notes):
        sections = [f"rule {n}"] + ([f"more of rule {n}"] if n == 0 else [])
        deploy.note(f"n{n:02d}", body(f"note {n}", *sections), id=f"n{n:02d}", status=status,
                    effective_from=day(-300 + n))  # fmt: skip
    deploy.init_ingest()
    assert deploy.json("check")[0] == 0
    return [f"hb:n{n:02d}" for n in range(notes)]


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_five_notes_superseded_by_five_new_ones_are_not_refused(deploy: Deployment) -> None:
    """The issue's handbook: a link joins two registered families, so each new note moves into
    its predecessor's family (a relabel, still served) and each old note is hidden. Only the
    hidden are weighed: 5 families, 6 chunks, at the floor; before, 10 of 15 families and 11
    of 16 chunks "changed" and the run was refused."""
    everything = handbook(deploy)
    for n in range(5):
        deploy.edit_front(f"n{n:02d}", status="superseded", superseded_by=f"n{n + 5:02d}")
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (0, False), data["guard"]
    guard = data["guard"]
    assert (guard["hidden_families"], guard["hidden_chunks"]) == (5, 6)
    assert (guard["relabelled_families"], guard["relabelled_chunks"]) == (5, 5)
    assert (guard["weighed_families"], guard["weighed_chunks"]) == (5, 6)
    assert (guard["changed_families"], guard["changed_chunks"]) == (10, 11)  # reported only
    assert (guard["revealed_families"], guard["unserved_families"]) == (0, 0)
    assert guard["hidden_documents"] == everything[:5]
    assert "over" not in guard
    assert deploy.served() == set(everything[5:])
    assert deploy.rows()["hb:n05"]["doc_family_id"] == "hb:n00"


def test_a_typo_that_retires_everything_is_still_refused(deploy: Deployment) -> None:
    """A status_map that maps the source's word for "in force" to ``retired``: every family
    hidden, nothing written, the corpus served as it was."""
    mapped = '[sources.options.status_map]\nActive = "current"'
    everything = handbook(deploy, notes=30, source_extra=mapped, status="Active")
    deploy.configure(fraction=0.2, source_extra=mapped.replace('"current"', '"retired"'))
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True)
    assert data["guard"]["over"] == ["changed"]
    assert (data["guard"]["hidden_families"], data["guard"]["held"]) == (30, everything)
    assert writes_zero(data)
    assert deploy.served() == set(everything)


def test_an_outage_is_still_refused(deploy: Deployment) -> None:
    everything = handbook(deploy, notes=30)
    for note in deploy.vault.glob("*.md"):
        note.unlink()
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True)
    assert "source_empty" in data["guard"]["tripped"]
    assert writes_zero(data)
    assert deploy.served() == set(everything)


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_a_refused_run_writes_what_hides_nothing(deploy: Deployment) -> None:
    """20 of 30 notes retired at once (refused), beside two families joined ahead of their
    successor's start and a metadata change: the refused run writes the relabels, audited,
    holds back exactly the 20 it would hide, and a second run finds only those left."""
    everything = handbook(deploy, notes=30)
    deploy.note("n30", body("note 30", "rule 30"), id="n30", status="current",
                effective_from=day(10))  # fmt: skip
    deploy.note("n31", body("note 31", "rule 31"), id="n31", status="current",
                effective_from=day(20))  # fmt: skip
    assert deploy.json("ingest")[0] == 0
    assert deploy.json("run")[0] == 0  # the two new notes: pending, nothing hidden
    for n in range(20):
        deploy.edit_front(f"n{n:02d}", status="retired")
    deploy.edit_front("n25", superseded_by="n30")  # joins n30's family, closes in 10 days
    deploy.edit_front("n26", superseded_by="n31")
    deploy.edit_front("n27", doc_class="policy")
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True)
    guard = data["guard"]
    assert guard["held"] == everything[:20] == guard["hidden_documents"]
    # n25, n26 (their window ends), n27 (its class), n30 and n31 (their family)
    assert guard["relabelled_families"] == 5
    assert data["writes"]["table"] == 5  # n25, n26, n27, and n30, n31 joining their families
    rows = deploy.rows()
    assert rows["hb:n30"]["doc_family_id"] == rows["hb:n25"]["doc_family_id"]
    assert str(rows["hb:n25"]["effective_to"].date()) == day(10)
    assert rows["hb:n27"]["doc_class"] == "policy"
    assert {rows[d]["version_state"] for d in everything[:20]} == {"current"}
    assert deploy.served() == set(everything)
    with deploy.stores() as opened:
        run = opened.table.get_run(data["run_id"])
    assert run is not None
    assert run.status == "refused"
    text = deploy.cli("run").output
    assert "Held back: hb:n00, hb:n01" in text
    assert "Nothing was written." in text
    code, again = deploy.json("run")
    assert (code, again["guard"]["held"], again["plan"]["rows"] != []) == (3, everything[:20], True)
    assert {r["doc_id"] for r in again["plan"]["rows"]} == set(everything[:20])
    assert writes_zero(again)
    assert deploy.json("audit", "verify")[0] == 0
    # What the refused run wrote is audited like any run's: its rollback undoes it.
    code, _rolled = deploy.json("rollback", data["run_id"])
    assert code == 0
    rows = deploy.rows()
    assert rows["hb:n27"]["doc_class"] is None
    assert rows["hb:n30"]["doc_family_id"] == "hb:n30"
    assert deploy.served() == set(everything)


def test_a_source_that_moved_is_caught_up_by_ingest_then_run(deploy: Deployment) -> None:
    """16 of 20 notes edited in place, 2 retired, 1 new: ``ingest`` re-embeds the edited ones
    (their state left to the reconciler) and registers the new one, and one ``run`` (no
    ``--force``) brings the rest: no quarantine waits for a second ingest."""
    everything = edited_vault(deploy, notes=20, edited=16)
    deploy.edit_front("note18", status="retired")
    deploy.edit_front("note19", status="retired")
    deploy.note("note20", body("note 20", "text of 20"), id="note20", status="current")
    code, ingested = deploy.json("ingest")
    assert code == 0
    assert (ingested["totals"]["reingested"], ingested["totals"]["ingested"]) == (16, 1)
    code, caught_up = deploy.json("run")
    assert (code, caught_up["refused"]) == (0, False), caught_up["guard"]
    assert caught_up["guard"]["hidden_documents"] == ["hb:note18", "hb:note19"]
    assert deploy.served() == {*everything[:18], "hb:note20"}
    texts = [str(p) for p in deploy.points().of("hb:note00").values()]
    assert any("new text of 0" in text for text in texts)
    code, clean = deploy.json("check")
    assert (code, clean["findings"]) == (0, [])
    code, again = deploy.json("ingest")
    assert (code, again["totals"]["reingested"], again["totals"]["ingested"]) == (0, 0, 0)
