"""``serve``'s watch in a real process through an event storm and a vault that flaps (its
folder moved away, edited there, and a copy put back in its place: the old watcher sees
nothing of the new folder): nothing is lost, and the served set is right again within
seconds, without the full job."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from acceptance_kit import Deployment, day
from exposition_kit import free_port, metrics_config

FAR = '[schedule]\nfull = "0 2 1 1 *"\nttl = "0 3 1 1 *"\ndates = "0 4 1 1 *"\n'
NOTES = 24


def _served(dep: Deployment) -> set[str] | None:
    try:
        return dep.served()
    except Exception:  # (the index is locked while a run writes: read again)
        return None


def _until(dep: Deployment, want: set[str], proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while _served(dep) != want:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, (_served(dep), log.read_text())
        time.sleep(0.2)


def test_a_storm_and_a_vault_that_flaps_lose_nothing(tmp_path: Path) -> None:
    dep = Deployment(tmp_path)
    names = [f"n{i:02d}" for i in range(NOTES)]
    for name in names:
        dep.note(name, id=name, family=name, status="current", effective_from=day(-20))
    dep.init_ingest()
    metrics_config(dep, f'[metrics]\nlisten = "127.0.0.1:{free_port()}"\n{FAR}')
    log = dep.root / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "--config", str(dep.config),
             "--log-level", "info", "serve"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while "watch: following" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        storm = names[: NOTES // 2]
        for name in storm:  # as fast as the disk takes them
            dep.edit_front(name, status="retired")
        _until(dep, {f"hb:{n}" for n in names[NOTES // 2 :]}, proc, log)
        # the vault flaps: moved away, edited there, a copy put back (another folder)
        away = dep.root / "vault.away"
        dep.vault.rename(away)
        time.sleep(0.5)
        flapped = names[NOTES // 2]
        path = away / f"{flapped}.md"
        path.write_text(path.read_text().replace("status: current", "status: retired"))
        shutil.copytree(away, dep.vault)
        shutil.rmtree(away)
        _until(dep, {f"hb:{n}" for n in names[NOTES // 2 + 1 :]}, proc, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    text = log.read_text()
    assert "job full run" not in text  # the watch did it all
    assert "the watcher died" in text  # (the new folder: a new watcher, and a rescan)
