"""``reconciler search QUERY`` through the CLI on a real deployment (SQLite, Qdrant local mode,
a vault): the default route at now and ``--as-of``, the historical route over a split store's
archive, never a quarantined chunk, and the text a person reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from acceptance_kit import Deployment, body, day

QUERY = "expenses meals rule"
#: The keys of a hit, as docs/contracts.md lists them.
HIT_KEYS = (
    "rank",
    "score",
    "point_id",
    "doc_id",
    "chunk_id",
    "family",
    "version",
    "version_state",
    "effective_from",
    "effective_to",
    "superseded_by",
    "text",
)


@pytest.fixture
def deploy(tmp_path: Path) -> Deployment:
    """Expenses v1 (superseded by v2, in force for 100 days from day -300), v2 (in force
    since day -200); travel (current, edited in place after ingestion: quarantined)."""
    deploy = Deployment(tmp_path)
    deploy.family("expenses")
    travel = {"id": "travel", "family": "travel", "status": "current", "effective_from": day(-50)}
    deploy.note("travel", body("travel", "expenses meals rule for travel."), **travel)
    deploy.init_ingest()
    deploy.note("travel", body("travel", "expenses meals rule, edited in place."), **travel)
    code, data = deploy.json("apply")
    assert code == 0, data
    return deploy


def doc_ids(data: dict[str, object]) -> set[str]:
    return {hit["doc_id"] for hit in data["hits"]}  # type: ignore[attr-defined]


def test_the_default_route_now_and_as_of(deploy: Deployment) -> None:
    code, data = deploy.json("search", QUERY, "-k", "20")
    assert code == 0
    assert set(data) == {"query", "route", "as_of", "collections", "k", "hits"}
    assert set(data["hits"][0]) == set(HIT_KEYS)
    assert data["route"] == "default"
    assert data["collections"] == ["corpus"]
    assert doc_ids(data) == {"hb:expenses-v2"}  # v1 superseded, travel quarantined
    hit = data["hits"][0]
    assert hit["version_state"] == "current"
    assert hit["effective_to"] == "9999-12-31T00:00:00Z"
    assert hit["family"] == "hb:expenses"
    assert [h["rank"] for h in data["hits"]] == list(range(1, len(data["hits"]) + 1))
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)
    # --as-of in v1's window: v1 is superseded, so only the historical route finds it
    code, then = deploy.json("search", QUERY, "--as-of", day(-250), "-k", "20")
    assert code == 0
    assert doc_ids(then) == set()
    code, then = deploy.json("search", QUERY, "--as-of", day(-250), "--historical")
    assert code == 0
    assert doc_ids(then) == {"hb:expenses-v1"}
    assert then["hits"][0]["version_state"] == "superseded"
    assert then["hits"][0]["superseded_by"] == "hb:expenses-v2"
    code, every = deploy.json("search", QUERY, "--historical", "-k", "20")
    assert code == 0
    assert every["as_of"] is None
    assert doc_ids(every) == {"hb:expenses-v1", "hb:expenses-v2"}  # never the quarantined
    code, one = deploy.json("search", QUERY, "-k", "1", "--historical")
    assert len(one["hits"]) == 1


def test_a_split_store_is_searched_as_one(deploy: Deployment) -> None:
    text = deploy.config.read_text(encoding="utf-8").replace(
        'collection = "corpus"', 'collection = "corpus"\narchive_collection = "corpus_archive"'
    )
    deploy.config.write_text(text, encoding="utf-8")
    result = deploy.cli("split")
    assert result.exit_code == 0, result.output
    code, data = deploy.json("search", QUERY, "--historical", "-k", "20")
    assert code == 0
    assert data["collections"] == ["corpus", "corpus_archive"]
    assert doc_ids(data) == {"hb:expenses-v1", "hb:expenses-v2"}
    code, now = deploy.json("search", QUERY, "-k", "20")
    assert doc_ids(now) == {"hb:expenses-v2"}


def test_an_archive_not_made_yet_is_not_named_as_searched(deploy: Deployment) -> None:
    """``collections`` (docs/contracts.md: the collections searched) named a split store's
    archive before its first move, when there is none and nothing was searched there."""
    text = deploy.config.read_text(encoding="utf-8").replace(
        'collection = "corpus"', 'collection = "corpus"\narchive_collection = "corpus_archive"'
    )
    deploy.config.write_text(text, encoding="utf-8")
    code, data = deploy.json("search", QUERY, "--historical", "-k", "20")
    assert code == 0
    assert data["collections"] == ["corpus"]
    assert doc_ids(data) == {"hb:expenses-v1", "hb:expenses-v2"}


def test_the_text_a_person_reads(deploy: Deployment) -> None:
    result = deploy.cli("search", QUERY)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{QUERY!r} on the default route at ")
    assert "hb:expenses-v2  current  from " in lines[1]
    assert lines[1].endswith("open-ended")
    result = deploy.cli("search", "nothing like it", "--as-of", day(-999))
    assert result.exit_code == 0
    assert "no chunk in force matches (try --historical" in result.output
    result = deploy.cli("search", QUERY, "--as-of", "yesterday")
    assert result.exit_code == 64
    assert "not an ISO-8601 instant" in result.output


def test_the_contracts_list_the_keys_of_a_hit() -> None:
    contracts = (Path(__file__).resolve().parents[2] / "docs" / "contracts.md").read_text(
        encoding="utf-8"
    )
    section = contracts.split("## The JSON of `search`", 1)[1].split("\n## ", 1)[0]
    [row] = [line for line in section.splitlines() if line.startswith("| `hits` |")]
    listed = re.sub(r"\([^)]*\)", "", row.split("best first:", 1)[1])  # asides left out
    assert re.findall(r"`(\w+)`", listed) == list(HIT_KEYS)
