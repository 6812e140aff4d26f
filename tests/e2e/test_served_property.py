"""``reconciler audit served --at T`` is what retrieval got at T, as a property: over random
runs (notes retired, made current, draft or superseded again, applies evaluated as of other
instants, rollbacks of any earlier run, rollbacks of rollbacks), the test scrolls the
collection with ``default_filter(as_of=T)`` right after each step, at the instant T it
records; at the end, for every T, ``audit served --at T`` (the log alone) names exactly the
points that scroll returned, and the payload it says each point held is the payload the point
held then, as it is at a random instant between T and the log's next entry. One version comes into force a few seconds into the run, with no write: the filter
judges the windows at T.

Through the CLI, on SQLite and Qdrant local mode (hypothesis), and on PostgreSQL and a Qdrant
Edge shard (seeded runs of the same steps)."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, body, day, migrated_sqlite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from reconciler import default_filter
from reconciler.filters import default_edge_filter
from reconciler.model import MANAGED_KEYS

NOTES = ("a-v1", "a-v2", "b-v1", "c-v1")
FAMILIES = ("hb:a", "hb:b", "hb:c")
STATES = ("current", "retired", "draft", "superseded")

#: One step: a note's status changed then ``apply`` (as of ``days`` from now), or a rollback
#: (``--cascade``) of the ``pick``-th writing run so far (rollbacks included).
STEP = st.one_of(
    st.tuples(
        st.just("status"),
        st.sampled_from(NOTES),
        st.sampled_from(STATES),
        st.sampled_from((0, 0, 0, 40, -400)),
    ),
    st.tuples(st.just("rollback"), st.integers(0, 20), st.just(""), st.just(0)),
)


@contextmanager
def deployment(
    table_url: str = "sqlite:///reconciler.db", engine: str = "qdrant"
) -> Iterator[Deployment]:
    """Three families in a folder of their own: ``a`` of two versions, the second coming into
    force a few seconds from now (a pending version, served once its start has come)."""
    root = Path(tempfile.mkdtemp(prefix="served-property-"))
    try:
        if table_url == "sqlite:///reconciler.db":
            shutil.copy(migrated_sqlite(), root / "reconciler.db")
        deploy = Deployment(root, table_url, engine=engine)
        soon = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        deploy.note(
            "a-v1",
            body("a v1", "one", "two"),
            id="a-v1",
            family="a",
            version="1",
            status="current",
            effective_from=day(-300),
        )
        deploy.note(
            "a-v2",
            body("a v2", "one", "two", "three"),
            id="a-v2",
            family="a",
            version="2",
            status="pending",
            effective_from=soon,
        )
        deploy.note("b-v1", id="b-v1", family="b", status="current", effective_from=day(-30))
        deploy.note("c-v1", id="c-v1", family="c", status="draft")
        deploy.init_ingest()
        yield deploy
    finally:
        shutil.rmtree(root, ignore_errors=True)


def managed(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: payload.get(key) for key in MANAGED_KEYS}


def observe(deploy: Deployment) -> tuple[datetime, set[str], dict[str, dict[str, Any]]]:
    """Now, the points ``default_filter(as_of=now)`` returns, and every point's managed
    payload."""
    at = datetime.now(UTC)
    scroll = default_edge_filter(at) if deploy.engine == "edge" else default_filter(at)
    admitted = set(deploy.points(scroll).payloads)
    payloads = {pid: managed(p) for pid, p in deploy.points().payloads.items()}
    return at, admitted, payloads


def served(deploy: Deployment, at: datetime) -> dict[str, Any]:
    args = ["audit", "served", "--at", at.isoformat()]
    for family in FAMILIES:
        args += ["--family", family]
    code, data = deploy.json(*args)
    assert code == 0, data
    return data  # type: ignore[no-any-return]


def run(deploy: Deployment, steps: list[tuple[str, Any, str, int]], fraction: float = 0.5) -> None:
    """Each step, each observed; then every observation set against ``audit served``, at
    the instant it was made and at an instant ``fraction`` of the way to the log's next
    entry (the payloads stood still in between)."""
    observed = [observe(deploy)]
    runs: list[str] = []
    for what, which, value, days in steps:
        if what == "status":
            deploy.edit_front(which, status=value)
            args = ["apply"]
            if days:
                args += ["--now", (datetime.now(UTC) + timedelta(days=days)).isoformat()]
            code, data = deploy.json(*args)
            assert code == 0, data
            if data["writes"]["table"] or data["writes"]["payload"]:
                runs.append(data["run_id"])
        elif runs:
            result = deploy.cli(
                "--format", "json", "rollback", runs[which % len(runs)], "--cascade"
            )
            assert result.exit_code in (0, 1), result.output  # 1: it wrote nothing (undone)
            if result.exit_code == 0:
                runs.append(json.loads(result.stdout)["run_id"])
        observed.append(observe(deploy))
    code, shown = deploy.json("audit", "show", "--limit", "1000000")
    assert code == 0
    stamps = sorted(datetime.fromisoformat(e["at"]) for e in shown["entries"])
    for at, admitted, payloads in observed:
        later = next((t for t in stamps if t > at), at + timedelta(seconds=1))
        still = served(deploy, at + (later - at) * fraction)
        assert {
            str(point): variant["payloads"]
            for document in still["documents"]
            for variant in document["variants"]
            for point in variant["points"]
        } == {point: [payload] for point, payload in payloads.items()}
        answer = served(deploy, at)
        said = {
            str(point): variant
            for document in answer["documents"]
            for variant in document["variants"]
            for point in variant["points"]
        }
        assert {p for p, v in said.items() if v["admitted"]} == admitted, at
        assert set(said) == set(payloads), at  # every point, none the log does not know
        for point, variant in said.items():
            assert variant["status"] == "known", (at, point, variant)
            assert variant["payloads"] == [payloads[point]], (at, point)


@settings(max_examples=examples(6), suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=2, max_size=6), fraction=st.floats(0, 0.999))
def test_audit_served_is_what_the_filter_returned_then(
    steps: list[tuple[str, Any, str, int]], fraction: float
) -> None:
    with deployment() as deploy:
        run(deploy, steps, fraction)


def seeded_steps(seed: int) -> list[tuple[str, Any, str, int]]:
    rng = random.Random(seed)
    steps: list[tuple[str, Any, str, int]] = []
    for _ in range(rng.randint(3, 6)):
        if steps and rng.random() < 0.35:
            steps.append(("rollback", rng.randint(0, 20), "", 0))
        else:
            days = rng.choice((0, 0, 40, -400))
            steps.append(("status", rng.choice(NOTES), rng.choice(STATES), days))
    return steps


@pytest.mark.parametrize("seed", [1, 2])
def test_the_same_on_postgresql(seed: int, pg_url: str) -> None:
    with deployment(pg_url) as deploy:
        run(deploy, seeded_steps(seed), random.Random(seed).random())


@pytest.mark.parametrize("seed", [3, 4])
def test_the_same_on_a_qdrant_edge_shard(seed: int) -> None:
    with deployment(engine="edge") as deploy:
        run(deploy, seeded_steps(seed), random.Random(seed).random())
