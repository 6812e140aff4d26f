"""Whatever a batch of vault changes is (retirements, supersessions, deletions, new versions, a
version moved to another family), the watch's run over the files of the changed families
alone leaves the corpus as a whole ``repair`` over every file leaves it: the same rows'
states, the same served set."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, day
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from connectors.vault import VaultSource
from reconciler.app.operations import engine_options, reconcile
from reconciler.app.watch_scope import watch_scope
from reconciler.app.wiring import open_table

#: (name, front) of the notes the corpus starts with.
NOTES: list[tuple[str, dict[str, str]]] = [
    ("a1", {"id": "a1", "family": "a", "version": "1", "status": "current"}),
    ("a2", {"id": "a2", "family": "a", "version": "2", "status": "draft"}),
    ("b1", {"id": "b1", "family": "b", "version": "1", "status": "current"}),
    ("c1", {"id": "c1", "family": "c", "version": "1", "status": "current"}),
    ("loose", {"id": "loose", "status": "current"}),
]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("retire"), st.sampled_from(["a1", "b1", "c1", "loose"])),
        st.tuples(st.just("supersede"), st.just("a1")),
        st.tuples(st.just("delete"), st.sampled_from(["a2", "b1", "loose"])),
        st.tuples(st.just("new"), st.sampled_from(["b", "c"])),
        st.tuples(st.just("move"), st.sampled_from(["b", "c"])),
    ),
    min_size=1,
    max_size=3,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dep = Deployment(tmp_path_factory.mktemp("built"))
    for name, front in NOTES:
        dep.note(name, effective_from=day(-30), **front)
    dep.init_ingest()
    return dep.root


def _apply(dep: Deployment, changes: list[tuple[str, str]]) -> set[str]:
    """Make the changes; the paths they touched."""
    touched: set[str] = set()
    for kind, what in changes:
        if kind == "retire" and (dep.vault / f"{what}.md").exists():
            dep.edit_front(what, status="retired")
            touched.add(f"{what}.md")
        elif kind == "supersede" and (dep.vault / "a2.md").exists():
            dep.edit_front("a1", status="superseded", superseded_by="a2")
            dep.edit_front("a2", status="current")
            touched |= {"a1.md", "a2.md"}
        elif kind == "delete" and (dep.vault / f"{what}.md").exists():
            (dep.vault / f"{what}.md").unlink()
            touched.add(f"{what}.md")
        elif kind == "new":
            dep.note(f"{what}2", id=f"{what}2", family=what, version="2", status="current",
                     effective_from=day(-1))  # fmt: skip
            dep.edit_front(f"{what}1", status="superseded") if (
                dep.vault / f"{what}1.md"
            ).exists() else None
            touched |= {f"{what}2.md", f"{what}1.md"}
        elif kind == "move" and (dep.vault / "a2.md").exists():
            dep.edit_front("a2", family=what)
            touched.add("a2.md")
    return touched


def _state(dep: Deployment) -> tuple[dict[str, Any], set[str]]:
    rows = {doc_id: row["version_state"] for doc_id, row in dep.rows().items()}
    return rows, dep.served()


@settings(
    max_examples=examples(6),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(changes=ops)
@example(changes=[("move", "b"), ("retire", "b1")])
@example(changes=[("delete", "a2"), ("supersede", "a1")])
def test_the_watch_run_over_the_changed_families_is_the_whole_repair(
    built: Path, tmp_path_factory: pytest.TempPathFactory, changes: list[tuple[str, str]]
) -> None:
    where = tmp_path_factory.mktemp("copies")
    shutil.copytree(built, where / "watch")
    shutil.copytree(built, where / "whole")
    watched = Deployment(where / "watch", configured=True)
    whole = Deployment(where / "whole", configured=True)
    touched = _apply(watched, changes)
    assert _apply(whole, changes) == touched
    table = open_table(watched.settings)
    try:
        scope = watch_scope(
            table, VaultSource("hb", watched.vault), touched,
            exists=lambda p: (watched.vault / p).exists(),
        )  # fmt: skip
        families = table.known_families(scope.families)
    finally:
        table.close()
    if families:
        options = engine_options(watched.settings, mode="repair", actor="watch",
                                 families=sorted(families))  # fmt: skip
        if scope.paths is not None:
            options = dataclasses.replace(options, paths={"hb": scope.paths})
        reconcile(watched.settings, options)
    reconcile(whole.settings, engine_options(whole.settings, mode="repair"))
    assert _state(watched) == _state(whole)
