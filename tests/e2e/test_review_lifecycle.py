"""Review of the document lifecycle through the CLI (embedded default: SQLite, Qdrant local
mode, a vault): what an outside adopter meets, each test a defect found and mended."""

from __future__ import annotations

import shutil

from acceptance_kit import Deployment, day


def test_repair_dry_run_of_an_unread_source_is_no_all_clear(deploy: Deployment) -> None:
    """`repair --dry-run` previews a repair. With the vault unreadable the repair itself says
    PARTIAL (exit 4); its preview said "no findings: the three stores agree" and exited 0 (no
    drift), the unread source only in a log line on stderr, while `check` and `plan` report it
    (exit 2)."""
    deploy.note("a", id="a", status="current", effective_from=day(-10))
    deploy.note("b", id="b", status="current", effective_from=day(-10))
    deploy.init_ingest()
    assert deploy.json("run")[0] == 0
    shutil.move(deploy.vault, deploy.root / "vault.gone")

    assert deploy.json("plan")[0] == 2
    code, data = deploy.json("repair", "--doc", "hb:a")
    assert (code, data["status"], data["unread_sources"]) == (4, "partial", ["hb"])

    code, data = deploy.json("repair", "--doc", "hb:a", "--dry-run")
    assert data["unread_sources"] == ["hb"]
    assert code == 2
    result = deploy.cli("repair", "--family", "hb:b", "--dry-run")
    assert result.exit_code == 2
    assert "the three stores agree" not in result.stdout
    assert "could not be read" in result.stdout


def test_search_before_the_first_ingest_is_an_error_line_not_a_traceback(
    deploy: Deployment,
) -> None:
    """`reconciler search` on a deployment not ingested yet (the collection absent) raised
    the retrievers' ValueError out of the CLI: a Python traceback, and under `--format json`
    no JSON object, where every other command says `collection_missing` in one line."""
    deploy.note("a", id="a", status="current")
    assert deploy.cli("init").exit_code == 0
    assert deploy.json("check")[1]["error"] == "collection_missing"  # as every command says it

    code, data = deploy.json("search", "meal allowance")
    assert (code, data["error"], data["exit_code"]) == (1, "collection_missing", 1)
    assert "reconciler ingest" in data["message"]
    result = deploy.cli("search", "meal allowance", "--historical")
    assert result.exit_code == 1
    assert not isinstance(result.exception, ValueError)
    assert "does not exist" in result.output


def test_search_with_an_embedder_of_another_width_is_a_config_error(deploy: Deployment) -> None:
    """`[ingest] dim` changed after the collection was built (another embedder, or a typo):
    `ingest` refuses it as `invalid_configuration` (ingest.dim differs from the collection's
    vector size), but `search` sent the narrower query vector on and died in numpy with a
    traceback ("shapes (1,384) and (64,) not aligned")."""
    deploy.note("a", id="a", status="current")
    deploy.init_ingest()
    assert deploy.json("search", "a")[0] == 0
    config = deploy.config.read_text(encoding="utf-8")
    deploy.config.write_text(config + "[ingest]\ndim = 64\n", encoding="utf-8")

    assert deploy.json("ingest")[1]["error"] == "invalid_configuration"
    code, data = deploy.json("search", "a")
    assert (code, data["error"]) == (1, "invalid_configuration")
    assert "ingest.dim: 64 differs from the vector size 384" in data["message"]
