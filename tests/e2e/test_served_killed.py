"""``audit served`` across a killed run: a real ``reconciler apply`` SIGKILLed in the middle of
its payload batches (``test_crash``'s kill), then the next run that resolves it. At an instant
before the kill, and after the next run, the log says exactly what the collection held; at an
instant between, every point it calls known held that payload, and the only points it leaves
in doubt are those of the batch the killed process was writing, which the next runner found
written (the others, never written, are known to have kept their payload)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment
from test_crash import kill_during_writes, rewriting

from reconciler import default_filter
from reconciler.model import MANAGED_KEYS

FAMILIES = 60
SECTIONS = 8  # 60 families x 2 versions x 8 = 960 points, in batches of 16
BATCH = 16


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reconciled deployment whose vault then changed: the next apply rewrites every point."""
    root = tmp_path_factory.mktemp("served-killed") / "template"
    rewriting(root, families=FAMILIES, sections=SECTIONS, batch=BATCH)
    return root


def observe(deploy: Deployment) -> tuple[datetime, set[str], dict[str, dict[str, Any]]]:
    at = datetime.now(UTC)
    admitted = set(deploy.points(default_filter(at)).payloads)
    payloads = {
        pid: {k: p.get(k) for k in MANAGED_KEYS} for pid, p in deploy.points().payloads.items()
    }
    return at, admitted, payloads


def served(deploy: Deployment, at: datetime) -> dict[str, dict[str, Any]]:
    """Point -> what ``audit served --at`` says of it, for every family."""
    args = ["audit", "served", "--at", at.isoformat()]
    args += [a for n in range(FAMILIES) for a in ("--family", f"hb:f{n:03d}")]
    code, data = deploy.json(*args)
    assert code == 0, data
    return {
        str(point): variant
        for document in data["documents"]
        for variant in document["variants"]
        for point in variant["points"]
    }


def exactly(said: dict[str, dict[str, Any]], admitted: set[str], payloads: dict[str, Any]) -> None:
    assert set(said) == set(payloads)
    assert {p for p, v in said.items() if v["admitted"]} == admitted
    for point, variant in said.items():
        assert (variant["status"], variant["payloads"]) == ("known", [payloads[point]]), point


@pytest.mark.parametrize("seed", [7, 11])
def test_served_across_a_killed_apply_and_its_resolution(
    template: Path, tmp_path: Path, seed: int
) -> None:
    shutil.copytree(template, tmp_path / "deployment")
    # (its config kept: the template's batches of 16, not the default write_batch)
    deploy = Deployment(tmp_path / "deployment", configured=True)
    before = observe(deploy)
    killed = kill_during_writes(deploy, seed)
    between = observe(deploy)
    code, applied = deploy.json("apply")  # resolves the killed run, then converges
    assert code == 0, applied
    after = observe(deploy)

    exactly(served(deploy, before[0]), before[1], before[2])
    exactly(served(deploy, after[0]), after[1], after[2])

    code, shown = deploy.json("audit", "show", "--run", killed, "--limit", "100000")
    assert code == 0
    [resolution] = [e for e in shown["entries"] if e["target_type"] == "resolve"]
    written = {str(p) for p in resolution["after"]["written"]}
    said = served(deploy, between[0])
    assert set(said) == set(between[2])
    doubted = set()
    for point, variant in said.items():
        observed = between[2][point]
        if variant["status"] == "known":
            assert variant["payloads"] == [observed], point
        else:
            assert variant["status"] == "in_doubt", variant
            assert observed in variant["payloads"], point
            doubted.add(point)
        if variant["admitted"] is not None:
            assert variant["admitted"] == (point in between[1]), point
    assert doubted == written  # the batch being written, as the next runner found it
    code, verified = deploy.json("audit", "verify")
    assert (code, verified["problems"]) == (0, [])
