"""Right after ``reconciler ingest`` of new versions of registered families, each family is
served once (review of the ingestion's handover).

A new note that ``replaces:`` a registered one (or that the registered one names in
``superseded_by:``), in force already, was registered and served by ``ingest`` while its
predecessor, already registered, was left as it was: both versions of every such family were
served (``check``: critical ``live_siblings`` and ``successor_not_marked``) until the next
``run`` closed the old ones. The same notes dated ahead were served beside their predecessors
from their start, had no run come in between. What ``default_filter()`` serves right after the
ingestion, now and after the new versions' start, is one version of each family, and the next
run has nothing to weigh for them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from acceptance_kit import Deployment, body, current_notes, day

OLD = 30
NEW = 12


def _families_served(deploy: Deployment, as_of: datetime | None = None) -> list[str]:
    rows = deploy.rows()
    return sorted(rows[d]["doc_family_id"] for d in deploy.served(as_of))


@pytest.mark.xfail(
    strict=True, reason="ingest serves a new version beside its registered predecessor"
)
@pytest.mark.parametrize(
    ("link", "start", "later"),
    [("replaces", -1, 0), ("superseded_by", 0, 0), ("replaces", 10, 11)],
    ids=["replaces-yesterday", "superseded_by-today", "replaces-ahead"],
)
def test_right_after_ingest_each_family_is_served_once(
    deploy: Deployment, link: str, start: int, later: int
) -> None:
    current_notes(deploy, OLD)
    for n in range(NEW):
        linked = {"replaces": f"n{n:02d}"} if link == "replaces" else {}
        deploy.note(f"m{n:02d}", body(f"new note {n}", f"new rule {n}"), id=f"m{n:02d}",
                    status="current", effective_from=day(start), **linked)  # fmt: skip
        if link == "superseded_by":
            deploy.edit_front(f"n{n:02d}", superseded_by=f"m{n:02d}")
    assert deploy.json("ingest")[0] == 0
    then = datetime.now(UTC) + timedelta(days=later, hours=1)
    families = _families_served(deploy, then)
    assert len(families) == len(set(families)) == OLD, families
    new = {f"hb:m{n:02d}" for n in range(NEW)}
    kept = {f"hb:n{n:02d}" for n in range(NEW, OLD)}
    assert deploy.served(then) == new | kept
    _, found = deploy.json("check")
    critical = [f for f in found["findings"] if f["severity"] == "critical"]
    assert critical == []
    code, run = deploy.json("run")
    assert (code, run["refused"]) == (0, False), run["guard"]
    assert run["guard"]["weighed_families"] == 0
    assert deploy.served(then) == new | kept
