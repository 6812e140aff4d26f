"""What one batch of the watch reads (``reconciler.app.watch_scope``): every document of the
changed paths' families, found through the identity map and the rows, and the whole source
where reading by path could judge otherwise than a whole scan."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from acceptance_kit import Deployment, day

from connectors.vault import VaultSource
from reconciler.app.watch_scope import watch_scope
from reconciler.app.wiring import open_table
from reconciler.stores.sql import SqlDocumentTable


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dep = Deployment(tmp_path_factory.mktemp("built"))
    dep.note("leave-v1", id="leave-v1", family="leave", version="1", status="current",
             effective_from=day(-100))  # fmt: skip
    dep.note("leave-v2", id="leave-v2", family="leave", version="2", status="draft",
             effective_from=day(-1))  # fmt: skip
    dep.note("runbook", id="runbook", family="runbook", status="current", effective_from=day(-9))
    dep.note("loose", id="loose", status="current", effective_from=day(-9))  # (no family)
    dep.init_ingest()
    return dep.root


@pytest.fixture
def dep(built: Path, tmp_path: Path) -> Deployment:
    """A copy of the one built deployment (its config names relative paths)."""
    shutil.copytree(built, tmp_path / "dep")
    return Deployment(tmp_path / "dep", configured=True)


@pytest.fixture
def table(dep: Deployment) -> Iterator[SqlDocumentTable]:
    opened = open_table(dep.settings)
    try:
        yield opened
    finally:
        opened.close()


def scope_of(dep: Deployment, table: SqlDocumentTable, *changed: str):  # type: ignore[no-untyped-def]
    return watch_scope(
        table, VaultSource("hb", dep.vault), set(changed), exists=lambda p: (dep.vault / p).exists()
    )


def test_a_changed_version_reads_its_whole_family(dep: Deployment, table: SqlDocumentTable) -> None:
    dep.edit_front("leave-v2", status="current")
    scope = scope_of(dep, table, "leave-v2.md")
    assert scope.families == {"hb:leave"}
    assert scope.paths == {"leave-v1.md", "leave-v2.md"}
    assert (scope.known, scope.gone) == ({"leave-v2.md"}, set())


def test_a_deleted_version_is_gone_and_its_siblings_are_read(
    dep: Deployment, table: SqlDocumentTable
) -> None:
    (dep.vault / "leave-v1.md").unlink()
    scope = scope_of(dep, table, "leave-v1.md")
    assert scope.families == {"hb:leave"}
    assert scope.paths == {"leave-v1.md", "leave-v2.md"}
    assert scope.gone == {"leave-v1.md"}


def test_a_version_that_moves_family_reads_both(dep: Deployment, table: SqlDocumentTable) -> None:
    dep.edit_front("leave-v2", family="runbook")
    scope = scope_of(dep, table, "leave-v2.md")
    assert scope.families == {"hb:leave", "hb:runbook"}
    assert scope.paths == {"leave-v1.md", "leave-v2.md", "runbook.md"}


def test_a_note_without_a_family_of_its_own_is_read_by_its_identity(
    dep: Deployment, table: SqlDocumentTable
) -> None:
    dep.edit_front("loose", status="retired")
    scope = scope_of(dep, table, "loose.md")
    assert scope.paths == {"loose.md"}
    assert len(scope.families) == 1


@pytest.mark.parametrize(
    ("name", "front"),
    [
        ("new", {"id": "new", "status": "current"}),  # new, and no family of its own
        ("new", {"id": "new", "status": "current", "superseded_by": "nowhere"}),
    ],
)
def test_what_a_path_read_could_judge_otherwise_reads_the_source_whole(
    dep: Deployment, table: SqlDocumentTable, name: str, front: dict[str, str]
) -> None:
    dep.note(name, **front)
    scope = scope_of(dep, table, f"{name}.md")
    assert scope.paths is None
    assert scope.known == {f"{name}.md"}


def test_a_link_to_a_document_not_read_reads_the_source_whole(
    dep: Deployment, table: SqlDocumentTable
) -> None:
    dep.edit_front("runbook", superseded_by="nowhere-yet", family="runbook")
    scope = scope_of(dep, table, "runbook.md")
    assert scope.paths is None
    assert "hb:runbook" in scope.families
