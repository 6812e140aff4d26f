"""A source that yields nothing, or only undeclared versions, says so (issue 27, item 7): a
vault path with no ``*.md`` under it, a git source whose files declare no status. Warnings with
an action, never a write; a source that held documents and returns none stays the guard's."""

from __future__ import annotations

from pathlib import Path

from acceptance_kit import Deployment, kinds, writes_zero
from git_kit import Repo


def test_a_vault_with_no_notes_is_a_finding_not_agreement(deploy: Deployment) -> None:
    (deploy.vault / "README.txt").write_text("notes are kept elsewhere\n", encoding="utf-8")
    assert deploy.cli("init").exit_code == 0
    assert deploy.json("ingest")[0] == 0
    code, data = deploy.json("check")
    assert code == 2
    assert kinds(data) == {("family", "source_empty", None)}
    [finding] = data["findings"]
    assert finding["severity"] == "warning"
    assert finding["actual"] == {"source": "hb", "documents": 0, "registered": 0}
    assert "include" in finding["action"]
    text = deploy.cli("check").output
    assert "the three stores agree" not in text
    assert "family/source_empty" in text
    code, run = deploy.json("run")
    assert (code, run["refused"]) == (0, False)
    assert writes_zero(run)
    assert deploy.rows() == {}

    deploy.note("first", id="first", status="current")
    assert deploy.json("ingest")[0] == 0
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])


def test_an_emptied_vault_is_still_refused_by_the_guard_not_warned_about(
    deploy: Deployment,
) -> None:
    deploy.family("expenses", 1)
    deploy.init_ingest()
    (deploy.vault / "expenses-v1.md").unlink()
    code, data = deploy.json("run")
    assert code == 3
    assert ("guard", "source_empty", None) in kinds(data)
    assert ("family", "source_empty", None) not in kinds(data)


def test_a_git_source_serving_everything_as_unknown_says_so(
    deploy: Deployment, tmp_path: Path
) -> None:
    repo = Repo(tmp_path / "docs")
    for name in ("expenses", "travel", "onboarding"):
        repo.write(f"{name}.md", f"# {name}\n\nWhat to know about {name}.\n")
    repo.commit("docs without frontmatter")
    deploy.configure(
        source_extra="\n".join(
            ["[[sources]]", 'name = "git"', 'type = "git"', f'path = "{repo.root}"']
        )
    )
    (deploy.vault / "policy.md").write_text(
        "---\nid: policy\nstatus: current\n---\n# Policy\n\nDeclared.\n", encoding="utf-8"
    )
    deploy.init_ingest()
    code, data = deploy.json("check")
    assert code == 2
    assert kinds(data) == {("family", "all_unknown", None)}  # the git source; not the vault
    [finding] = data["findings"]
    assert finding["actual"] == {"source": "git", "documents": 3, "unknown": 3}
    assert "status mapping" in finding["action"]
    assert writes_zero(data)
    assert deploy.served() == {"git:expenses", "git:travel", "git:onboarding", "hb:policy"}
