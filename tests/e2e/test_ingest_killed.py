"""Crash anywhere, ingest too: a real ``reconciler ingest`` process, SIGKILLed at seeded
moments, loses no document and never leaves an old text served.

Killed while registering new documents, every row it left either has all its chunks with
its text or is named by ``check`` (``payload/missing_chunks``); the next ingestion, holding
the lease, marks the killed run interrupted, queues what it left incomplete and finishes it.
Killed while re-ingesting documents edited in place, no chunk of the old texts is servable,
then or after the next runs, and the next ingestion and run serve every new text.

The moment of each kill is chosen by seed: after a random number of audited intents (one a
document) plus a random few milliseconds, so kills land before, during and after a
document's writes.
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
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, kinds

FAMILIES = 30
SECTIONS = 6


def intents(db: Path) -> int:
    """Ingest intents audited so far (read beside the running process: WAL)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM audit_log WHERE target_type = 'ingest'"
            ).fetchone()
    except sqlite3.OperationalError:  # (the schema not there yet)
        return 0
    return int(count)


def kill_ingest(deploy: Deployment, seed: int, most: int) -> str:
    """Start ``reconciler ingest`` and SIGKILL it after a seeded number of intents; return
    the killed run's id."""
    rng = random.Random(seed)
    after, delay = rng.randint(1, most), rng.uniform(0, 0.02)
    db = deploy.root / "reconciler.db"
    before = intents(db)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from reconciler.cli import main; main()",
            "--config",
            str(deploy.config),
            "ingest",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RECONCILER_CONFIG": ""},
    )
    deadline = time.monotonic() + 120
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if intents(db) - before >= after:
                time.sleep(delay)
                break
            time.sleep(0.002)
        assert process.poll() is None, "the ingest ended before it could be killed"
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    [killed] = [
        r
        for r in deploy.dump()["runs"].values()
        if r["mode"] == "ingest" and r["status"] == "running"
    ]
    return str(killed["run_id"])


def chunks_by_doc(deploy: Deployment) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for payload in deploy.points().payloads.values():
        found[payload["doc_id"]].append(payload)
    return found


def incomplete(deploy: Deployment) -> set[str]:
    """Rows whose chunks are not all there with the row's text."""
    chunks = chunks_by_doc(deploy)
    return {
        doc_id
        for doc_id, row in deploy.rows().items()
        if len(chunks[doc_id]) < row["chunk_count"]
        or any(c.get("content_hash") != row["source_hash"] for c in chunks[doc_id])
    }


def converges(deploy: Deployment, killed: str) -> None:
    """The next ingestion resolves the killed one and finishes it; a run then finds nothing."""
    code, ingested = deploy.json("ingest")
    assert code == 0, ingested
    run = deploy.dump()["runs"][killed]
    assert run["status"] == "interrupted", run
    assert "process stopped" in run["error"]
    code, data = deploy.json("run")
    assert code == 0, data
    code, data = deploy.json("check")
    assert (code, kinds(data)) == (0, set()), data
    assert incomplete(deploy) == set()
    notes = {f"hb:{p.stem}" for p in deploy.vault.glob("*.md")}
    assert set(deploy.rows()) == notes
    code, verified = deploy.json("audit", "verify")
    assert (code, verified["problems"]) == (0, [])


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vault of 60 notes and an initialised, empty deployment."""
    root = tmp_path_factory.mktemp("ingest-killed") / "fresh"
    deploy = Deployment(root)
    for n in range(FAMILIES):
        deploy.family(f"f{n:02d}", 2, sections=SECTIONS)
    assert deploy.cli("init").exit_code == 0
    return root


def copy(template: Path, tmp_path: Path) -> Deployment:
    folder = tmp_path / "deployment"
    shutil.copytree(template, folder)
    return Deployment(folder)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_an_ingest_killed_while_registering_loses_no_document(
    fresh: Path, tmp_path: Path, seed: int
) -> None:
    deploy = copy(fresh, tmp_path)
    killed = kill_ingest(deploy, seed, most=2 * FAMILIES - 5)

    left = incomplete(deploy)
    code, data = deploy.json("check")
    named = {f["doc_id"] for f in data["findings"] if f["kind"] == "missing_chunks"}
    assert left <= named, (left, named)
    if left:
        assert code == 2
    converges(deploy, killed)


@pytest.fixture(scope="module")
def edited(fresh: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """Every note ingested and reconciled, then edited in place and quarantined by a run (the
    re-ingest requests queued); returns the folder and the hashes of the old texts."""
    root = tmp_path_factory.mktemp("ingest-killed") / "edited"
    shutil.copytree(fresh, root)
    deploy = Deployment(root)
    code, data = deploy.json("ingest")
    assert code == 0, data
    assert deploy.json("run")[0] == 0
    old = {row["source_hash"] for row in deploy.rows().values()}
    for path in sorted(deploy.vault.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        path.write_text(text + "\n## Changed\n\nA rule rewritten in place.\n", encoding="utf-8")
    code, data = deploy.json("run")
    assert code == 0, data
    assert data["writes"]["reingest"] == 2 * FAMILIES
    assert deploy.served() == set()
    return root, old


def served_old_text(deploy: Deployment, old: set[str]) -> set[str]:
    from reconciler import default_filter  # noqa: PLC0415

    points = deploy.points(default_filter())
    return {p["doc_id"] for p in points.payloads.values() if p.get("content_hash") in old}


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_a_re_ingest_killed_half_way_never_serves_an_old_text(
    edited: tuple[Path, set[str]], tmp_path: Path, seed: int
) -> None:
    deploy, old = copy(edited[0], tmp_path), edited[1]
    killed = kill_ingest(deploy, seed, most=2 * FAMILIES - 5)
    assert served_old_text(deploy, old) == set()

    code, data = deploy.json("run")
    assert code == 0, data
    assert served_old_text(deploy, old) == set()
    converges(deploy, killed)
    assert served_old_text(deploy, old) == set()
    current = {f"hb:f{n:02d}-v2" for n in range(FAMILIES)}
    assert deploy.served() == current
