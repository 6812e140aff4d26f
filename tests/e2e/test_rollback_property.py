"""A rollback's dry run is the rollback, as a property: over random histories of runs (notes
retired, made current or draft again, re-classified, a row changed by hand between runs), what
``rollback RUN --dry-run`` (with or without ``--cascade``) reports — its exit code, and per
rolled-back run the rows, payload writes and chunks restored and what is left undone — is
exactly what the real ``rollback RUN`` then does, and the dry run changed nothing in either
store. Through the CLI, on SQLite and Qdrant local mode."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from acceptance_kit import Deployment, migrated_sqlite
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

NOTES = ("p0", "p1", "p2")
#: One change made between two runs: (what, note, value).
STEP = st.one_of(
    st.tuples(st.just("status"), st.sampled_from(NOTES), st.sampled_from(("current", "retired"))),
    st.tuples(st.just("status"), st.sampled_from(NOTES), st.just("draft")),
    st.tuples(st.just("doc_class"), st.sampled_from(NOTES), st.sampled_from(("a", "b", "c"))),
    st.tuples(st.just("by_hand"), st.sampled_from(NOTES), st.sampled_from(("a", "b", "c"))),
)


@contextmanager
def deployment() -> Iterator[Deployment]:
    """A deployment of three notes, ingested and reconciled, in a folder of its own."""
    root = Path(tempfile.mkdtemp(prefix="rollback-property-"))
    try:
        shutil.copy(migrated_sqlite(), root / "reconciler.db")
        deploy = Deployment(root)
        for note in NOTES:
            deploy.note(note, family=note, status="current", doc_class="a")
        deploy.init_ingest()
        assert deploy.json("apply")[0] == 0
        yield deploy
    finally:
        shutil.rmtree(root, ignore_errors=True)


def restored(data: dict[str, Any]) -> dict[str, Any]:
    """What a rollback restored (or its dry run would), without the run ids it ran as."""
    return {
        "rolled_back": data["rolled_back"],
        "rows": data["rows"],
        "payload_writes": data["payload_writes"],
        "points": data["points"],
        "not_undone": data["not_undone"],
        "cascaded": [restored(c) for c in data["cascaded"]],
    }


def rollback(deploy: Deployment, *args: str) -> tuple[int, Any]:
    """Exit code, and what was restored (or the message it refused or failed with)."""
    result = deploy.cli("--format", "json", "rollback", *args)
    if result.exit_code != 0:
        return result.exit_code, result.output
    return 0, restored(json.loads(result.stdout))


def everything(deploy: Deployment) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every row of every table, and every point's payload."""
    return deploy.dump(), deploy.points().payloads


@settings(max_examples=examples(8), suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(st.lists(STEP, min_size=1, max_size=3), min_size=2, max_size=5),
    pick=st.integers(min_value=0, max_value=9),
    cascade=st.booleans(),
)
def test_a_rollback_does_what_its_dry_run_said(
    history: list[list[tuple[str, str, str]]], pick: int, cascade: bool
) -> None:
    with deployment() as deploy:
        runs = []
        for changes in history:
            for what, note, value in changes:
                if what == "by_hand":
                    deploy.set_row(f"hb:{note}", doc_class=value)
                else:
                    deploy.edit_front(note, **{what: value})
            code, applied = deploy.json("apply")
            assert code == 0, applied
            if applied["writes"]["table"] or applied["writes"]["payload"]:
                runs.append(applied["run_id"])
        assume(runs)
        target = runs[pick % len(runs)]
        flags = ["--cascade"] if cascade else []

        before = everything(deploy)
        dry = rollback(deploy, target, *flags, "--dry-run")
        assert everything(deploy) == before  # the dry run wrote nothing, anywhere
        code, done = rollback(deploy, target, *flags)
        assert dry == (code, done)
        if code == 3:  # refused: a later run changed the same documents
            assert not cascade
            assert everything(deploy) == before
