"""Adversarial review of the served-set guard (issue 37): the fraction it weighs is of what
retrieval serves, so an archive of retired documents beside the served ones must not dilute
a change that hides every served document."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from acceptance_kit import Deployment, body, day, writes_zero

from reconciler.app.operations import engine_options, reconcile


def test_a_typo_that_retires_everything_is_refused_beside_an_archive(
    deploy: Deployment,
) -> None:
    """15 served notes beside 85 retired ones (an archive kept in the vault): a status_map
    typo retires all 15. Retrieval would serve nothing; the guard must refuse. (It weighed
    the 15 hidden families against all 100 families, 15% <= 20%, and wrote them.)"""
    mapped = '[sources.options.status_map]\nActive = "current"'
    deploy.configure(fraction=0.2, source_extra=mapped)
    for n in range(15):
        deploy.note(f"n{n:02d}", body(f"note {n}", f"rule {n}"), id=f"n{n:02d}",
                    status="Active", effective_from=day(-300 + n))  # fmt: skip
    for n in range(85):
        deploy.note(f"old{n:02d}", body(f"old {n}", f"old rule {n}"), id=f"old{n:02d}",
                    status="retired", effective_from=day(-900 + n))  # fmt: skip
    deploy.init_ingest()
    code, data = deploy.json("check")
    assert code == 0
    # (nothing past the floor: what is served is not counted, the scan's pass stays lean)
    assert data["guard"]["served_families"] is None
    served = deploy.served()
    assert served == {f"hb:n{n:02d}" for n in range(15)}
    deploy.configure(fraction=0.2, source_extra=mapped.replace('"current"', '"retired"'))
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert data["guard"]["served_families"] == 15
    assert writes_zero(data)
    assert deploy.served() == served


def test_a_scoped_repair_widened_to_the_corpus_is_weighed(deploy: Deployment) -> None:
    """``repair --family`` follows the moves (``membership.widen``). A family typo that puts
    all 30 notes into one family widens a one-family repair to all 30, and the time rule
    then hides 29 of them: the fraction rule, skipped for a scoped repair, must not be
    skipped for what the widening added."""
    served = _thirty_served(deploy)
    for n in range(30):
        deploy.edit_front(f"n{n:02d}", family="policies")
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True)  # the whole run is refused
    code, data = deploy.json("repair", "--family", "hb:n00")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert deploy.served() == served


def test_a_watch_run_over_a_bulk_edit_is_weighed(deploy: Deployment) -> None:
    """``serve``'s watch reconciles the families of the changed files as a scoped repair
    (``Watch._scoped_run``: mode repair, actor watch, the changed families), which the
    docs call guarded. A bulk edit that retires all 30 notes (a script, a bad merge) reaches
    it as 30 changed families: the fraction rule, skipped for a person's scoped repair, was
    skipped here too, and the whole corpus was hidden without --force."""
    served = _thirty_served(deploy)
    for n in range(30):
        deploy.edit_front(f"n{n:02d}", status="retired")
    families = {f"hb:n{n:02d}" for n in range(30)}
    settings = deploy.settings
    options = engine_options(
        settings, mode="repair", actor="watch", families=sorted(families), job="watch:hb"
    )
    cwd = os.getcwd()
    os.chdir(deploy.root)
    try:
        report = reconcile(settings, options)
    finally:
        os.chdir(cwd)
    assert report.refused, report.guard
    assert deploy.served() == served


def test_windows_closed_tomorrow_on_the_whole_corpus_are_weighed(deploy: Deployment) -> None:
    """A mapping mistake gives all 30 notes an ``effective_to`` of tomorrow (say a review
    date read as the end of validity). The guard calls each a relabel (served now and
    later): the run writes them, and from tomorrow ``default_filter()`` returns nothing, with
    no run needed to hide it and none that would be weighed (the closed ones are unserved
    writes then). Served is not the same as served for a day: each is a hide, and the run is
    refused (``rules.handover``)."""
    served = _thirty_served(deploy)
    for n in range(30):
        deploy.edit_front(f"n{n:02d}", effective_to=day(1))
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert deploy.served(datetime.now(UTC) + timedelta(days=2)) == served


def _thirty_served(deploy: Deployment) -> set[str]:
    """30 current notes, one family each, ingested and checked clean under a guard of 0.2:
    what is served (all 30)."""
    deploy.configure(fraction=0.2)
    for n in range(30):
        deploy.note(f"n{n:02d}", body(f"note {n}", f"rule {n}"), id=f"n{n:02d}",
                    status="current", effective_from=day(-300 + n))  # fmt: skip
    deploy.init_ingest()
    assert deploy.json("check")[0] == 0
    served = deploy.served()
    assert len(served) == 30
    return served
