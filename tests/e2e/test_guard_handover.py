"""A handover already in force is a relabel, not a hide (review of the served-set guard).

A new version of many families at once, in force now (a note that ``replaces:`` the old one,
or the old one given ``superseded_by:``), is registered by ``ingest`` in its predecessor's
family: both are served until the run closes the old one. The family is served before the run
and after it, by a version that was in it before the run. The guard weighed each old version
as a hide (``row_direction``: served now, then not), so past the floor the run was refused,
its writes held back, and both versions of every family stayed served until someone approved
the plan; the same handover dated a day ahead was a relabel and written. What the guard exists
to refuse still is: a successor that is named but not ingested (its family would serve nothing)
and links that join registered families (what each successor's own family served is gone).

The same handover dated ahead, then brought forward (the successors' ``effective_from`` moved
to yesterday or today after they were ingested and scheduled) was weighed as revealing each
successor (``row_direction``: served now after, not now before, though it was served later),
so past the floor the run was refused; and its predecessors, handed over, were written while
the successors were held back, so those families served nothing. A successor served at no
instant before (a draft made current) is still a reveal, and what it takes over is held with
it."""

from __future__ import annotations

import pytest
from acceptance_kit import Deployment, body, current_notes, day, instant

OLD = 30
NEW = 12


def _thirty(deploy: Deployment) -> set[str]:
    """30 current notes, one family each, ingested and checked clean under a guard of 0.2."""
    current_notes(deploy, OLD)
    served = deploy.served()
    assert len(served) == OLD
    return served


def _new_versions(deploy: Deployment, link: str, start: str | None) -> None:
    """A new version of the first ``NEW`` families, from ``start``, linked by ``link``."""
    for n in range(NEW):
        linked = {"replaces": f"n{n:02d}"} if link == "replaces" else {}
        deploy.note(f"m{n:02d}", body(f"new note {n}", f"new rule {n}"), id=f"m{n:02d}",
                    status="current", effective_from=start, **linked)  # fmt: skip
        if link == "superseded_by":
            deploy.edit_front(f"n{n:02d}", superseded_by=f"m{n:02d}")


@pytest.mark.parametrize("command", ["run", "apply"])
@pytest.mark.parametrize(
    ("link", "start"),
    [("replaces", day(-1)), ("superseded_by", day(0)), ("replaces", None)],
    ids=["replaces-yesterday", "superseded_by-today", "replaces-undated"],
)
def test_a_handover_in_force_in_many_families_is_written(
    deploy: Deployment, command: str, link: str, start: str | None
) -> None:
    _thirty(deploy)
    _new_versions(deploy, link, start)
    assert deploy.json("ingest")[0] == 0
    code, data = deploy.json(command)
    assert (code, data["refused"]) == (0, False), data["guard"]
    guard = data["guard"]
    assert (guard["hidden_families"], guard["weighed_families"]) == (0, 0)
    assert guard["relabelled_families"] == NEW
    handed = {f"hb:n{n:02d}" for n in range(NEW)}
    new = {f"hb:m{n:02d}" for n in range(NEW)}
    kept = {f"hb:n{n:02d}" for n in range(NEW, OLD)}
    assert deploy.served() == new | kept
    rows = deploy.rows()
    assert {rows[d]["version_state"] for d in handed} == {"superseded"}
    # exactly one version of each family served
    families = [rows[d]["doc_family_id"] for d in deploy.served()]
    assert len(families) == len(set(families)) == OLD
    code, clean = deploy.json("check")
    assert code in (0, 2)
    assert not [f for f in clean["findings"] if f["severity"] == "critical"], clean["findings"]


def test_the_same_handover_dated_ahead_is_weighed_alike(deploy: Deployment) -> None:
    """Dated ahead, the handover closes each old window at the new start (a relabel), and the
    run at that start finds the state's bookkeeping only: never weighed, as in force now."""
    _thirty(deploy)
    _new_versions(deploy, "replaces", day(10))
    assert deploy.json("ingest")[0] == 0
    code, ahead = deploy.json("run")
    assert (code, ahead["guard"]["weighed_families"]) == (0, 0)
    code, then = deploy.json("run", "--now", instant(11))
    assert (code, then["refused"]) == (0, False), then["guard"]
    assert then["guard"]["weighed_families"] == 0


@pytest.mark.parametrize("moved_to", [day(-1), day(0)], ids=["yesterday", "today"])
def test_a_scheduled_handover_brought_forward_is_written(deploy: Deployment, moved_to: str) -> None:
    """Scheduled 10 days ahead, then brought forward: the same handover, made earlier; each
    family serves its old version before the run and its new one alone after it."""
    _thirty(deploy)
    _new_versions(deploy, "replaces", day(10))
    assert deploy.json("ingest")[0] == 0
    assert deploy.json("run")[0] == 0
    for n in range(NEW):
        deploy.edit_front(f"m{n:02d}", effective_from=moved_to)
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (0, False), data["guard"]
    guard = data["guard"]
    assert (guard["revealed_families"], guard["hidden_families"]) == (0, 0)
    assert guard["weighed_families"] == 0
    assert guard["relabelled_families"] == NEW
    new = {f"hb:m{n:02d}" for n in range(NEW)}
    kept = {f"hb:n{n:02d}" for n in range(NEW, OLD)}
    assert deploy.served() == new | kept
    rows = deploy.rows()
    families = [rows[d]["doc_family_id"] for d in deploy.served()]
    assert len(families) == len(set(families)) == OLD


def test_drafts_made_current_in_place_of_their_predecessors_are_still_weighed(
    deploy: Deployment,
) -> None:
    """Successors ingested as drafts (served at no instant) and then made current: a reveal
    of what was never served, refused past the floor; the predecessors they would take over
    from are held with them, so each family still serves its old version."""
    served = _thirty(deploy)
    for n in range(NEW):
        deploy.note(f"m{n:02d}", body(f"new note {n}", f"new rule {n}"), id=f"m{n:02d}",
                    status="draft", effective_from=day(-1), replaces=f"n{n:02d}")  # fmt: skip
    assert deploy.json("ingest")[0] == 0
    assert deploy.json("run")[0] == 0
    assert deploy.served() == served
    for n in range(NEW):
        deploy.edit_front(f"m{n:02d}", status="current")
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert data["guard"]["revealed_families"] == NEW
    assert deploy.served() == served


def test_successors_named_but_not_ingested_are_still_weighed(deploy: Deployment) -> None:
    """The old notes name successors in force that have no row yet (``run`` before
    ``ingest``): closing them now leaves their families serving nothing until the ingest."""
    served = _thirty(deploy)
    _new_versions(deploy, "superseded_by", day(-1))
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert data["guard"]["hidden_families"] == NEW
    assert deploy.served() == served


def test_links_joining_registered_families_are_still_weighed(deploy: Deployment) -> None:
    """A link field mapped from the wrong key chains every note to the next one: one family
    serving one note where 30 served. Each successor joins from a family of its own, so no
    hide is a handover, and the run is refused."""
    served = _thirty(deploy)
    for n in range(OLD - 1):
        deploy.edit_front(f"n{n:02d}", superseded_by=f"n{n + 1:02d}")
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert data["guard"]["hidden_families"] == OLD - 1
    assert deploy.served() == served
