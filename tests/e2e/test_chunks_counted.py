"""Nothing lost, nothing stale: every row says how many chunks it has and which text they
hold, so a document that lost chunks (a killed ingest, an index that lost points) or whose
chunks hold an older text (a re-ingest killed half-way, a pipeline that re-chunked a stale
export) is a finding; the stale ones are quarantined and everything is re-ingested; an index
that lost most of its points is refused by the guard.

Driven through the CLI on Qdrant local mode and Qdrant Edge, stores changed behind the
reconciler's back with the engines' own clients."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe
from acceptance_kit import Deployment, body, kinds
from qdrant_client import models

from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex

ENGINES = ["qdrant", "edge"]


def deployment(root: Path, engine: str, families: int = 4) -> Deployment:
    deploy = Deployment(root, engine=engine)
    for n in range(families):
        deploy.family(f"f{n}", 2, sections=4)
    deploy.init_ingest()
    code, data = deploy.json("run")
    assert code == 0, data
    return deploy


def point_ids(deploy: Deployment, doc_id: str) -> list[str]:
    return sorted(pid for pid, p in deploy.points().payloads.items() if p["doc_id"] == doc_id)


def delete_points(deploy: Deployment, ids: list[str]) -> None:
    """Points gone behind the reconciler's back (a damaged shard, a careless script)."""
    with deploy.stores() as opened:
        index = opened.index
        if isinstance(index, EdgeChunkIndex):
            index.shard.update(qe.UpdateOperation.delete_points(list(ids)))
            return
        assert isinstance(index, QdrantChunkIndex)
        index.client.delete(index.collection, points_selector=models.PointIdsList(points=ids))


def finding(data: dict[str, Any], kind: str, doc_id: str | None = None) -> dict[str, Any]:
    [found] = [f for f in data["findings"] if f["kind"] == kind and f["doc_id"] == doc_id]
    return found


@pytest.mark.parametrize("engine", ENGINES)
def test_a_document_that_lost_chunks_is_found_and_re_ingested(tmp_path: Path, engine: str) -> None:
    deploy = deployment(tmp_path, engine)
    lost = point_ids(deploy, "hb:f1-v2")
    assert len(lost) == 4
    delete_points(deploy, lost[:3])  # one chunk left
    delete_points(deploy, point_ids(deploy, "hb:f2-v2"))  # none left

    code, data = deploy.json("check")
    assert code == 2
    one = finding(data, "missing_chunks", "hb:f1-v2")
    assert (one["check"], one["severity"]) == ("payload", "warning")
    assert (one["expected"], one["actual"]) == ({"chunks": 4}, {"chunks": 1})
    assert "reconciler ingest" in one["action"]
    none = finding(data, "missing_chunks", "hb:f2-v2")
    assert (none["severity"], none["actual"]) == ("critical", {"chunks": 0})
    count = finding(data, "points_missing")
    registered = sum(row["chunk_count"] for row in deploy.rows().values())
    assert registered == len(deploy.points().payloads) + 7
    assert (count["expected"], count["actual"]) == (
        {"chunks": registered},
        {"chunks": registered - 7, "missing": 7},
    )

    code, data = deploy.json("run")  # (the kit's guard allows any fraction)
    assert code == 0, data
    assert data["writes"]["reingest"] == 2
    code, ingested = deploy.json("ingest")
    assert code == 0, ingested
    assert ingested["totals"]["reingested"] == 2
    code, data = deploy.json("check")
    assert (code, kinds(data)) == (0, set()), data
    assert len(point_ids(deploy, "hb:f1-v2")) == len(point_ids(deploy, "hb:f2-v2")) == 4


@pytest.mark.parametrize("engine", ENGINES)
def test_an_index_that_lost_most_points_is_refused_by_the_guard(
    tmp_path: Path, engine: str
) -> None:
    deploy = deployment(tmp_path, engine, families=8)
    deploy.configure(fraction=0.2)
    every = sorted(deploy.points().payloads)
    delete_points(deploy, every[: len(every) // 2])
    left = len(every) - len(every) // 2

    code, data = deploy.json("run")
    assert code == 3, data
    assert data["refused"] is True
    guard = finding(data, "index_shrunk")
    assert guard["check"] == "guard"
    assert guard["actual"]["chunks"] == left
    # ... and nothing was written on top of it: no point, no re-ingest request
    assert len(deploy.points().payloads) == left
    assert deploy.dump()["reingest_outbox"] == {}
    assert deploy.json("check")[0] == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_a_scoped_repair_of_documents_that_lost_their_chunks_is_not_refused(
    tmp_path: Path, engine: str
) -> None:
    """The shrunken-index rule weighs the index, which a scoped repair does not measure: a
    repair of families whose chunks are all gone asks for their re-ingestion."""
    deploy = deployment(tmp_path, engine, families=6)
    deploy.configure(fraction=0.2)
    families = ["hb:f0", "hb:f1", "hb:f2"]
    gone = [
        pid
        for pid, payload in deploy.points().payloads.items()
        if payload["doc_family_id"] in families
    ]
    assert len(gone) > 10  # past the guard's floor
    delete_points(deploy, gone)
    assert deploy.json("run")[0] == 3  # the whole index: half of it lost

    args = [arg for family in families for arg in ("--family", family)]
    code, data = deploy.json("repair", *args)
    assert code == 0, data
    assert data["writes"]["reingest"] == 6
    code, ingested = deploy.json("ingest")
    assert (code, ingested["totals"]["reingested"]) == (0, 6), ingested
    code, data = deploy.json("check")
    assert (code, kinds(data)) == (0, set()), data


def segments_gone(segments: Path) -> None:
    for folder in segments.iterdir():
        shutil.rmtree(folder) if folder.is_dir() else folder.unlink()


def id_tracker_truncated(segments: Path) -> None:
    trackers = list(segments.glob("*/mutable_id_tracker.*"))
    assert trackers
    for path in trackers:
        os.truncate(path, 0)


@pytest.mark.parametrize("damage", [segments_gone, id_tracker_truncated])
def test_a_damaged_edge_shard_is_not_healthy(tmp_path: Path, damage: Any) -> None:
    """Issue 24, item 2, as reported: an Edge shard whose segment folders are gone, or whose
    id tracker was truncated, opens with no point; check found nothing and run exited 0."""
    deploy = deployment(tmp_path, "edge", families=5)
    deploy.configure(fraction=0.2)
    registered = sum(row["chunk_count"] for row in deploy.rows().values())
    segments = tmp_path / "shards" / "corpus" / "segments"
    assert segments.is_dir()
    damage(segments)

    code, data = deploy.json("check")
    assert code == 2
    assert finding(data, "points_missing")["actual"] == {"chunks": 0, "missing": registered}
    assert ("payload", "missing_chunks", "critical") in {
        (f["check"], f["kind"], f["severity"]) for f in data["findings"]
    }
    code, data = deploy.json("run")
    assert code == 3, data
    assert "index_shrunk" in {f["kind"] for f in data["findings"]}


@pytest.mark.parametrize("engine", ENGINES)
def test_chunks_of_an_older_text_are_quarantined_until_re_ingested(
    tmp_path: Path, engine: str
) -> None:
    """A pipeline that re-chunked a stale export: the chunks' content_hash is not the row's."""
    deploy = deployment(tmp_path, engine)
    stale = point_ids(deploy, "hb:f0-v2")
    deploy.set_payload(stale[:2], {"content_hash": "sha256:" + "0" * 64})
    assert "hb:f0-v2" in deploy.served()

    code, data = deploy.json("check")
    assert code == 2
    found = finding(data, "stale_chunks", "hb:f0-v2")
    assert (found["check"], found["severity"]) == ("payload", "critical")
    assert found["actual"] == {"stale_chunks": 2, "of": 4}
    code, data = deploy.json("apply")
    assert code == 0, data
    assert "hb:f0-v2" not in deploy.served()  # every chunk of it, the stale and the others
    assert deploy.rows()["hb:f0-v2"]["quarantine_reason"] == "stale_chunks"

    code, ingested = deploy.json("ingest")
    assert (code, ingested["totals"]["reingested"]) == (0, 1), ingested
    code, data = deploy.json("apply")
    assert code == 0, data
    assert ("payload", "quarantine_lifted") in {(f["check"], f["kind"]) for f in data["findings"]}
    assert "hb:f0-v2" in deploy.served()
    code, data = deploy.json("check")
    assert (code, kinds(data)) == (0, set()), data


@pytest.mark.parametrize("engine", ENGINES)
def test_a_re_ingest_that_stopped_after_the_row_never_serves_the_old_text(
    tmp_path: Path, engine: str
) -> None:
    """Issue 24, item 3, as reported: a re-ingest killed after the new source hash was saved
    and before the old chunks went; the next run lifted the quarantine of the old chunks."""
    deploy = deployment(tmp_path, engine)
    deploy.note(
        "f3-v2",
        body("f3 v2", "A rule rewritten in place."),
        id="f3-v2",
        family="f3",
        version="2",
        status="current",
    )
    code, data = deploy.json("run")
    assert code == 0, data
    assert "hb:f3-v2" not in deploy.served()  # quarantined: an in-place edit
    # What a re-ingest that stopped half-way left: the row has the new text's hash, the
    # chunks are the old text's.
    code, data = deploy.json("check")
    [edit] = [f for f in data["findings"] if f["kind"] == "in_place_edit"]
    deploy.set_row("hb:f3-v2", source_hash=edit["actual"]["source_hash"])

    code, data = deploy.json("run")
    assert code == 0, data
    assert "hb:f3-v2" not in deploy.served()
    assert deploy.rows()["hb:f3-v2"]["quarantine_reason"] == "stale_chunks"
    code, ingested = deploy.json("ingest")
    assert code == 0, ingested
    code, data = deploy.json("run")
    assert code == 0, data
    assert "hb:f3-v2" in deploy.served()
    assert deploy.json("check")[0] == 0
