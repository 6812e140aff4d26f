"""A split store through the CLI, on Qdrant local mode and on Qdrant Edge: an existing
deployment turned split (``[index] archive_collection``), ``split --dry-run`` and ``split``,
``apply`` keeping the split as the vault changes, ``rollback`` moving points back, what
``default_filter()`` answers on the main collection alone, and real ``reconciler split``
processes SIGKILLed at seeded moments of their moves, then finished by the next run."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe
from acceptance_kit import Deployment, kinds
from qdrant_client import QdrantClient, models

from reconciler.filters import default_edge_filter, default_filter, query_points
from reconciler.ports import ChunkIndex, split_of
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex

ENGINES = ("qdrant", "edge")
SERVABLE = {"current", "unknown", "pending"}


def split_config(deploy: Deployment, *, batch: int | None = None, moved: float = 1.0) -> None:
    """Turn the deployment into a split store (and set its write batch and moved fraction)."""
    text = deploy.config.read_text(encoding="utf-8").replace(
        'collection = "corpus"',
        'collection = "corpus"\narchive_collection = "corpus_archive"'
        + (f"\nscroll_batch = {batch}" if batch else ""),
    )
    text = text.replace("[guard]", f"[guard]\nmax_moved_fraction = {moved}")
    deploy.config.write_text(text, encoding="utf-8")


@contextmanager
def parts(deploy: Deployment) -> Iterator[tuple[ChunkIndex, ChunkIndex]]:
    """The main collection and the archive, opened as the deployment opens them."""
    with deploy.stores() as opened:
        split = split_of(opened.index)
        assert split is not None
        yield split.main, split.archive


def points(part: ChunkIndex) -> dict[str, tuple[bytes, dict[str, Any]]]:
    """Every point of a collection: its vector's float32 bytes and its whole payload."""
    if not part.exists():
        return {}
    ids = [state.point_id for state in part.scroll()]
    found = {}
    for start in range(0, len(ids), 500):
        for point in part.read_points(ids[start : start + 500]):
            vector = point.vector
            assert isinstance(vector, list)
            found[str(point.point_id)] = (struct.pack(f"<{len(vector)}f", *vector), point.payload)
    return found


def layout(deploy: Deployment) -> dict[str, dict[str, tuple[bytes, dict[str, Any]]]]:
    with parts(deploy) as (main, archive):
        return {"main": points(main), "archive": points(archive)}


def served(part: ChunkIndex, engine: str, **route: Any) -> set[str]:
    """doc ids of the chunks the default filter admits in one collection."""
    if not part.exists():
        return set()
    if engine == "edge":
        assert isinstance(part, EdgeChunkIndex)
        request = qe.ScrollRequest(
            limit=100_000, filter=default_edge_filter(**route), with_payload=True
        )
        found, _ = part.shard.scroll(request)
    else:
        assert isinstance(part, QdrantChunkIndex)
        found, _ = part.client.scroll(
            part.collection, scroll_filter=default_filter(**route), limit=100_000
        )
    return {str((p.payload or {}).get("doc_id")) for p in found}


def deployment(root: Path, engine: str, families: int, sections: int) -> Deployment:
    """Families of three versions, ingested and applied as one collection."""
    deploy = Deployment(root, engine=engine)
    for n in range(families):
        deploy.family(f"f{n:03d}", 3, sections=sections)
    deploy.init_ingest()
    code, data = deploy.json("apply")
    assert code == 0, data
    return deploy


@pytest.mark.parametrize("engine", ENGINES)
def test_an_existing_deployment_is_split_on_purpose_and_stays_split(
    engine: str, tmp_path: Path
) -> None:
    deploy = deployment(tmp_path / "d", engine, families=6, sections=2)
    before = layout_one(deploy)
    split_config(deploy, moved=0.2)

    # turned split: every superseded chunk is misplaced, and an apply would move too much
    code, data = deploy.json("check")
    assert code == 2
    assert ("payload", "misplaced", "hb:f000-v1") in kinds(data)
    assert data["writes"]["moves"] == 6 * 2 * 2
    assert data["guard"]["over"] == ["moved"]
    code, refused = deploy.json("apply")
    assert code == 3, refused
    text = deploy.cli("split", "--dry-run").output
    assert "would move 24 chunk(s) of 12 document(s) in 6 family(ies) to 'corpus_archive'" in text
    code, dry = deploy.json("split", "--dry-run")
    assert (code, dry["run_id"], dry["to_archive"]["points"]) == (0, None, 24)
    assert dry["to_archive"]["by_state"] == {"superseded": 24}
    assert layout(deploy)["archive"] == {}  # nothing moved

    code, done = deploy.json("split")
    assert code == 0, done
    assert done["moved"] == 24
    after = layout(deploy)
    assert sorted(after["main"].keys() | after["archive"].keys()) == sorted(before)
    assert not after["main"].keys() & after["archive"].keys()
    for pid, point in (after["main"] | after["archive"]).items():
        assert point == before[pid]  # vector byte for byte, payload as it was
    # a retrieval path that forgets default_filter() on the main collection
    assert {p["version_state"] for _v, p in after["main"].values()} == {"current"}
    code, data = deploy.json("check")
    assert (code, kinds(data), data["writes"]["moves"]) == (0, set(), 0)
    status = deploy.json("status")[1]
    assert status["index"]["archive"] == {"collection": "corpus_archive", "chunks": 24}
    assert deploy.json("audit", "verify")[0] == 0


def layout_one(deploy: Deployment) -> dict[str, tuple[bytes, dict[str, Any]]]:
    """Every point of the deployment's one collection (before it is split)."""
    with deploy.stores() as opened:
        return points(opened.index)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_main_collection_answers_the_default_route_at_every_instant(
    engine: str, tmp_path: Path
) -> None:
    """After ``apply``, the default filter on the main collection alone admits what it
    admits on both, now and at past and future instants (the default route admits only
    servable versions, which the main collection holds); the historical route needs both.
    And the main collection scrolled without any filter holds no superseded chunk."""
    deploy = deployment(tmp_path / "d", engine, families=3, sections=1)
    split_config(deploy)
    assert deploy.json("split")[0] == 0
    deploy.edit_front("f001-v3", status="retired")  # never in force: f001-v2 is again
    deploy.note(
        "f002-v4",
        "f002 v4\n\nto come.\n",
        id="f002-v4",
        family="f002",
        version="4",
        status="current",
        effective_from=(datetime.now(UTC) + timedelta(days=30)).date().isoformat(),
    )
    deploy.edit_front("f002-v3", superseded_by="f002-v4")
    assert deploy.json("ingest")[0] == 0
    code, data = deploy.json("apply")
    assert code == 0, data
    assert deploy.json("check")[0] == 0

    with parts(deploy) as (main, archive):
        unfiltered = [s.payload for s in main.scroll()]
        assert unfiltered
        assert {p["version_state"] for p in unfiltered} <= SERVABLE
        assert {p["doc_id"] for p in unfiltered} == {
            "hb:f000-v3",
            "hb:f001-v2",  # moved back from the archive
            "hb:f002-v3",  # in force until f002-v4 starts: its successor has not started
            "hb:f002-v4",  # pending
        }
        now = datetime.now(UTC)
        for days in (-250, -150, -50, -1, 0, 1, 29, 31, 400):
            at = now + timedelta(days=days)
            both = served(main, engine, as_of=at) | served(archive, engine, as_of=at)
            assert served(main, engine, as_of=at) == both, days
        past = now - timedelta(days=250)  # when v1 of each family was in force
        history = served(main, engine, as_of=past, include_historical=True)
        history |= served(archive, engine, as_of=past, include_historical=True)
        assert history == {"hb:f000-v1", "hb:f001-v1", "hb:f002-v1"}
        assert served(main, engine, as_of=past, include_historical=True) == set()
        if isinstance(main, QdrantChunkIndex):  # the helper that searches what a route needs
            probe = main.read_points([next(iter(main.scroll())).point_id])[0].vector
            search = {"collection": "corpus", "archive": "corpus_archive", "limit": 50}
            default = query_points(main.client, probe, as_of=past, **search)
            alone = query_points(main.client, probe, as_of=past, collection="corpus", limit=50)
            assert [p.id for p in default] == [p.id for p in alone]
            found = query_points(main.client, probe, as_of=past, include_historical=True, **search)
            assert {(p.payload or {})["doc_id"] for p in found} == history
            scores = [p.score for p in found]
            assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("engine", ENGINES)
def test_rollback_of_a_run_that_moved_points_moves_them_back(engine: str, tmp_path: Path) -> None:
    deploy = deployment(tmp_path / "d", engine, families=2, sections=2)
    split_config(deploy)
    assert deploy.json("split")[0] == 0
    before = layout(deploy)
    rows = deploy.rows()
    deploy.edit_front("f000-v3", status="retired")

    code, applied = deploy.json("apply")
    assert code == 0, applied
    assert applied["writes"]["moves"] == 4  # v3 to the archive, v2 back to the main one
    moved = layout(deploy)
    assert {p["doc_id"] for _v, p in moved["main"].values()} == {"hb:f000-v2", "hb:f001-v3"}
    # the log answers for moved points as for any: by id, wherever they are now
    code, answer = deploy.json("audit", "served", "--at", "now", "--family", "hb:f000")
    assert code == 0, answer
    assert answer["log"]["not_read"] == {}
    assert answer["served"] == ["hb:f000-v2"]

    code, rolled = deploy.json("rollback", applied["run_id"])
    assert code == 0, rolled
    assert rolled["moves"] == 4
    assert layout(deploy) == before  # every point where it was, as it was
    assert {k: r["version_state"] for k, r in deploy.rows().items()} == {
        k: r["version_state"] for k, r in rows.items()
    }
    assert deploy.json("audit", "verify")[0] == 0


# -- SIGKILL --------------------------------------------------------------------------------

FAMILIES = 80
SECTIONS = 6  # 80 families x 3 versions x 6 chunks = 1,440 points, 960 of them to move
BATCH = 16


@pytest.fixture(scope="module", params=ENGINES)
def template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, dict[str, tuple[bytes, dict[str, Any]]]]:
    """A deployment applied as one collection, then configured as a split store (about 60
    batches to move). Returns its folder, its engine and every point before the split."""
    engine = request.param
    root = tmp_path_factory.mktemp(f"split-{engine}") / "template"
    deploy = deployment(root, engine, families=FAMILIES, sections=SECTIONS)
    split_config(deploy, batch=BATCH)
    return root, engine, layout_one(deploy)


def audited(db: Path) -> dict[str, int]:
    """Move entries audited so far (read beside the running process: WAL)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        rows = conn.execute(
            "SELECT target_type, COUNT(*) FROM audit_log WHERE target_type LIKE 'move%' "
            "GROUP BY target_type"
        ).fetchall()
    return {kind: int(n) for kind, n in rows}


def kill_during_moves(deploy: Deployment, seed: int) -> dict[str, int]:
    """Start ``reconciler split`` and SIGKILL it once it has audited a random number of move
    intents, after a random few milliseconds; return what it had audited."""
    rng = random.Random(seed)
    after, delay = rng.randint(2, 40), rng.uniform(0, 0.02)
    db = deploy.root / "reconciler.db"
    code = "from reconciler.cli import main; main()"
    errors = (deploy.root / "split.err").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-c", code, "--config", str(deploy.config), "split"],
        stdout=subprocess.DEVNULL,
        stderr=errors,
        env={**os.environ, "RECONCILER_CONFIG": ""},
    )
    deadline = time.monotonic() + 180
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if audited(db).get("move", 0) >= after:
                time.sleep(delay)
                break
            time.sleep(0.002)
        errors.close()
        stderr = (deploy.root / "split.err").read_text(errors="replace")[-2000:]
        assert process.poll() is None, f"the split ended before it could be killed: {stderr}"
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    return audited(db)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_killed_split_is_finished_by_the_next_run(
    template: tuple[Path, str, dict[str, tuple[bytes, dict[str, Any]]]],
    tmp_path: Path,
    seed: int,
) -> None:
    root, engine, before = template
    shutil.copytree(root, tmp_path / "d")
    deploy = Deployment(tmp_path / "d", engine=engine)  # (which writes its config again)
    split_config(deploy, batch=BATCH)

    seen = kill_during_moves(deploy, seed)
    killed = layout(deploy)
    runs = [r for r in deploy.dump()["runs"].values() if r["mode"] == "split"]
    [dead] = [r for r in runs if r["status"] == "running"]
    # every point is in at least one collection, as it was
    assert sorted(killed["main"].keys() | killed["archive"].keys()) == sorted(before)
    for place in ("main", "archive"):
        for pid, point in killed[place].items():
            assert point == before[pid]

    code, done = deploy.json("split")  # the next run finishes the move, then the rest

    assert code == 0, done
    assert deploy.dump()["runs"][dead["run_id"]]["status"] == "interrupted"
    after = layout(deploy)
    assert not after["main"].keys() & after["archive"].keys(), seen
    assert sorted(after["main"].keys() | after["archive"].keys()) == sorted(before)
    for place, held in after.items():
        for pid, point in held.items():
            assert point == before[pid], (place, pid)  # vectors byte-identical
            kept = point[1]["version_state"] in SERVABLE
            assert kept == (place == "main"), (place, pid)
    assert deploy.json("audit", "verify")[0] == 0
    code, data = deploy.json("check")
    assert (code, kinds(data)) == (0, set())


def test_bootstrap_adopts_the_documents_of_both_collections(tmp_path: Path) -> None:
    """A split store built by another pipeline (current versions in the main collection,
    superseded ones in the archive) is adopted whole: a row for every document of either,
    with its chunks counted in both; then the reconciler finds each chunk where it belongs."""
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    old = {"version_state": "superseded", "superseded_by": "kb:v2", "doc_family_id": "kb:f"}
    new = {"version_state": "current", "doc_family_id": "kb:f"}
    try:
        for name, doc_id, payload in (("corpus", "kb:v2", new), ("corpus_archive", "kb:v1", old)):
            client.create_collection(
                name, vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
            )
            client.upsert(
                name,
                [
                    models.PointStruct(
                        id=n + (0 if name == "corpus" else 10),
                        vector=[1.0, float(n), 0.5, 0.25],
                        payload={"doc_id": doc_id, "chunk_id": f"{doc_id}#{n}", **payload},
                    )
                    for n in range(3)
                ],
            )
    finally:
        client.close()
    config = tmp_path / "reconciler.toml"
    config.write_text(
        '[table]\nurl = "sqlite:///reconciler.db"\n[index]\npath = "qdrant"\n'
        'collection = "corpus"\narchive_collection = "corpus_archive"\n'
        "[guard]\nmax_changed_fraction = 1.0\n[bootstrap]\n"
        'preset = "native"\nsource = "kb"\n',
        encoding="utf-8",
    )
    deploy = Deployment.__new__(Deployment)  # (the config above, not the kit's own)
    deploy.root, deploy.config, deploy.engine = tmp_path, config, "qdrant"

    code, adopted = deploy.json("bootstrap")

    assert code == 0, adopted
    assert adopted["chunks_scanned"] == 6
    assert {d["doc_id"]: (d["state"], d["chunks"]) for d in adopted["documents"]} == {
        "kb:v1": ("superseded", 3),
        "kb:v2": ("current", 3),
    }
    code, data = deploy.json("check", "--check", "payload")
    assert ("payload", "misplaced") not in {(f["check"], f["kind"]) for f in data["findings"]}
    assert data["writes"]["moves"] == 0
