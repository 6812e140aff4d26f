"""Reading a source at some paths only (``scan_paths``: ``serve``'s watch reads the changed
files, not the whole source): whatever the notes, the documents read at a set of paths that
holds whole families are exactly those a whole scan finds there; a connector that cannot
read by path is read whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_kit import Repo
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from connectors.git import GitSource
from connectors.vault import VaultSource
from reconciler.model import SourceDocument, SourceSnapshot
from reconciler.ports.source import scan_paths

#: One family: (its versions' statuses, whether its notes name the family, whether each
#: later version is linked from the one before, whether one note is broken).
Family = tuple[list[str], bool, bool, bool]

families = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["current", "superseded", "draft", "retired"]), min_size=1,
                 max_size=3),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=5,
)  # fmt: skip


def notes_of(shape: list[Family]) -> dict[str, str]:
    """Relative path -> note text, family ``n`` in folder ``f<n>/`` (``f<n>/v<v>.md``)."""
    files: dict[str, str] = {}
    for n, (statuses, named, linked, broken) in enumerate(shape):
        for v, status in enumerate(statuses, start=1):
            fields = [f"id: f{n}-v{v}", f"version: {v}", f"status: {status}"]
            if named:
                fields.append(f"family: fam{n}")
            if linked and v < len(statuses):
                fields.append(f"superseded_by: f{n}-v{v + 1}")
            text = "---\n" + "\n".join(fields) + f"\n---\n# F{n} v{v}\n\nBody {n} {v}.\n"
            if broken and v == 1:
                text = "---\nid: [unclosed\n---\nbody\n"
            files[f"f{n}/v{v}.md"] = text
    return files


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _at(snapshot: SourceSnapshot, paths: set[str]) -> tuple[list[SourceDocument], list[str]]:
    documents = sorted((d for d in snapshot.documents if d.path in paths), key=lambda d: d.doc_id)
    problems = sorted(f"{p.kind}:{p.path}" for p in snapshot.problems if p.path in paths)
    return documents, problems


def _chosen(files: dict[str, str], picks: list[bool]) -> set[str]:
    """The paths of the families ``picks`` selects (whole families), with paths that are no
    note: one deleted, one hidden, one that is not markdown."""
    chosen = {rel for rel in files if picks[int(rel.split("/")[0][1:]) % len(picks)]}
    return chosen | {"gone.md", ".obsidian/x.md", "f0/notes.txt"}


@settings(max_examples=examples(25), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=families, picks=st.lists(st.booleans(), min_size=1, max_size=5))
@example(shape=[(["current", "superseded"], False, True, True)], picks=[True])
@example(shape=[(["superseded", "current"], True, True, False)], picks=[False])
def test_a_vault_read_at_whole_families_paths_is_the_scan_there(
    tmp_path_factory: pytest.TempPathFactory, shape: list[Family], picks: list[bool]
) -> None:
    root = tmp_path_factory.mktemp("vault")
    files = notes_of(shape)
    _write(root, files)
    (root / "f0").mkdir(exist_ok=True)
    (root / "f0" / "notes.txt").write_text("not a note", encoding="utf-8")
    chosen = _chosen(files, picks)
    whole = VaultSource("kb", root).scan()
    read, by_path = scan_paths(VaultSource("kb", root), chosen)
    assert by_path
    assert _at(read, chosen) == _at(whole, chosen)
    assert {d.path for d in read.documents} <= chosen


def test_a_git_read_at_some_paths_is_the_scan_there(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    files = notes_of(
        [(["current", "superseded"], False, True, False), (["draft"], True, False, True)]
    )
    for rel, text in files.items():
        repo.write(rel, text)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "notes")
    repo.mv("f0/v1.md", "f0/first.md")  # (a rename keeps its identity: from the history)
    repo.git("commit", "-q", "-m", "renamed")
    source = GitSource("gh", path=repo.root)
    whole = source.scan()
    chosen = {"f0/first.md", "f0/v2.md", "gone.md"}
    read, by_path = scan_paths(GitSource("gh", path=repo.root), chosen)
    assert by_path
    assert _at(read, chosen) == _at(whole, chosen)
    assert {d.path for d in read.documents} == {"f0/first.md", "f0/v2.md"}
    broken = {"f1/v1.md"}
    assert _at(scan_paths(source, broken)[0], broken) == _at(whole, broken)
    assert _at(whole, broken)[1]  # (the broken note is a problem, read alone as well)


class _WholeOnly:
    """A connector that reads its source whole only (no ``scan_paths``)."""

    name = "plain"

    def __init__(self, root: Path) -> None:
        self.inner = VaultSource("plain", root)

    def scan(self) -> SourceSnapshot:
        return self.inner.scan()

    def read_body(self, source_key: str) -> str:
        return self.inner.read_body(source_key)


def test_a_connector_that_cannot_read_by_path_is_read_whole(tmp_path: Path) -> None:
    files = notes_of([(["current"], True, False, False), (["current"], True, False, False)])
    _write(tmp_path, files)
    read, by_path = scan_paths(_WholeOnly(tmp_path), {"f0/v1.md"})
    assert not by_path
    assert {d.path for d in read.documents} == {"f0/v1.md", "f1/v1.md"}
