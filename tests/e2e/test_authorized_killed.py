"""Authorized work survives a kill (issue 37): a real ``run --force``, ``declare --force`` or
``apply --plan ID`` process, SIGKILLed at seeded moments (its rows committed and none of its
payload batches sent, or among its payload batches), is finished by the next plain ``run``
under the same authorization: it is never refused for its own writes, the stores end
exactly as the uninterrupted command leaves them, and the finishing run is recorded (forced
for a forced run's plan) and audited.

Two small deployments: 24 notes of 4 chunks (96 points) of which the source retires 16 (a
mass retirement the guard refuses: 16 of 24 families hidden), and an adopted corpus of 24
families of two versions whose 24 links a reviewed proposals file accepts; payloads are
written 8 points a batch.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from acceptance_kit import Deployment, body, day

NOTES = 24
RETIRED = 16
SECTIONS = 4
BATCH = 8


def copy(template: Path, folder: Path) -> Deployment:
    target = folder / "deployment"
    shutil.copytree(template, target)
    return Deployment(target, configured=True)


@pytest.fixture(scope="module")
def retiring(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The vault deployment with 16 of its 24 notes retired in the source since the last run;
    returns its folder and the stores' state after an uninterrupted ``run --force``."""
    root = tmp_path_factory.mktemp("authorized-killed") / "retiring"
    deploy = Deployment(root)
    deploy.configure(fraction=0.2)
    for n in range(NOTES):
        deploy.note(f"n{n:02d}", body(f"note {n}", *(f"rule {s} of {n}" for s in range(SECTIONS))),
                    id=f"n{n:02d}", status="current", effective_from=day(-300 + n))  # fmt: skip
    deploy.init_ingest()
    deploy.write_batch(BATCH)
    for n in range(RETIRED):
        deploy.edit_front(f"n{n:02d}", status="retired")
    reference = copy(root, tmp_path_factory.mktemp("forced"))
    code, data = reference.json("run", "--force")
    assert (code, data["forced"]) == (0, True), data
    return root, reference.state()


@pytest.fixture(scope="module")
def declaring(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The adopted corpus and its reviewed proposals file; returns its folder and the stores'
    state after an uninterrupted ``declare --force``."""
    root = tmp_path_factory.mktemp("authorized-killed") / "declaring"
    deploy = Deployment(root)
    deploy.configure(fraction=0.2)
    for n in range(NOTES):
        for i, year in enumerate((2024, 2025)):
            deploy.note(f"p{n:02d}-{year}",
                        body(f"policy {n} {year}", *(f"rule {s} of {year}" for s in range(SECTIONS))),
                        effective_from=day(-700 + 300 * i))  # fmt: skip
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    config = deploy.config.read_text(encoding="utf-8")
    deploy.config.write_text(
        config.replace('[[sources]]\nname = "hb"\ntype = "vault"\npath = "vault"\n', ""),
        encoding="utf-8",
    )
    deploy.write_batch(BATCH)
    proposals = [
        {"id": f"link-{n:02d}", "kind": "link", "older": f"hb:p{n:02d}-2024",
         "newer": f"hb:p{n:02d}-2025", "direction": "older -> newer", "score": 0.9,
         "evidence": "names alike", "decision": "accept"}
        for n in range(NOTES)
    ]  # fmt: skip
    (root / "reviewed.yaml").write_text(
        yaml.safe_dump({"format": "reconciler-proposals/1", "proposals": proposals}),
        encoding="utf-8",
    )
    reference = copy(root, tmp_path_factory.mktemp("declared"))
    code, data = reference.json("declare", str(reference.root / "reviewed.yaml"), "--force")
    assert code == 0, data
    return root, reference.state()


def audited(db: Path) -> dict[str, int]:
    """Audit entries by kind so far (read beside the running process); ``payload``: the
    payload intents, a page's one a document."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        counts = dict(
            conn.execute("SELECT target_type, COUNT(*) FROM audit_log GROUP BY target_type")
        )
        [(paged,)] = conn.execute("SELECT COUNT(*) FROM audit_documents").fetchall()
    counts["payload"] = counts.get("payload", 0) + paged
    return counts


def kill(deploy: Deployment, seed: int, *args: str) -> None:
    """Start ``reconciler ARGS`` and SIGKILL it once it has committed its rows (or, a
    ``declare``, its declarations) and, for even seeds, a seeded number of payload intents."""
    rng = random.Random(seed)
    intents = 0 if seed % 2 else rng.randint(1, 5)
    before = audited(deploy.root / "reconciler.db")
    first = "declaration" if args[0] == "declare" else "row"
    process = subprocess.Popen(
        [sys.executable, "-c", "from reconciler.cli import main; main()", "--config",
         str(deploy.config), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RECONCILER_CONFIG": ""},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while process.poll() is None and time.monotonic() < deadline:
            now = audited(deploy.root / "reconciler.db")
            grown = {k: now.get(k, 0) - before.get(k, 0) for k in (first, "payload")}
            if grown[first] and grown["payload"] >= intents:
                time.sleep(rng.uniform(0, 0.01))
                break
            time.sleep(0.002)
        assert process.poll() is None, "the command ended before it could be killed"
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def finished_by_the_next_run(deploy: Deployment, reference: dict[str, Any], forced: bool) -> None:
    """The next plain ``run`` exits 0 and leaves the stores as the uninterrupted command (so
    ``check`` finds nothing: its uninterrupted run converged)."""
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (0, False), data["guard"]
    runs = deploy.dump()["runs"].values()
    assert "interrupted" in {r["status"] for r in runs}
    [finishing] = [r for r in runs if r["job"] == "finish"]
    assert (finishing["status"], finishing["forced"]) == ("succeeded", forced)
    assert deploy.state() == reference
    assert deploy.json("plans")[1]["plans"] == []  # nothing left open
    code, verified = deploy.json("audit", "verify")
    assert (code, verified["problems"]) == (0, [])


@pytest.mark.parametrize("seed", [1])
def test_a_killed_forced_run_is_finished_without_forcing_again(
    retiring: tuple[Path, dict[str, Any]], tmp_path: Path, seed: int
) -> None:
    deploy = copy(retiring[0], tmp_path)
    kill(deploy, seed, "run", "--force")
    finished_by_the_next_run(deploy, retiring[1], forced=True)


@pytest.mark.parametrize("seed", [4])
def test_a_killed_approval_is_finished_without_approving_again(
    retiring: tuple[Path, dict[str, Any]], tmp_path: Path, seed: int
) -> None:
    deploy = copy(retiring[0], tmp_path)
    code, refused = deploy.json("run")
    assert code == 3, refused
    kill(deploy, seed, "apply", "--plan", refused["guard"]["plan_id"])
    code, status = deploy.json("status")
    [open_plan] = status["plans"]
    assert open_plan["status"] == "applying"
    assert "rows and chunks may disagree" in open_plan["window"]
    finished_by_the_next_run(deploy, retiring[1], forced=False)


@pytest.mark.parametrize("seed", [6])
def test_a_killed_forced_declare_is_finished_without_forcing_again(
    declaring: tuple[Path, dict[str, Any]], tmp_path: Path, seed: int
) -> None:
    deploy = copy(declaring[0], tmp_path)
    kill(deploy, seed, "declare", str(deploy.root / "reviewed.yaml"), "--force")
    finished_by_the_next_run(deploy, declaring[1], forced=True)


def test_the_rollback_of_a_killed_forced_run_undoes_it_instead(
    retiring: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    deploy = copy(retiring[0], tmp_path)
    before = deploy.state()
    kill(deploy, 2, "run", "--force")
    [killed] = [r["run_id"] for r in deploy.dump()["runs"].values() if r["forced"]]
    code, rolled = deploy.json("rollback", killed)
    assert code == 0, rolled
    assert deploy.state() == before  # every row and point as it was
    assert [p["status"] for p in deploy.json("plans", "--all")[1]["plans"]] == ["stale"]
    code, again = deploy.json("run")  # the retirement is refused again: no authorization left
    assert (code, again["refused"]) == (3, True)
