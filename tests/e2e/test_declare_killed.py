"""Crash anywhere, for a ``declare`` run: a real ``reconciler declare`` process, SIGKILLed at
seeded moments (as soon as its declarations are recorded, or among its payload batches), leaves
a record the next run finishes or the rollback undoes. The declarations commit in one
transaction before any row or payload, so afterwards either none exists (the stores are as
they were) or all of them do, and then:

- the next ``run`` marks the killed run ``interrupted`` and writes what it did not: the stores
  end exactly as an uninterrupted ``declare`` leaves them;
- or ``rollback`` of the killed run revokes its declarations and puts every row and point back
  exactly, and a later ``run`` brings nothing back.

The deployment is an adopted corpus (no source configured) of 60 families of two versions, 8
chunks a note (960 points), written 32 points a batch; the decisions are a reviewed proposals
file accepting the 60 links.
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
from acceptance_kit import Deployment, body, day, kinds

FAMILIES = 60
SECTIONS = 8
BATCH = 32


def state(deploy: Deployment) -> dict[str, Any]:
    points = deploy.points()
    return {
        "rows": {
            k: {c: v for c, v in r.items() if c != "updated_at"} for k, r in deploy.rows().items()
        },
        "payloads": points.payloads,
        "vectors": points.vectors,
    }


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The adopted deployment and its reviewed proposals file; returns its folder and its
    stores' state."""
    root = tmp_path_factory.mktemp("declare-killed") / "template"
    deploy = Deployment(root)
    for n in range(FAMILIES):
        for i, year in enumerate((2024, 2025)):
            deploy.note(
                f"p{n:02d}-{year}",
                body(f"policy {n} {year}", *(f"rule {s} of {year}" for s in range(SECTIONS))),
                effective_from=day(-700 + 300 * i),
            )
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    config = deploy.config.read_text(encoding="utf-8")
    config = config.replace('[[sources]]\nname = "hb"\ntype = "vault"\npath = "vault"\n', "")
    deploy.config.write_text(
        config.replace('collection = "corpus"', f'collection = "corpus"\nwrite_batch = {BATCH}'),
        encoding="utf-8",
    )
    proposals = [
        {
            "id": f"link-{n:02d}",
            "kind": "link",
            "older": f"hb:p{n:02d}-2024",
            "newer": f"hb:p{n:02d}-2025",
            "direction": "older -> newer",
            "score": 0.9,
            "evidence": "names alike",
            "decision": "accept",
        }
        for n in range(FAMILIES)
    ]
    (root / "reviewed.yaml").write_text(
        yaml.safe_dump({"format": "reconciler-proposals/1", "proposals": proposals}),
        encoding="utf-8",
    )
    return root, state(deploy)


@pytest.fixture(scope="module")
def declared(
    template: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The stores as an uninterrupted ``declare`` leaves them."""
    deploy = copy(template, tmp_path_factory.mktemp("declared"))
    code, data = deploy.json("declare", str(deploy.root / "reviewed.yaml"))
    assert code == 0, data
    return state(deploy)


def copy(template: tuple[Path, dict[str, Any]], folder: Path) -> Deployment:
    target = folder / "deployment"
    shutil.copytree(template[0], target)
    return Deployment(target, configured=True)  # (its config kept: no source)


def audited(db: Path) -> tuple[int, int]:
    """Declarations and payload intents (a page's, one a document) audited so far (read
    beside the running process)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        counts = dict(
            conn.execute(
                "SELECT target_type, COUNT(*) FROM audit_log "
                "WHERE target_type IN ('declaration', 'payload') GROUP BY target_type"
            ).fetchall()
        )
        [(paged,)] = conn.execute("SELECT COUNT(*) FROM audit_documents").fetchall()
    return int(counts.get("declaration", 0)), int(counts.get("payload", 0)) + int(paged)


def kill_declare(deploy: Deployment, seed: int) -> str | None:
    """Start ``declare`` and SIGKILL it at a seeded moment: right after its declarations are
    recorded (odd seeds) or after a seeded number of payload intents (even seeds). Returns
    the killed run's id (None when it was killed before it recorded its run)."""
    rng = random.Random(seed)
    intents, delay = (0 if seed % 2 else rng.randint(1, 25)), rng.uniform(0, 0.02)
    db = deploy.root / "reconciler.db"
    process = subprocess.Popen(
        [sys.executable, "-c", "from reconciler.cli import main; main()", "--config",
         str(deploy.config), "declare", str(deploy.root / "reviewed.yaml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RECONCILER_CONFIG": ""},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while process.poll() is None and time.monotonic() < deadline:
            declarations, payloads = audited(db)
            if declarations and payloads >= intents:
                time.sleep(delay)
                break
            time.sleep(0.002)
        assert process.poll() is None, "the declare run ended before it could be killed"
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    runs = [r for r in deploy.dump()["runs"].values() if r["mode"] == "declare"]
    assert [r["status"] for r in runs] == ["running"]
    return str(runs[0]["run_id"])


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_the_next_run_finishes_a_killed_declare(
    template: tuple[Path, dict[str, Any]], declared: dict[str, Any], tmp_path: Path, seed: int
) -> None:
    deploy = copy(template, tmp_path)
    run_id = kill_declare(deploy, seed)
    recorded = deploy.json("declare", "--list")[1]["declarations"]
    assert len(recorded) == FAMILIES  # all of them, in one transaction

    code, data = deploy.json("run")
    assert code == 0, data
    assert deploy.dump()["runs"][run_id]["status"] == "interrupted"
    assert state(deploy) == declared
    code, data = deploy.json("check")
    assert (code, kinds(data)) == (0, set())
    code, verified = deploy.json("audit", "verify")
    assert (code, verified["problems"]) == (0, [])


@pytest.mark.parametrize("seed", [3, 6])
def test_the_rollback_of_a_killed_declare_puts_everything_back(
    template: tuple[Path, dict[str, Any]], tmp_path: Path, seed: int
) -> None:
    deploy, before = copy(template, tmp_path), template[1]
    run_id = kill_declare(deploy, seed)

    code, rolled = deploy.json("rollback", run_id)
    assert code == 0, rolled
    assert rolled["declarations"] == FAMILIES
    assert deploy.dump()["runs"][run_id]["status"] == "interrupted"
    assert state(deploy) == before  # every row and point, exactly
    assert deploy.json("declare", "--list")[1]["declarations"] == []
    code, data = deploy.json("run")
    assert code == 0, data
    assert state(deploy) == before  # nothing brings the declarations back
    code, verified = deploy.json("audit", "verify")
    assert (code, verified["problems"]) == (0, [])
