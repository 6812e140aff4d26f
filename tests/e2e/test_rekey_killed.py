"""Crash anywhere, for a re-keying: a real ``reconciler rekey`` process SIGKILLed between
each two of its steps (after its intent is audited, after the table transaction, between the
payload writes of two documents, after the last payload write and before the confirmation)
leaves a record the next ``run`` finishes: the killed run is marked ``interrupted`` and the
stores end exactly as an uninterrupted ``rekey`` leaves them. At no moment, killed or
finished, is a note served under two ids. The kill is the process's own ``SIGKILL``, sent
from inside the step it follows (the pattern of ``test_migrations_killed``), so each step is
hit exactly."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, Points, body, day

from reconciler import default_filter

REF_IDS = '[sources.options.fields]\nid = "ref"'
NOTES = 4

KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from reconciler.stores.sql.rekeys import SqlRekeys
    from reconciler.stores.qdrant.index import QdrantChunkIndex
    from reconciler.cli import main

    config, step = sys.argv[1], sys.argv[2]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    rename, write = SqlRekeys.rekey_documents, QdrantChunkIndex.set_payloads

    def renamed(self, **kwargs):
        if step == "after_intent":
            die()
        head = rename(self, **kwargs)
        if step == "after_table":
            die()
        return head

    def written(self, writes, **kwargs):
        if step == "between_documents":
            first = [w for w in writes if w.doc_id == writes[0].doc_id]
            write(self, first, **kwargs)
            die()
        done = write(self, writes, **kwargs)
        if step == "before_confirm":
            die()
        return done

    SqlRekeys.rekey_documents, QdrantChunkIndex.set_payloads = renamed, written
    sys.argv = ["reconciler", "--config", config, "rekey"]
    main()
    """
)
STEPS = ["after_intent", "after_table", "between_documents", "before_confirm"]


def state(deploy: Deployment) -> dict[str, Any]:
    dump = deploy.dump()
    return {
        "rows": {
            k: {c: v for c, v in r.items() if c != "updated_at"}
            for k, r in dump["documents"].items()
        },
        "identities": {k: (r["doc_family_id"], r["path"]) for k, r in dump["identity_map"].items()},
        "payloads": deploy.points().payloads,
    }


def ids_by_note(deploy: Deployment, before: Points) -> dict[str, set[str]]:
    """The ids ``default_filter()`` serves each note under (named by its first id)."""
    ids: dict[str, set[str]] = {}
    for pid, payload in deploy.points(default_filter()).payloads.items():
        ids.setdefault(before.payloads[pid]["doc_id"], set()).add(payload["doc_id"])
    return ids


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Points]:
    """A vault ingested and reconciled under path ids, its config then fixed to ``ref`` ids."""
    root = tmp_path_factory.mktemp("rekey-killed") / "template"
    deploy = Deployment(root)
    for n in range(NOTES):
        deploy.note(
            f"p{n}",
            body(f"policy {n}", *(f"rule {s} of policy {n}." for s in range(4))),
            ref=f"POL-{n}",
            family="pol" if n < 2 else None,
            version=str(n + 1) if n < 2 else None,
            status="superseded" if n == 0 else "current",
            superseded_by="p1" if n == 0 else None,
            effective_from=day(-200 + n),
        )
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    deploy.configure(source_extra=REF_IDS)
    return root, deploy.points()


def copy(template: tuple[Path, Points], folder: Path) -> Deployment:
    target = folder / "deployment"
    shutil.copytree(template[0], target)
    return Deployment(target, configured=True)


@pytest.fixture(scope="module")
def rekeyed(template: tuple[Path, Points], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The stores as an uninterrupted ``rekey`` leaves them."""
    deploy = copy(template, tmp_path_factory.mktemp("rekeyed"))
    code, data = deploy.json("rekey")
    assert code == 0, data
    assert len(data["pairs"]) == NOTES
    return state(deploy)


def kill_rekey(deploy: Deployment, step: str) -> None:
    """Run ``KILLER`` on ``deploy``: a re-keying SIGKILLed at ``step``."""
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(deploy.config), step],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "RECONCILER_CONFIG": ""},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr


@pytest.mark.parametrize("step", STEPS)
def test_the_next_run_finishes_a_killed_rekey(
    template: tuple[Path, Points], rekeyed: Any, tmp_path: Path, step: str
) -> None:
    deploy, before = copy(template, tmp_path), template[1]
    kill_rekey(deploy, step)
    runs = [r for r in deploy.dump()["runs"].values() if r["mode"] == "rekey"]
    assert [r["status"] for r in runs] == ["running"]
    assert all(len(held) == 1 for held in ids_by_note(deploy, before).values())

    code, data = deploy.json("run")
    assert code == 0, data
    assert data["findings"] == []
    assert deploy.dump()["runs"][runs[0]["run_id"]]["status"] == "interrupted"
    assert state(deploy) == rekeyed
    assert all(len(held) == 1 for held in ids_by_note(deploy, before).values())
    code, verified = deploy.json("audit", "verify")
    assert code == 0, verified
    assert verified["problems"] == []


def test_a_killed_rekey_dry_rolled_back_says_what_the_rollback_does(
    template: tuple[Path, Points], tmp_path: Path
) -> None:
    """The dry run plans the dead re-keying as resolved, as the rollback (which resolves it
    first) does: its pairs swapped back (it said there was nothing to roll back: the run,
    still recorded as running, was planned as any run, and a re-keying writes no row or
    payload entry)."""
    deploy = copy(template, tmp_path)
    kill_rekey(deploy, "after_table")
    [run] = [r["run_id"] for r in deploy.dump()["runs"].values() if r["mode"] == "rekey"]
    code, dry = deploy.json("rollback", run, "--dry-run")
    assert code == 0, dry
    code, done = deploy.json("rollback", run)
    assert code == 0, done
    assert {k: v for k, v in dry.items() if k not in ("run_id", "dry_run")} == {
        k: v for k, v in done.items() if k not in ("run_id", "dry_run")
    }
    assert dry["rows"] == NOTES
