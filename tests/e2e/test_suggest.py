"""``reconciler suggest`` through the CLI, on SQLite and PostgreSQL: an inherited vault (nothing
declared) ingested, then the proposals printed as JSON and YAML and read back, filtered by
``--min-score``, scoped by ``--source`` and ``--class``, and nothing written anywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, text

from reconciler.cli import cli
from reconciler.discovery import read_proposals

NOTES = {
    "policies/expenses-2025.md": ("expenses-2025", "Travel expenses policy 2025", "2025-01-01",
        "internal", "Meals when travelling: claim up to 40 EUR a day, receipts within 60 days."),
    "policies/expenses.md": ("expenses", "Travel expenses policy 2026", "2026-01-01", "internal",
        "Daily food allowance on business trips: 55 EUR, receipts required."),
    "ops/runbook_old.md": ("runbook-old", "Deploy runbook", "2023-03-01", "internal",
        "To roll back a deploy, ssh to the host and run the rollback script."),
    "ops/runbook.md": ("runbook", "Deploy runbook", "2026-02-01", "internal",
        "Reverting a release: press Revert on the pipeline page."),
    "products/x100.md": ("x100", "X100 datasheet", "2020-01-01", "public", "Battery: 2 years."),
    "products/x200.md": ("x200", "X200 datasheet", "2025-06-01", "public", "Runs 5 years."),
}  # fmt: skip

CONFIG = """\
[table]
url = "{url}"

[index]
path = "qdrant"
collection = "handbook"

[[sources]]
name = "handbook"
type = "vault"
path = "vault"
trigger = "polling"
ttl = "24h"
"""


def run(config: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--config", str(config), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def inherited(tmp_path: Path, table_url: str) -> Path:
    for path, (doc_id, title, when, doc_class, body) in NOTES.items():
        target = tmp_path / "vault" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            f"---\nid: {doc_id}\ntitle: {title}\neffective_from: {when}\n"
            f"doc_class: {doc_class}\n---\n{body}\n",
            encoding="utf-8",
        )
    config = tmp_path / "reconciler.toml"
    config.write_text(CONFIG.format(url=table_url), encoding="utf-8")
    run(config, "init")
    run(config, "ingest")
    return config


def everything(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the database (the audit log among them)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                name: sorted(
                    (tuple(map(str, row)) for row in conn.execute(text(f'SELECT * FROM "{name}"'))),
                )
                for name in sorted(inspect(conn).get_table_names())
            }
    finally:
        engine.dispose()


def links(data: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (p["older"], p["newer"], p["direction"]) for p in data["proposals"] if p["kind"] == "link"
    }


EXPECTED = {
    ("handbook:expenses-2025", "handbook:expenses", "older -> newer"),
    ("handbook:runbook-old", "handbook:runbook", "older -> newer"),
}


def test_suggest_proposes_reads_back_filters_and_writes_nothing(
    inherited: Path, table_url: str, tmp_path: Path
) -> None:
    before = everything(table_url)
    assert before["audit_log"], "the ingestion is audited: the comparison below is not empty"

    as_json = json.loads(run(inherited, "suggest", "--format", "json"))
    assert links(as_json) == EXPECTED
    by_pair = {(p["older"], p["newer"]): p for p in as_json["proposals"] if p["kind"] == "link"}
    expenses = by_pair["handbook:expenses-2025", "handbook:expenses"]
    assert expenses["decision"] == "undecided"
    assert expenses["evidence"].startswith("titles 1.00 alike; paths 1.00 alike; bodies ")
    assert "dates 2025-01-01 -> 2026-01-01" in expenses["evidence"]
    runbook = by_pair["handbook:runbook-old", "handbook:runbook"]
    assert "`old` in the older name" in runbook["evidence"]
    assert {tuple(p["members"]) for p in as_json["proposals"] if p["kind"] == "family"} == {
        ("handbook:expenses-2025", "handbook:expenses"),
        ("handbook:runbook-old", "handbook:runbook"),
    }

    out = tmp_path / "proposals.yaml"
    run(inherited, "suggest", "-o", str(out))
    written = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert read_proposals(written).proposals == read_proposals(as_json).proposals
    # a person's decisions are read back as written
    edited = out.read_text(encoding="utf-8").replace("decision: undecided", "decision: accept", 1)
    decided = read_proposals(yaml.safe_load(edited))
    assert [p.decision for p in decided.proposals].count("accept") == 1
    as_file = tmp_path / "proposals.json"
    run(inherited, "suggest", "-o", str(as_file))
    assert links(json.loads(as_file.read_text(encoding="utf-8"))) == EXPECTED
    printed = yaml.safe_load(run(inherited, "suggest", "--format", "yaml"))
    assert links(printed) == EXPECTED

    strict = json.loads(run(inherited, "suggest", "--format", "json", "--min-score", "0.85"))
    assert all(p["score"] >= 0.85 for p in strict["proposals"])
    assert len(links(strict)) < len(EXPECTED)
    public = json.loads(run(inherited, "suggest", "--format", "json", "--class", "public"))
    assert public["documents"] == 2
    assert links(public) == set()
    by_name = json.loads(run(inherited, "suggest", "--format", "json", "--no-bodies"))
    assert links(by_name) == EXPECTED
    assert all("bodies" not in p["evidence"] for p in by_name["proposals"])
    text_report = run(inherited, "suggest", "--source", "handbook")
    assert "handbook:expenses-2025 -> handbook:expenses" in text_report

    assert everything(table_url) == before


def test_an_unknown_source_is_a_usage_error(inherited: Path) -> None:
    result = CliRunner().invoke(cli, ["--config", str(inherited), "suggest", "--source", "nope"])
    assert result.exit_code == 1
    assert "no source named 'nope'" in result.output


def test_a_source_that_cannot_be_read_leaves_names_and_dates(inherited: Path) -> None:
    vault = inherited.parent / "vault"
    vault.rename(inherited.parent / "gone")
    data = json.loads(run(inherited, "suggest", "--format", "json"))
    assert any("could not be read" in note for note in data["notes"])
    # titles and dates are in the table: the pair named alike is still proposed, without bodies
    assert ("handbook:expenses-2025", "handbook:expenses", "older -> newer") in links(data)
    assert all("bodies" not in p["evidence"] for p in data["proposals"])


TWINS = {
    "ops/oncall.md": ("oncall", "On-call rota", "internal"),
    "people/standby.md": ("standby", "Standby duty", "internal"),
}
TWIN_BODY = (
    "Whoever holds the pager answers alerts within fifteen minutes, day and night, and hands "
    "the pager over every Monday at ten with a written note of open incidents."
)


def tree_digest(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): hash(p.read_bytes()) for p in root.rglob("*") if p.is_file()}


def test_chunk_vectors_are_read_from_the_index_and_named_in_the_evidence(
    inherited: Path, table_url: str
) -> None:
    # two notes named nothing alike whose bodies are nearly one text: with --no-bodies, only
    # the chunk vectors the ingestion wrote can tell they belong together
    for n, (path, (doc_id, title, doc_class)) in enumerate(TWINS.items()):
        target = inherited.parent / "vault" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            f"---\nid: {doc_id}\ntitle: {title}\ndoc_class: {doc_class}\n---\n"
            f"{TWIN_BODY}{' Thanks.' * n}\n",
            encoding="utf-8",
        )
    run(inherited, "ingest")
    twins = ("handbook:oncall", "handbook:standby")
    before = everything(table_url)
    index = tree_digest(inherited.parent / "qdrant")

    names_only = json.loads(
        run(inherited, "suggest", "--no-bodies", "--min-score", "0.5", "--format", "json")
    )
    with_vectors = json.loads(
        run(inherited, "suggest", "--no-bodies", "--vectors", "--min-score", "0.5",
            "--format", "json")
    )  # fmt: skip

    pairs = {tuple(sorted((p["older"], p["newer"]))): p for p in with_vectors["proposals"]
             if p["kind"] == "link"}  # fmt: skip
    assert twins not in {tuple(sorted(link[:2])) for link in links(names_only)}
    assert "chunk vectors 0.9" in pairs[twins]["evidence"]
    assert pairs[twins]["score"] < 0.7  # alone, chunk vectors never reach the default score
    assert with_vectors["notes"] == []
    # the default links are still proposed, and nothing was written to the table or the index
    assert links(with_vectors) >= EXPECTED
    assert everything(table_url) == before
    assert tree_digest(inherited.parent / "qdrant") == index


def test_without_a_collection_suggest_says_so_and_creates_none(inherited: Path) -> None:
    (inherited.parent / "qdrant").rename(inherited.parent / "moved")

    data = json.loads(run(inherited, "suggest", "--vectors", "--format", "json"))

    assert links(data) == EXPECTED
    (note,) = data["notes"]
    assert note.startswith("chunk vectors not read (no local Qdrant storage at ")
    assert not (inherited.parent / "qdrant").exists()


def test_documents_gone_from_their_source_are_compared_by_name_after_one_scan(
    inherited: Path,
) -> None:
    # a vault scans itself again for each note it is asked for and does not know: suggest
    # asks only for the notes its one scan listed
    for gone in ("policies/expenses.md", "products/x200.md"):
        (inherited.parent / "vault" / gone).unlink()
    result = CliRunner().invoke(
        cli,
        ["--config", str(inherited), "--log-level", "info", "suggest", "--format", "json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output

    assert result.output.count("vault handbook: ") == 1
    assert "2 documents of the table are not in their source's scan" in result.output
    # the gone note is still a row: compared by its title and date, without a body
    assert ("handbook:expenses-2025", "handbook:expenses", "older -> newer") in links(
        json.loads(result.output[result.output.index("{") :])
    )


def test_without_the_discovery_extra_suggest_names_the_command_that_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """datasketch (and scipy with it) is the ``discovery`` extra (issue 34): an install
    without it runs every other command, and ``suggest`` says the one line that adds it."""
    import sys  # noqa: PLC0415  (the modules are swapped for this test alone)

    monkeypatch.setitem(sys.modules, "datasketch", None)  # import datasketch -> ImportError
    for name in [
        m
        for m in sys.modules
        if m.startswith(("reconciler.discovery", "reconciler.app.suggesting"))
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.chdir(tmp_path)
    for fmt, stream in (("table", "stderr"), ("json", "stdout")):
        result = CliRunner().invoke(cli, ["--format", fmt, "suggest"])
        assert result.exit_code == 1, result.output
        said = getattr(result, stream)
        assert "pip install 'corpus-reconciler[discovery]'" in said
        assert said.count("\n") == 1
    assert json.loads(result.stdout)["error"] == "extra_missing"
    assert list(tmp_path.iterdir()) == []


def test_a_class_no_document_has_is_said_not_read_as_no_proposals(inherited: Path) -> None:
    """`--source nope` is refused; `--class Public` (a class spelled as no row spells it)
    answered "0 documents ... 0 links" and nothing else, which reads as "nothing to link"."""
    data = json.loads(run(inherited, "suggest", "--format", "json", "--class", "Public"))
    assert data["documents"] == 0
    (note,) = [n for n in data["notes"] if "doc_class" in n]
    assert "'Public'" in note
    assert "'public'" in note
