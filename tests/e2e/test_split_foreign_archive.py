"""Issue 36, item 3: an archive collection someone else made first (``[index]
archive_collection`` names a collection that exists with another vector size and distance) made
every ``run`` and ``split`` fail with a 34-frame ``ValueError`` until a person dropped it. Now
``split`` (and ``split --dry-run``) refuses with exit 3, naming the collection and what
differs, and writes nothing into it; ``run`` reconciles the main collection alone (a vault's
retirement is applied) and says why it moved nothing. No traceback. Qdrant local mode and
Qdrant Edge, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import qdrant_edge as qe
from acceptance_kit import Deployment
from qdrant_client import QdrantClient, models

ENGINES = ("qdrant", "edge")


def foreign_archive(dep: Deployment) -> None:
    """A collection ``corpus_archive`` of 7-dimensional Dot vectors, made before the split."""
    if dep.engine == "qdrant":
        client = QdrantClient(path=str(dep.root / "qdrant"))
        try:
            client.create_collection(
                "corpus_archive",
                vectors_config=models.VectorParams(size=7, distance=models.Distance.DOT),
            )
        finally:
            client.close()
        return
    config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=7, distance=qe.Distance.Dot))
    shard = qe.EdgeShard.create(str(dep.root / "shards" / "corpus_archive"), config)
    shard.close()


def archive_points(dep: Deployment) -> int:
    if dep.engine == "qdrant":
        client = QdrantClient(path=str(dep.root / "qdrant"))
        try:
            return client.count("corpus_archive").count
        finally:
            client.close()
    shard = qe.EdgeShard.load(str(dep.root / "shards" / "corpus_archive"))
    try:
        return int(shard.info().points_count)
    finally:
        shard.close()


def says(text: str, *also: str) -> None:
    """A refusal without a traceback, naming the collection and what differs."""
    assert "Traceback" not in text
    for needed in ("archive collection 'corpus_archive'", "size 7 (in 'corpus': 384)", *also):
        assert needed in text, text


@pytest.mark.parametrize("engine", ENGINES)
def test_a_foreign_archive_is_refused_by_split_and_blocks_no_run(
    tmp_path: Path, engine: str
) -> None:
    dep = Deployment(tmp_path, engine=engine)
    dep.family("expenses", versions=2)
    dep.init_ingest()
    foreign_archive(dep)
    dep.config.write_text(
        dep.config.read_text().replace(
            'collection = "corpus"', 'collection = "corpus"\narchive_collection = "corpus_archive"'
        )
    )
    dep.edit_front("expenses-v2", status="retired")

    ran = dep.cli("--format", "json", "run")
    assert ran.exit_code == 0, ran.output
    says(ran.output, "split store refused", "Dot (in 'corpus': Cosine)")
    data = json.loads(ran.stdout)
    assert data["status"] == "succeeded"
    assert "moves" not in data["writes"]  # the main collection alone, as one collection
    assert dep.rows()["hb:expenses-v2"]["version_state"] == "retired"
    assert {p["version_state"] for p in dep.points().of("hb:expenses-v2").values()} == {"retired"}

    for args in (["split", "--dry-run"], ["split"]):
        refused = dep.cli(*args)
        assert refused.exit_code == 3, refused.output
        says(refused.stderr, "error: refused:", "nothing was moved")
    assert archive_points(dep) == 0

    checked = dep.cli("check")
    assert checked.exit_code == 0, checked.output  # nothing left to do on the main collection
