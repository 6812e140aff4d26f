"""Notes deleted under a real ``serve``'s watch (a second review of freshness).

- A note deleted alone in its family (a one-version family: most notes) was read at its path
  only, which holds nothing now: the run's read yielded no document, the guard took the
  source for emptied (``guard/source_empty``, critical) and refused the run, and the watch
  tried it again every minute, refused each time, with every later change of the vault held
  behind it, until someone approved a plan. A read at some paths cannot say that a source is
  empty; when it finds nothing there, the source is read whole, which can.
  The same for a note whose front matter a typo broke (no document at its path either).
  The same for a git source's file removed by a commit.
- A vault emptied under ``serve`` is still refused: nothing is tombstoned.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from acceptance_kit import GIT_NOTE, Deployment, day, git_deployment
from exposition_kit import free_port, metrics_config
from test_watch import FAR, served, serving, watch_runs

NOTES = ("leave", "runbook", "guide", "travel")


@pytest.fixture
def deployment(tmp_path: Path) -> Deployment:
    """Four one-version families, ingested; the scheduled jobs a year away."""
    dep = Deployment(tmp_path)
    for name in NOTES:
        dep.note(name, id=name, family=name, status="current", effective_from=day(-50))
    dep.init_ingest()
    metrics_config(dep, f'[metrics]\nlisten = "127.0.0.1:{free_port()}"\n{FAR}')
    assert dep.served() == {f"hb:{name}" for name in NOTES}
    return dep


@pytest.mark.parametrize("how", ["deleted", "front matter broken"])
def test_a_note_gone_alone_holds_up_no_later_change(deployment: Deployment, how: str) -> None:
    dep = deployment
    guide = dep.vault / "guide.md"
    with serving(dep) as wait_log:
        wait_log("watch: following")
        if how == "deleted":
            guide.unlink()
        else:
            guide.write_text(guide.read_text().replace("status: current", "status: [current"))
        wait_log("reconciled family")
        dep.edit_front("runbook", status="retired")
        deadline = time.monotonic() + 30
        while "hb:runbook" in served(dep):
            assert time.monotonic() < deadline, (dep.root / "serve.log").read_text()[-6000:]
            time.sleep(0.2)
    # (a document gone from its source is served through missing_in_source_grace, 7 days;
    # one its source cannot read is a source problem, and kept as it was)
    assert served(dep) == {"hb:leave", "hb:guide", "hb:travel"}
    assert all(status == "succeeded" for _, _, status in watch_runs(dep)), watch_runs(dep)


def test_an_emptied_vault_is_refused_under_serve(deployment: Deployment) -> None:
    dep = deployment
    with serving(dep) as wait_log:
        wait_log("watch: following")
        for name in NOTES:
            (dep.vault / f"{name}.md").unlink()
        wait_log("refused by the guard")
    assert served(dep) == {f"hb:{name}" for name in NOTES}
    assert "refused" in [status for _, _, status in watch_runs(dep)]


def test_a_file_removed_from_a_git_source_holds_up_no_later_change(tmp_path: Path) -> None:
    repo, dep = git_deployment(tmp_path)
    metrics_config(dep, f'[metrics]\nlisten = "127.0.0.1:{free_port()}"\n{FAR}')
    assert dep.served() == {"gh:alpha", "gh:beta"}
    with serving(dep) as wait_log:
        wait_log("watch: following")
        (repo.root / "docs" / "alpha.md").unlink()
        repo.commit("alpha goes")
        wait_log("reconciled family")
        repo.write("docs/beta.md", GIT_NOTE.format("beta", "retired", day(-30)))
        repo.commit("beta retired")
        deadline = time.monotonic() + 30
        while "gh:beta" in served(dep):
            assert time.monotonic() < deadline, (dep.root / "serve.log").read_text()[-6000:]
            time.sleep(0.2)
    assert served(dep) == {"gh:alpha"}  # (served through missing_in_source_grace)
    assert all(status == "succeeded" for _, _, status in watch_runs(dep)), watch_runs(dep)
