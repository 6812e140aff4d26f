"""End to end on a Qdrant Edge deployment, through the CLI: init, ingest (the reference
ingestion builds the shard), check, apply; the payload indexes the filter needs found missing
then created; the shard's lock seen by a command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import qdrant_edge as qe
from acceptance_kit import Deployment, day, kinds

from reconciler.checks.index import REQUIRED_INDEXES


def test_init_ingest_check_apply_on_edge(tmp_path: Path) -> None:
    deploy = Deployment(tmp_path, engine="edge")
    deploy.family("expenses", 2)
    deploy.note(
        "policy-v1", id="policy-v1", family="policy", version="1", status="current",
        effective_from=day(-300),
    )  # fmt: skip
    init = deploy.cli("init")
    assert init.exit_code == 0, init.output
    assert "absent (created by the first `reconciler ingest`)" in init.output
    assert not (tmp_path / "shards" / "corpus").exists()

    report = deploy.init_ingest()
    assert report["totals"]["ingested"] == 3
    shard = tmp_path / "shards" / "corpus"
    assert (shard / "edge_config.json").is_file()
    points = deploy.points()
    assert len(points.payloads) == report["sources"][0]["chunks_written"] > 0
    assert all(isinstance(pid, str) for pid in points.payloads)

    # the shard has no payload index yet: the index check says so, and apply creates them
    code, data = deploy.json("check", "--check", "index")
    assert code == 2
    assert {(f["kind"], f["expected"]["key"]) for f in data["findings"]} == {
        ("payload_index_missing", key) for key in REQUIRED_INDEXES
    }
    code, applied = deploy.json("apply", "--check", "index")
    assert code == 0, applied
    assert applied["writes"]["index"] == len(REQUIRED_INDEXES)
    with deploy.stores() as opened:
        assert dict(opened.index.payload_indexes()) == REQUIRED_INDEXES
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])
    assert deploy.served() == {"hb:expenses-v2", "hb:policy-v1"}

    # drift: v2 of the policy is published and v1 marked, but only v2 gets ingested
    deploy.note(
        "policy-v2", id="policy-v2", family="policy", version="2", status="current",
        effective_from=day(-2),
    )  # fmt: skip
    deploy.edit_front("policy-v1", status="superseded", superseded_by="policy-v2")
    assert deploy.json("ingest")[1]["totals"]["ingested"] == 1
    assert deploy.served() == {"hb:expenses-v2", "hb:policy-v1", "hb:policy-v2"}
    code, data = deploy.json("check")
    assert code == 2
    assert ("family", "successor_not_marked", "hb:policy-v1") in kinds(data)

    code, applied = deploy.json("apply")
    assert code == 0, applied
    assert applied["writes"]["points"] == len(deploy.points().of("hb:policy-v1"))
    assert {p["version_state"] for p in deploy.points().of("hb:policy-v1").values()} == {
        "superseded"
    }
    assert deploy.served() == {"hb:expenses-v2", "hb:policy-v2"}
    assert deploy.json("check")[0] == 0
    code, status = deploy.json("status")
    assert code == 0
    assert status["index"]["chunks"] == len(deploy.points().payloads)
    assert status["index"]["chunks_by_state"]["superseded"] >= 2


def test_a_command_on_a_shard_held_elsewhere_is_refused_clearly(tmp_path: Path) -> None:
    deploy = Deployment(tmp_path, engine="edge")
    deploy.family("travel", 1)
    deploy.init_ingest()
    # another reader holds the shard (another process behaves the same: tests/integration/test_edge_index.py)
    holder = qe.EdgeShard.load(str(tmp_path / "shards" / "corpus"))
    try:
        result = deploy.cli("check")
        assert result.exit_code == 1
        assert "Edge allows one open shard at a time" in result.output
        assert "Traceback" not in result.output
    finally:
        holder.close()
    assert deploy.cli("check", "--check", "family").exit_code == 0  # released: it runs


def test_eval_says_it_needs_the_qdrant_engine(tmp_path: Path) -> None:
    deploy = Deployment(tmp_path, engine="edge")
    deploy.family("travel", 1)
    deploy.init_ingest()
    golden = tmp_path / "golden.yaml"
    golden.write_text(
        "slices: [travel]\ncases:\n  - id: t\n    slice: travel\n    query: travel rules\n"
        "    expect: hb:travel-v1\n",
        encoding="utf-8",
    )
    result = deploy.cli("eval", str(golden))
    assert result.exit_code == 1
    assert 'reconciler eval runs on engine = "qdrant" only' in result.output


def test_a_check_on_edge_never_imports_qdrant_client(tmp_path: Path) -> None:
    """qdrant-client is ~1.7 s of CPU to import here; an Edge deployment has no use for it."""
    deploy = Deployment(tmp_path, engine="edge")
    deploy.family("expenses", 2)
    deploy.init_ingest()
    code = (
        "import sys\n"
        "from reconciler.cli import cli\n"
        "try:\n"
        f"    cli.main(['--config', {str(deploy.config)!r}, 'check'], prog_name='reconciler')\n"
        "except SystemExit as exit:\n"
        "    print(exit.code, 'qdrant_client' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["2", "False"]  # drift (no payload index yet), no import
