"""Acceptance (issue 37): a replay of a real repository's history ends at the headers' truth
with at most one approval a step.

The PEP fixtures (``examples/peps``, real files of github.com/python/peps, SOURCE.md) hold three
real snapshots: the repository at the end of 2015, at the end of 2020 and today's. The replay commits three
snapshots years apart to a git repository, each with its own date, and the git connector reads
them through the git log as cron meets a moved checkout (the scheduled ``run`` first, which sees
the edits before their ingestion; then ``ingest`` and ``run``) under the default guard:

1. 2015-12-27: the repository as it was then (54 PEPs);
2. 2020-12-30: the repository as it was then (71 PEPs: most PEPs of 2015 edited in place,
   new ones added);
3. 2026-08-22: today's repository (88 PEPs).

At each step a refused run is approved at most once, by the plan it saved (``apply --plan
ID``), and no run after it is refused. After each step ``default_filter()`` serves what
that snapshot's headers say (``bench/peps.py``'s line reader, checked against this file's own
regular expression for the statuses), and at the end a check finds nothing to repair but the
headers' own contradictions.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from acceptance_kit import Deployment
from git_kit import Repo
from test_acceptance_vocabulary import (
    PEPS,
    assert_in_force_in_time,
    only_source_contradictions,
    preset,
)

from bench.peps import PepLabels

#: The test's own reader of a header line (independent of the connector's).
_STATUS = re.compile(r"^Status:[ \t]*(?P<status>\S[^\r\n]*?)[ \t]*\r?$", re.MULTILINE)
_PEP = re.compile(r"^PEP:[ \t]*(?P<number>[0-9]+)[ \t]*\r?$", re.MULTILINE)


def statuses(folder: Path) -> dict[int, str]:
    """Each PEP's status as this file's regular expression reads it."""
    found = {}
    for path in sorted([*folder.glob("peps/pep-*"), *folder.glob("pep-*")]):
        head = path.read_text(encoding="utf-8").split("\n\n", 1)[0]
        number, status = _PEP.search(head), _STATUS.search(head)
        if number is not None and status is not None and int(number["number"]) != 0:
            found[int(number["number"])] = status["status"]
    return found


def approved_once(deploy: Deployment) -> int:
    """``run``; a refused run approved by the plan it saved, once, and not refused again.
    Returns the approvals made (0 or 1)."""
    code, run = deploy.json("run")
    if code != 3:
        assert code in {0, 2}, run
        return 0
    plan_id = run["guard"]["plan_id"]
    code, approved = deploy.json("apply", "--plan", plan_id)
    assert code == 0, approved
    code, after = deploy.json("run")
    assert (code in {0, 2}, after["refused"]) == (True, False), after["guard"]
    return 1


def step(deploy: Deployment, labels: PepLabels, *, first: bool) -> int:
    """As cron meets a moved checkout: the scheduled ``run`` first (it sees the edits before
    their ingestion, and retires nothing the new snapshot holds Final), then ``ingest`` and
    ``run``, which are never refused. Returns the approvals made."""
    approvals = 0 if first else approved_once(deploy)
    final = {f"peps:pep-{n:04d}" for n, s in labels.status.items() if s == "Final"}
    retired = {d for d, row in deploy.rows().items() if row["version_state"] == "retired"}
    assert not (retired & final), sorted(retired & final)
    result = deploy.cli("ingest")
    assert result.exit_code == 0, result.output
    code, run = deploy.json("run")
    assert (code in {0, 2}, run["refused"]) == (True, False), run["guard"]
    return approvals


@pytest.mark.parametrize("deploy", ["sqlite"], indirect=True)
def test_three_snapshots_years_apart_end_at_the_headers_truth(
    deploy: Deployment, tmp_path: Path
) -> None:
    snapshots = [
        (PEPS / "2015", datetime(2015, 12, 27, tzinfo=UTC)),
        (PEPS / "2021", datetime(2020, 12, 30, tzinfo=UTC)),
        (PEPS / "head", datetime(2026, 8, 22, tzinfo=UTC)),
    ]
    repo = Repo(tmp_path / "peps-checkout")
    preset(deploy, "peps", connector="git", documents="peps-checkout")
    approvals = []
    for number, (snapshot, when) in enumerate(snapshots):
        repo.commit_tree(snapshot, f"the PEPs at {when:%Y-%m-%d}", when=when)
        if number == 0:
            assert deploy.cli("init").exit_code == 0
        labels = PepLabels.of(snapshot)
        approvals.append(step(deploy, labels, first=number == 0))
        assert dict(labels.status) == statuses(snapshot)
        assert deploy.served() == labels.served, when
    assert len(repo.git("log", "--format=%H").split()) == 3
    assert all(a <= 1 for a in approvals), approvals
    # (2015 -> 2020 edits most PEPs in place: its first run is refused and approved; measured
    # [0, 1, 0])
    assert sum(approvals) >= 1, approvals
    # what was in force at every instant is what today's headers say (the cron replay of
    # 2015 to today this test took over)
    assert_in_force_in_time(deploy, PepLabels.of(PEPS / "head"))
    code, data = deploy.json("check")
    assert only_source_contradictions(code, data)
