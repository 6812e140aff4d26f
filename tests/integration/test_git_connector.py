"""The git connector against real repositories built in temporary folders: the contract, then
history (ordinals, renames, deletions, edits, dates), the clone-URL mirror, failures, and one
end-to-end run through the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner, Result
from git_kit import Repo

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.git import GitSource
from connectors.testing import SystemOfRecordContract
from connectors.vocabulary import Vocabulary
from reconciler.cli import cli
from reconciler.model import ProblemKind, SourceDocument, SourceSnapshot, VersionState
from reconciler.rules.identity import resolve_families
from reconciler.settings import load_settings
from reconciler.sources import build_source, installed

T0 = datetime(2024, 1, 10, 9, 0, tzinfo=UTC)


def note(body: str = "Body.", **fields: str) -> str:
    if not fields:
        return body + "\n"
    lines = [f"{key}: {value}" for key, value in fields.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + body + "\n"


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def doc(snapshot: SourceSnapshot, key: str) -> SourceDocument:
    matches = [d for d in snapshot.documents if d.source_key == key]
    assert len(matches) == 1, [d.source_key for d in snapshot.documents]
    return matches[0]


def keys(snapshot: SourceSnapshot) -> set[str]:
    return {d.source_key for d in snapshot.documents}


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "docs")


def handbook(repo: Repo) -> None:
    """The contract corpus: a superseded pair, a note without frontmatter, a declared id."""
    repo.write(
        "policies/leave-v1.md",
        note(
            "Old leave rules.",
            family="leave",
            version="1",
            status="superseded",
            superseded_by="policies/leave-v2",
        ),
    )
    repo.write(
        "policies/leave-v2.md",
        note(
            "New leave rules.",
            family="leave",
            version="2",
            status="current",
            effective_from="2024-01-01",
        ),
    )
    repo.write("Onboarding.md", "# Onboarding\n\nNo frontmatter at all.\n")
    repo.write("archive/Expenses.md", note("Expenses.", id="EXP-1", status="retired"))
    repo.write(".github/pull_request_template.md", "not a document")
    repo.write("README.txt", "not matched by the glob")
    repo.commit("handbook", when=T0)


class TestGitContract(SystemOfRecordContract):
    @pytest.fixture
    def source(self, repo: Repo) -> GitSource:
        handbook(repo)
        return GitSource("handbook", repo.root)

    @pytest.fixture
    def unavailable_source(self, tmp_path: Path) -> GitSource:
        return GitSource("handbook", tmp_path / "not-cloned-yet")


class TestGitMirrorContract(SystemOfRecordContract):
    """The same contract in clone-URL mode (the 'remote' is a local bare repository)."""

    @pytest.fixture
    def source(self, tmp_path: Path) -> GitSource:
        remote = Repo(tmp_path / "remote.git", bare=True)
        work = Repo(tmp_path / "work")
        handbook(work)
        work.git("push", "-q", str(remote.root), "main")
        return GitSource("handbook", url=str(remote.root), cache_dir=tmp_path / "cache")

    @pytest.fixture
    def unavailable_source(self, tmp_path: Path) -> GitSource:
        return GitSource(
            "handbook", url=(tmp_path / "gone.git").as_uri(), cache_dir=tmp_path / "cache"
        )


# -- what a scan reads ---------------------------------------------------------------------


def test_the_contract_corpus_reads_like_the_vault(repo: Repo) -> None:
    handbook(repo)
    snapshot = GitSource("kb", repo.root).scan()
    assert snapshot.problems == ()
    assert keys(snapshot) == {"policies/leave-v1", "policies/leave-v2", "Onboarding", "EXP-1"}
    old = doc(snapshot, "policies/leave-v1")
    assert (old.family, old.version, old.state, old.superseded_by) == (
        "leave",
        1,
        VersionState.SUPERSEDED,
        "kb:policies/leave-v2",
    )
    assert old.path == "policies/leave-v1.md"
    assert old.content_hash == sha("Old leave rules.")
    plain = doc(snapshot, "Onboarding")
    assert plain.content_hash == sha("# Onboarding\n\nNo frontmatter at all.")
    assert doc(snapshot, "policies/leave-v2").effective_from == datetime(2024, 1, 1, tzinfo=UTC)


def test_uncommitted_changes_are_ignored(repo: Repo) -> None:
    repo.write("a.md", note("Committed.", version="1"))
    repo.commit()
    source = GitSource("kb", repo.root)
    before = source.scan()
    repo.write("a.md", note("Edited but not committed.", version="1"))
    repo.write("b.md", "Untracked.")
    repo.write("c.md", "Staged only.")
    repo.git("add", "c.md")
    after = source.scan()
    assert after.documents == before.documents
    assert keys(after) == {"a"}
    assert source.read_body("a") == "Committed."


def test_subdir_and_glob_select_the_files(repo: Repo) -> None:
    repo.write("docs/hr/leave.md", "Leave.")
    repo.write("docs/hr/notes.txt", "Not markdown.")
    repo.write("docs/.drafts/secret.md", "Hidden folder.")
    repo.write("docs/top.md", "Top.")
    repo.write("src/README.md", "Outside the subdir.")
    repo.commit()
    snapshot = GitSource("kb", repo.root, subdir="docs").scan()
    assert keys(snapshot) == {"hr/leave", "top"}
    assert doc(snapshot, "hr/leave").path == "hr/leave.md"
    only_hr = GitSource("kb", repo.root, subdir="docs/", glob="hr/*.txt").scan()
    assert keys(only_hr) == {"hr/notes.txt"}


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.md", "a.md", True),
        ("**/*.md", "x/y/a.md", True),
        ("**/*.md", "x/a.txt", False),
        ("**/*.md", ".github/a.md", False),
        ("**/*.md", "x/.a.md", False),
        ("*.md", "x/a.md", False),
        ("hr/**", "hr/x/y.md", True),
        ("hr/**", "other/x.md", False),
        ("policy-v[0-9].md", "policy-v2.md", True),
        ("policy-v[!0-9].md", "policy-v2.md", False),
        (".github/*.md", ".github/a.md", True),
        ("a?.md", "a/.md", False),
    ],
)
def test_glob(pattern: str, path: str, matches: bool) -> None:
    assert Vocabulary(include=(pattern,)).selects(path) is matches


def test_branch_option_and_default_head_branch(repo: Repo) -> None:
    repo.write("a.md", "On main.")
    repo.commit()
    repo.git("checkout", "-q", "-b", "published")
    repo.write("b.md", "Only on published.")
    repo.commit()
    assert keys(GitSource("kb", repo.root).scan()) == {"a", "b"}  # HEAD is on published
    assert keys(GitSource("kb", repo.root, branch="main").scan()) == {"a"}
    assert keys(GitSource("kb", repo.root, branch="refs/heads/published").scan()) == {"a", "b"}


# -- history: ordinals, renames, deletions, edits -------------------------------------------


def test_ordinals_count_the_commits_that_changed_the_file(repo: Repo) -> None:
    repo.write("a.md", note("One."))
    repo.write("declared.md", note("One.", version="7"))
    repo.commit("add")
    repo.write("a.md", note("Two."))
    repo.write("declared.md", note("Two.", version="7"))
    repo.commit("edit")
    repo.write("other.md", "Unrelated.")
    repo.commit("unrelated")
    repo.write("a.md", note("Two.", title="Frontmatter only"))
    repo.commit("frontmatter")
    repo.commit("empty")
    (repo.root / "a.md").chmod(0o755)
    repo.commit("mode only")
    snapshot = GitSource("kb", repo.root).scan()
    assert doc(snapshot, "a").version == 3
    assert doc(snapshot, "declared").version == 7  # frontmatter wins
    assert doc(snapshot, "other").version == 1


def test_a_merge_counts_once_on_the_tracked_branch(repo: Repo) -> None:
    repo.write("a.md", "One.")
    repo.commit()
    repo.git("checkout", "-q", "-b", "topic")
    repo.write("a.md", "Two.")
    repo.commit()
    repo.write("a.md", "Three.")
    repo.commit()
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    assert doc(GitSource("kb", repo.root).scan(), "a").version == 2


def test_a_rename_keeps_the_identity_and_the_family(repo: Repo) -> None:
    rules = "\n".join(f"{n}. A leave rule that stays as it is." for n in range(1, 9))
    repo.write("drafts/leave.md", note(f"Leave rules, first cut.\n\n{rules}"))
    repo.commit("add")
    source = GitSource("kb", repo.root)
    before = source.scan()
    first = doc(before, "drafts/leave")
    assignment = resolve_families(before.documents, known_by_key={}, known_by_hash={})
    known = {first.source_key: assignment.family_of[first.doc_id]}

    repo.mv("drafts/leave.md", "policies/leave.md")
    repo.commit("pure move")
    moved = doc(source.scan(), "drafts/leave")
    assert (moved.doc_id, moved.path, moved.version) == ("kb:drafts/leave", "policies/leave.md", 1)
    assert moved.content_hash == first.content_hash

    repo.mv("policies/leave.md", "policies/Leave Policy.md")
    repo.write("policies/Leave Policy.md", note(f"Leave rules, second cut.\n\n{rules}"))
    repo.commit("rename and edit")
    after = source.scan()
    renamed = doc(after, "drafts/leave")
    assert (renamed.path, renamed.version) == ("policies/Leave Policy.md", 2)
    assert source.read_body("drafts/leave").startswith("Leave rules, second cut.")
    family = resolve_families(after.documents, known_by_key=known, known_by_hash={})
    assert family.family_of["kb:drafts/leave"] == known["drafts/leave"]


def test_a_file_recreated_where_another_moved_from_is_a_new_document(repo: Repo) -> None:
    repo.write("guide.md", "The original guide, long enough to be detected as a rename.")
    repo.commit("add")
    repo.mv("guide.md", "archive/guide.md")
    repo.commit("archive")
    repo.write("guide.md", "A brand new guide with entirely different words in it.")
    added = repo.commit("new guide")
    snapshot = GitSource("kb", repo.root).scan()
    assert doc(snapshot, "guide").path == "archive/guide.md"  # the original keeps its identity
    assert doc(snapshot, f"guide@{added[:12]}").path == "guide.md"


def test_a_file_moved_into_the_source_enters_it_as_a_new_document(repo: Repo) -> None:
    repo.write("drafts/plan.md", "A plan written as a draft, moved into docs once approved.")
    repo.commit()
    repo.write("drafts/plan.md", "A plan written as a draft, moved into docs once approved!")
    repo.commit()
    repo.mv("drafts/plan.md", "docs/plan.md")
    moved_at = T0 + timedelta(days=3)
    repo.commit("publish", when=moved_at)
    got = doc(GitSource("kb", repo.root, subdir="docs").scan(), "plan")
    assert (got.path, got.version, got.effective_from) == ("plan.md", 1, moved_at)


def test_a_deleted_file_disappears(repo: Repo) -> None:
    repo.write("keep.md", "Keep.")
    repo.write("gone.md", "Gone soon.")
    repo.commit()
    source = GitSource("kb", repo.root)
    assert keys(source.scan()) == {"keep", "gone"}
    repo.git("rm", "-q", "gone.md")
    repo.commit("delete")
    snapshot = source.scan()
    assert keys(snapshot) == {"keep"}
    assert snapshot.complete
    with pytest.raises(DocumentUnreadable):
        source.read_body("gone")


def test_an_in_place_edit_changes_the_hash_but_not_the_version(repo: Repo) -> None:
    repo.write("pay.md", note("Meals up to 40 EUR.", id="pay-v2", version="2", status="current"))
    repo.commit()
    source = GitSource("kb", repo.root)
    before = doc(source.scan(), "pay-v2")
    repo.write("pay.md", note("Meals up to 55 EUR.", id="pay-v2", version="2", status="current"))
    repo.commit("quietly raise the limit")
    after = doc(source.scan(), "pay-v2")
    assert after.version == before.version == 2
    assert after.content_hash != before.content_hash
    assert after.content_hash == sha("Meals up to 55 EUR.")
    repo.write("pay.md", note("Meals up to 55 EUR.", id="pay-v2", version="2", title="Pay"))
    repo.commit("frontmatter only")
    assert doc(source.scan(), "pay-v2").content_hash == after.content_hash


# -- effective_from ------------------------------------------------------------------------


def test_effective_from_comes_from_frontmatter_else_the_commit_time(repo: Repo) -> None:
    repo.write("dated.md", note("Dated.", effective_from="2023-05-01"))
    repo.write("undated.md", note("Undated.", status="current"))
    repo.write("bad-date.md", note("Bad date.", effective_from="soon"))
    repo.commit(when=T0)
    snapshot = GitSource("kb", repo.root).scan()
    assert doc(snapshot, "dated").effective_from == datetime(2023, 5, 1, tzinfo=UTC)
    assert doc(snapshot, "undated").effective_from == T0
    assert doc(snapshot, "bad-date").effective_from == T0
    assert [p.kind for p in snapshot.problems] == [ProblemKind.INVALID_FIELD]

    always = GitSource("kb", repo.root, effective_from="commit").scan()
    assert doc(always, "dated").effective_from == T0


def test_commit_time_is_the_last_change_of_the_body_not_of_the_frontmatter(repo: Repo) -> None:
    repo.write("v1.md", note("Version one.", id="v1", status="current"))
    repo.commit("v1", when=T0)
    repo.write("v1.md", note("Version one.", id="v1", status="superseded", superseded_by="v2"))
    repo.write("v2.md", note("Version two.", id="v2", status="current"))
    repo.commit("v2 supersedes v1", when=T0 + timedelta(days=30))
    source = GitSource("kb", repo.root, effective_from="commit")
    snapshot = source.scan()
    assert doc(snapshot, "v1").effective_from == T0  # marking it superseded is no new start
    assert doc(snapshot, "v1").version == 2
    assert doc(snapshot, "v2").effective_from == T0 + timedelta(days=30)
    repo.write(
        "v1.md", note("Version one, amended.", id="v1", status="superseded", superseded_by="v2")
    )
    repo.commit("amend", when=T0 + timedelta(days=40))
    assert doc(source.scan(), "v1").effective_from == T0 + timedelta(days=40)


# -- broken notes --------------------------------------------------------------------------


def test_a_broken_note_is_a_problem_not_a_crash(repo: Repo) -> None:
    repo.write("good.md", note("Fine.", status="current"))
    repo.write("broken.md", "---\n: [unclosed\n---\nbody\n")
    repo.write("latin1.md", "caf\xe9".encode("latin-1"))
    repo.write("zz-dup.md", note("Second claim.", id="good"))
    repo.write("dangling.md", note("Points nowhere.", superseded_by="nothing-here"))
    repo.commit()
    snapshot = GitSource("kb", repo.root).scan()
    assert keys(snapshot) == {"dangling"}  # "good" is claimed twice: neither is taken
    found = {(p.kind, p.path, p.source_key) for p in snapshot.problems}
    assert found == {
        (ProblemKind.INVALID_FRONTMATTER, "broken.md", "broken"),
        (ProblemKind.UNDECODABLE, "latin1.md", "latin1"),
        (ProblemKind.DUPLICATE_ID, "good.md", "good"),
        (ProblemKind.DUPLICATE_ID, "zz-dup.md", "good"),
        (ProblemKind.DANGLING_SUPERSEDED_BY, "dangling.md", "dangling"),
    }
    [dangling] = [p for p in snapshot.problems if p.kind is ProblemKind.DANGLING_SUPERSEDED_BY]
    assert "names no note in the repository" in dangling.message


def test_undecodable_names_and_symlinks(repo: Repo) -> None:
    repo.write("ok.md", "Fine.")
    (repo.root / os.fsdecode(b"bad\xff.md")).write_text("x", encoding="utf-8")
    os.symlink("ok.md", repo.root / "alias.md")
    os.symlink("/etc/hostname.md", repo.root / "outside.md")
    repo.commit()
    snapshot = GitSource("kb", repo.root).scan()
    assert keys(snapshot) == {"ok"}
    assert sorted((p.kind, p.path) for p in snapshot.problems) == [
        (ProblemKind.LINK_OUTSIDE_ROOT, "outside.md"),
        (ProblemKind.UNDECODABLE, "bad\ufffd.md"),
    ]


# -- unavailable sources -------------------------------------------------------------------


def test_a_missing_path_or_a_folder_that_is_not_a_repository_is_unavailable(
    tmp_path: Path, repo: Repo
) -> None:
    with pytest.raises(SourceUnavailable, match="does not exist"):
        GitSource("kb", tmp_path / "nowhere").scan()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SourceUnavailable, match="not a git repository"):
        GitSource("kb", plain).scan()
    repo.write("docs/a.md", "A.")
    repo.commit()
    with pytest.raises(SourceUnavailable, match="not a git repository"):  # never the parent repo
        GitSource("kb", repo.root / "docs").scan()
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(SourceUnavailable, match="not a directory"):
        GitSource("kb", tmp_path / "file").scan()


def test_a_missing_branch_an_empty_repository_and_a_detached_head_are_unavailable(
    repo: Repo,
) -> None:
    with pytest.raises(SourceUnavailable, match="refs/heads/main"):
        GitSource("kb", repo.root).scan()  # no commit yet
    repo.write("a.md", "A.")
    repo.commit()
    with pytest.raises(SourceUnavailable, match="refs/heads/release"):
        GitSource("kb", repo.root, branch="release").scan()
    repo.git("checkout", "-q", "--detach")
    with pytest.raises(SourceUnavailable, match="HEAD"):
        GitSource("kb", repo.root).scan()
    assert keys(GitSource("kb", repo.root, branch="main").scan()) == {"a"}


# -- the clone-URL mirror ------------------------------------------------------------------


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Repo, Repo]:
    """A bare 'remote' and a working clone that pushes to it."""
    bare = Repo(tmp_path / "remote.git", bare=True)
    work = Repo(tmp_path / "work")
    work.git("remote", "add", "origin", str(bare.root))
    work.write("a.md", note("First.", status="current"))
    work.commit()
    work.git("push", "-q", "origin", "main")
    return bare, work


@pytest.mark.parametrize("as_uri", [False, True])
def test_url_mode_mirrors_and_fetches_on_each_scan(
    tmp_path: Path, remote: tuple[Repo, Repo], as_uri: bool
) -> None:
    bare, work = remote
    url = bare.root.as_uri() if as_uri else str(bare.root)
    cache = tmp_path / "cache" / "kb"
    source = GitSource("kb", url=url, cache_dir=cache)
    assert keys(source.scan()) == {"a"}
    assert (cache / "HEAD").is_file()
    assert not list(cache.parent.glob(".*clone*"))  # the staging folder is gone

    work.write("b.md", note("Pushed later.", status="current"))
    work.write("a.md", note("First, edited.", status="current"))
    work.commit("second")
    work.git("push", "-q", "origin", "main")
    snapshot = source.scan()
    assert keys(snapshot) == {"a", "b"}
    assert doc(snapshot, "a").version == 2
    assert source.read_body("b") == "Pushed later."
    # A new connector reuses the mirror rather than cloning again.
    assert keys(GitSource("kb", url=url, cache_dir=cache).scan()) == {"a", "b"}


def test_a_bare_repository_is_read_as_a_path(remote: tuple[Repo, Repo]) -> None:
    bare, _ = remote
    assert keys(GitSource("kb", bare.root).scan()) == {"a"}


def test_url_mode_fetch_failure_is_unavailable_never_a_stale_or_empty_scan(
    tmp_path: Path, remote: tuple[Repo, Repo]
) -> None:
    bare, _ = remote
    source = GitSource("kb", url=str(bare.root), cache_dir=tmp_path / "cache")
    assert keys(source.scan()) == {"a"}
    shutil.rmtree(bare.root)
    with pytest.raises(SourceUnavailable, match="fetching"):
        source.scan()


def test_url_mode_unreachable_url_is_unavailable(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    source = GitSource("kb", url=(tmp_path / "nope.git").as_uri(), cache_dir=cache)
    with pytest.raises(SourceUnavailable, match="cloning"):
        source.scan()
    assert not cache.exists()
    assert list(tmp_path.iterdir()) == []  # no half-made clone left behind


def test_url_mode_refuses_a_cache_dir_that_is_not_its_mirror(
    tmp_path: Path, remote: tuple[Repo, Repo]
) -> None:
    bare, work = remote
    head = work.git("rev-parse", "HEAD")
    for cache in (work.root, work.root / ".git"):
        with pytest.raises(SourceUnavailable, match="not a mirror"):
            GitSource("kb", url=str(bare.root), cache_dir=cache).scan()
    assert work.git("rev-parse", "HEAD") == head
    assert work.git("branch", "--list") == "* main"


def test_url_mode_follows_a_changed_url(tmp_path: Path, remote: tuple[Repo, Repo]) -> None:
    bare, _ = remote
    cache = tmp_path / "cache"
    assert keys(GitSource("kb", url=str(bare.root), cache_dir=cache).scan()) == {"a"}
    other = Repo(tmp_path / "other.git", bare=True)
    work = Repo(tmp_path / "work2")
    work.write("z.md", "Elsewhere.")
    work.commit()
    work.git("push", "-q", str(other.root), "main")
    assert keys(GitSource("kb", url=str(other.root), cache_dir=cache).scan()) == {"z"}


# -- settings ------------------------------------------------------------------------------


def settings(**values: Any) -> SimpleNamespace:
    base: dict[str, Any] = {"name": "kb", "type": "git", "path": None, "url": None, "options": {}}
    return SimpleNamespace(**{**base, **values})


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, [("path", "a git source needs path (a local repository) or url (a clone URL)")]),
        (
            {"path": "/r", "url": "https://example.com/r.git"},
            [("url", "set path (a local repository) or url (a clone URL), not both")],
        ),
        (
            {"path": "/r", "options": {"colour": "red"}},
            [("options.colour", "unknown option for a git source")],
        ),
        (
            {"path": "/r", "options": {"effective_from": "mtime"}},
            [("options.effective_from", "must be one of frontmatter, commit")],
        ),
        (
            {"path": "/r", "options": {"cache_dir": "/c"}},
            [("options.cache_dir", "cache_dir applies to url sources only")],
        ),
        (
            {"path": "/r", "options": {"subdir": "../up"}},
            [("options.subdir", "must be a folder inside the repository, like 'docs/hr'")],
        ),
        (
            {"path": "/r", "options": {"branch": "-x"}},
            [("options.branch", "'-x' is not a valid branch name")],
        ),
        (
            {"path": "/r", "options": {"timeout": 0}},
            [("options.timeout", "must be a positive number of seconds")],
        ),
        (
            {"url": "https://bot:hunter2@example.com/r.git"},
            [
                (
                    "url",
                    "credentials do not belong in the config file: use a git credential helper "
                    "or an SSH key (the git command's own configuration)",
                )
            ],
        ),
        (
            {
                "url": "git@example.com:docs.git",
                "options": {
                    "branch": "release/2024",
                    "subdir": "docs",
                    "glob": "**/*.markdown",
                    "effective_from": "commit",
                    "cache_dir": "/c",
                    "timeout": "30",
                },
            },
            [],
        ),
    ],
)
def test_config_problems(values: Mapping[str, Any], expected: list[tuple[str, str]]) -> None:
    assert GitSource.config_problems(settings(**values)) == expected


def test_from_settings_refuses_bad_settings() -> None:
    with pytest.raises(ConnectorConfigError, match=r"options\.glob"):
        GitSource.from_settings(settings(path="/r", options={"glob": ""}))


def test_the_git_type_is_installed_and_built_from_a_config_file(tmp_path: Path) -> None:
    assert installed()["git"] == "connectors.git:GitSource"
    config = tmp_path / "reconciler.toml"
    config.write_text(
        "[[sources]]\n"
        'name = "docs"\ntype = "git"\nurl = "https://example.com/docs.git"\n'
        '[sources.options]\nbranch = "main"\nsubdir = "handbook"\ncache_dir = "git-cache"\n',
        encoding="utf-8",
    )
    source = build_source(load_settings(config, environ={}).source("docs"))
    assert isinstance(source, GitSource)
    assert source.cache_dir == tmp_path / "git-cache"
    assert (source.branch, source.subdir, source.url) == (
        "main",
        "handbook",
        "https://example.com/docs.git",
    )


# -- end to end through the CLI ------------------------------------------------------------


def day(offset: int) -> str:
    return str(date.today() + timedelta(days=offset))


def run(config: Path, *args: str) -> tuple[int, Any]:
    result: Result = CliRunner().invoke(
        cli, ["--config", str(config), "--format", "json", *args], catch_exceptions=False
    )
    try:
        return result.exit_code, json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"exit {result.exit_code}: {result.output!r}") from exc


def findings(data: Mapping[str, Any]) -> set[tuple[str, str, str | None]]:
    return {(f["check"], f["kind"], f["doc_id"]) for f in data["findings"]}


def policy(version: int, body: str, **front: str) -> str:
    return note(
        f"# Policy\n\n{body}",
        id=f"policy-v{version}",
        family="policy",
        version=str(version),
        **front,
    )


def configured(tmp_path: Path, extra: str) -> Path:
    """A deployment config reading the repository ``handbook`` (``init`` done)."""
    config = tmp_path / "reconciler.toml"
    config.write_text(
        '[table]\nurl = "sqlite:///reconciler.db"\n[index]\npath = "qdrant"\n'
        'collection = "handbook"\n'
        '[[sources]]\nname = "hb"\ntype = "git"\npath = "handbook"\n' + extra,
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["--config", str(config), "init"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return config


def test_end_to_end_supersession_and_in_place_edit_through_the_cli(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "handbook")
    repo.write(
        "policy-v1.md", policy(1, "Meals up to 40 EUR.", status="current", effective_from=day(-300))
    )
    repo.write("runbook.md", note("# Runbook\n\nAnnounce the deploy.", status="current"))
    repo.commit("first")
    config = configured(
        tmp_path, '[sources.options]\nbranch = "main"\n[guard]\nmax_changed_fraction = 1.0\n'
    )
    code, ingest = run(config, "ingest")
    assert (code, ingest["totals"]["ingested"]) == (0, 2)
    assert run(config, "check")[0] == 0

    # v2 is published and v1 marked superseded in one commit; ingestion registers v2, but the
    # supersession update of the already registered v1 never happens.
    repo.write(
        "policy-v2.md", policy(2, "Meals up to 55 EUR.", status="current", effective_from=day(-2))
    )
    repo.write(
        "policy-v1.md",
        policy(
            1,
            "Meals up to 40 EUR.",
            status="superseded",
            superseded_by="policy-v2",
            effective_from=day(-300),
        ),
    )
    repo.commit("publish v2")
    code, ingest = run(config, "ingest")
    assert (code, ingest["totals"]["ingested"]) == (0, 1)
    code, data = run(config, "check")
    assert code == 2
    assert findings(data) == {
        ("family", "successor_not_marked", "hb:policy-v1"),
        ("siblings", "live_siblings", "hb:policy-v1"),  # its chunks still serve beside v2's
    }
    [finding] = [f for f in data["findings"] if f["kind"] == "successor_not_marked"]
    assert finding["expected"]["superseded_by"] == "hb:policy-v2"
    code, applied = run(config, "apply")
    assert code == 0
    assert applied["writes"]["table"] == 1
    assert run(config, "check")[0] == 0

    # An edit in place: the body of v2 changes, its version does not.
    repo.write(
        "policy-v2.md", policy(2, "Meals up to 65 EUR.", status="current", effective_from=day(-2))
    )
    repo.commit("quiet edit")
    code, data = run(config, "check")
    assert code == 2
    assert findings(data) == {("hash", "in_place_edit", "hb:policy-v2")}
    code, applied = run(config, "apply")
    assert (code, applied["writes"]["reingest"]) == (0, 1)
    code, ingest = run(config, "ingest", "--outbox-only")
    assert (code, ingest["totals"]["reingested"]) == (0, 1)
    code, data = run(config, "apply")
    assert findings(data) == {("hash", "quarantine_lifted", "hb:policy-v2")}
    code, data = run(config, "check")
    assert (code, data["findings"]) == (0, [])


def test_a_frontmatter_typo_keeps_the_identity_and_state_of_a_committed_note(
    tmp_path: Path,
) -> None:
    """The identity rule is the engine's, the same for every connector: a file that no
    longer parses is the document last seen at its path, never a missing one."""
    repo = Repo(tmp_path / "handbook")
    repo.write("net/vpn.md", note("# VPN\n\nUse the client.", id="vpn-policy", status="current"))
    repo.write("runbook.md", note("# Runbook\n\nAnnounce the deploy.", status="current"))
    repo.commit("first")
    config = configured(tmp_path, '[policy]\nmissing_in_source_grace = "1d"\n')
    assert run(config, "ingest")[0] == 0
    assert run(config, "apply")[0] == 0

    repo.write("net/vpn.md", note("# VPN\n\nUse the client.", id="vpn-policy", status="[current"))
    repo.commit("typo")
    month = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    code, data = run(config, "apply", "--now", month)
    assert code == 0
    assert findings(data) == {("family", "invalid_source_document", "hb:vpn-policy")}
    assert data["writes"]["table"] == data["writes"]["points"] == 0
    code, status = run(config, "status")
    assert status["by_state"] == {"current": 2}
