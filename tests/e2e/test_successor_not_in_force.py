"""A source's explicit ``superseded`` beside a successor that never comes into force (a
draft) is a finding that says what is served and why (issue 34): before, the version was
served as ``current`` with no word; a ``retired`` one is hidden as it says, with no finding. What the finding says is checked against what
``default_filter()`` serves after ``ingest`` and ``run``. A successor the source retired (withdrawn) brings
the version it replaced back in force, as the time rule says: no finding."""

from __future__ import annotations

import pytest
from acceptance_kit import Deployment, body, day


@pytest.mark.parametrize(("state", "served"), [("superseded", True), ("retired", False)])
def test_the_finding_says_what_default_filter_serves(
    deploy: Deployment, state: str, served: bool
) -> None:
    deploy.note(
        "policy-v1",
        body("Policy v1", "The old rule."),
        id="policy-v1",
        family="policy",
        status=state,
        superseded_by="policy-v2",
        effective_from=day(-100),
    )
    deploy.note(
        "policy-v2",
        body("Policy v2", "The new rule, not approved."),
        id="policy-v2",
        family="policy",
        status="draft",
        effective_from=day(-10),
    )
    deploy.init_ingest()
    code, _ = deploy.json("run")
    assert code in {0, 2}
    assert ("hb:policy-v1" in deploy.served()) is served
    assert "hb:policy-v2" not in deploy.served()
    code, data = deploy.json("check")
    found = [f for f in data["findings"] if f["kind"] == "successor_not_in_force"]
    if not served:
        assert found == []
        return
    assert code == 2
    [finding] = found
    assert finding["doc_id"] == "hb:policy-v1"
    assert finding["actual"]["served"] == "current"
    assert "hb:policy-v2 (draft)" in finding["action"]
    assert deploy.rows()["hb:policy-v1"]["version_state"] == ("current" if served else "retired")
