"""`reconciler eval` on a real small deployment: the demo's reconciled handbook, scored with
the demo's own questions as golden cases, through the ingest embedder and default_filter()."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from qdrant_client import QdrantClient, models

from reconciler.app.demo import QUESTIONS, SOURCE
from reconciler.app.evaluating import GoldenError, evaluate, load_golden
from reconciler.cli import cli
from reconciler.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "golden" / "handbook.yaml"
SENTINEL = "9999-12-31T00:00:00Z"


def golden_cases() -> list[dict[str, Any]]:
    """The demo's questions: the current note must be found, the note it replaced never cited."""
    return [
        {
            "id": question.current,
            "query": question.text,
            "expect": f"{SOURCE}:{question.current}",
            "must_not_cite": [f"{SOURCE}:{question.stale}"] if question.stale else [],
            "slice": "replaced" if question.stale else "stable",
        }
        for question in QUESTIONS
    ]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One reconciled demo deployment, built once through the CLI (tests work on copies)."""
    target = tmp_path_factory.mktemp("eval") / "demo"
    result = CliRunner().invoke(cli, ["--format", "json", "demo", "--dir", str(target)])
    assert result.exit_code == 0, result.output
    return target


@pytest.fixture
def deployment(built: Path, tmp_path: Path) -> Path:
    """A private copy of the deployment (its paths are relative to its config)."""
    return Path(shutil.copytree(built, tmp_path / "deployment"))


def write_golden(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run_eval(deployment: Path, *args: str, fmt: str = "json") -> Result:
    return CliRunner().invoke(
        cli, ["--config", str(deployment / "reconciler.toml"), "--format", fmt, "eval", *args]
    )


def by_slice(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["slice"]: s for s in data["slices"]}


def resurrect(deployment: Path, doc_id: str) -> int:
    """What a re-chunking run does: default (in-force) state back onto a replaced doc's chunks."""
    client = QdrantClient(path=str(deployment / "qdrant"))
    try:
        chosen = models.Filter(
            must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))]
        )
        points, _ = client.scroll("handbook", scroll_filter=chosen, limit=100)
        assert points, doc_id
        client.set_payload(
            "handbook",
            payload={"version_state": "current", "effective_to": SENTINEL, "superseded_by": None},
            points=[p.id for p in points],
        )
        return len(points)
    finally:
        client.close()  # local mode locks its folder


def test_a_reconciled_index_passes(deployment: Path, tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.yaml", golden_cases())
    result = run_eval(deployment, str(golden))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True
    slices = by_slice(data)
    assert slices["replaced"]["cases"] == 6
    assert slices["stable"]["cases"] == 1
    for stats in slices.values():
        assert stats["pass"] == stats["cases"]
        assert stats["fail"] == 0
        assert stats["latest_at_k"] == 1.0
        assert stats["stale_cited"] == 0
    assert len(data["cases"]) == len(QUESTIONS)
    assert all(case["pass"] and case["rank"] for case in data["cases"])
    table = run_eval(deployment, str(golden), fmt="table")
    assert table.exit_code == 0, table.output
    assert "Latest@5" in table.output
    assert "stale-cited" in table.output


def test_the_example_golden_file_matches_the_demo(deployment: Path) -> None:
    result = run_eval(deployment, str(EXAMPLE))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert sum(s["cases"] for s in data["slices"]) == len(QUESTIONS)
    assert by_slice(data)["legal"]["latest_at_k"] is None


def test_a_resurrected_stale_chunk_fails_the_run(deployment: Path, tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.yaml", golden_cases())
    assert resurrect(deployment, f"{SOURCE}:expenses-last-year") > 0
    result = run_eval(deployment, str(golden))
    assert result.exit_code == 2, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert data["hard_zero_failed"] == ["replaced"]
    stats = by_slice(data)["replaced"]
    assert stats["stale_cited"] == 1
    assert stats["fail"] == 1
    assert by_slice(data)["stable"]["stale_cited"] == 0
    (case,) = [c for c in data["cases"] if c["stale_cited"]]
    assert case["stale_cited"] == [f"{SOURCE}:expenses-last-year"]
    table = run_eval(deployment, str(golden), fmt="table")
    assert table.exit_code == 2
    assert "FAIL: stale cited" in table.output
    assert "hard zero" in table.output


def test_an_empty_declared_slice_prints_uncovered(deployment: Path, tmp_path: Path) -> None:
    golden = write_golden(
        tmp_path / "golden.yaml",
        {"slices": ["replaced", "stable", "legal"], "cases": golden_cases()},
    )
    result = run_eval(deployment, str(golden), fmt="table")
    assert result.exit_code == 0, result.output
    (line,) = [row for row in result.output.splitlines() if row.startswith("legal ")]
    assert "uncovered" in line
    assert "1.0" not in line
    data = json.loads(run_eval(deployment, str(golden)).stdout)
    legal = by_slice(data)["legal"]
    assert legal["cases"] == 0
    assert legal["latest_at_k"] is None
    assert legal["status"] == "uncovered"


def test_a_drop_below_the_baseline_is_a_regression(deployment: Path, tmp_path: Path) -> None:
    cases = golden_cases()
    # The stable slice asks for a document that is not in the index: Latest@5 = 0.5.
    cases.append(
        {
            "id": "missing",
            "query": "Where is the cafeteria?",
            "expect": f"{SOURCE}:cafeteria",
            "slice": "stable",
        }
    )
    golden = write_golden(tmp_path / "golden.yaml", cases)
    written = tmp_path / "baseline.json"
    result = run_eval(deployment, str(golden), "--write-baseline", str(written))
    assert result.exit_code == 0, result.output  # a miss alone is not a hard zero
    stored = json.loads(written.read_text())
    assert stored["slices"] == {"replaced": 1.0, "stable": 0.5}
    # The same numbers against their own baseline: no regression (tolerance 0, not below).
    same = run_eval(deployment, str(golden), "--baseline", str(written))
    assert same.exit_code == 0, same.output

    higher = tmp_path / "higher.json"
    higher.write_text(json.dumps({"k": 5, "slices": {"replaced": 1.0, "stable": 0.75}}))
    result = run_eval(deployment, str(golden), "--baseline", str(higher))
    assert result.exit_code == 2, result.output
    data = json.loads(result.stdout)
    assert data["regressions"] == ["stable"]
    assert data["hard_zero_failed"] == []
    assert by_slice(data)["stable"]["baseline"] == 0.75
    assert by_slice(data)["replaced"]["regression"] is None
    table = run_eval(deployment, str(golden), "--baseline", str(higher), fmt="table")
    assert table.exit_code == 2
    assert "REGRESSION" in table.output


def test_a_baseline_at_another_k_is_an_error(deployment: Path, tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.yaml", golden_cases())
    other = tmp_path / "k3.json"
    other.write_text(json.dumps({"k": 3, "slices": {"replaced": 1.0}}))
    result = run_eval(deployment, str(golden), "--baseline", str(other), fmt="table")
    assert result.exit_code == 1
    assert "k=3" in result.output


def test_a_malformed_golden_file_lists_every_problem(deployment: Path, tmp_path: Path) -> None:
    golden = write_golden(
        tmp_path / "golden.yaml",
        {
            "slices": ["replaced"],
            "cases": [
                {"query": "fine", "expect": "handbook:expenses", "slice": "replaced"},
                {"expect": "handbook:expenses", "slice": "replaced"},
                {"query": "no expect", "slice": "replaced"},
                {"query": "q", "expect": "a", "must_not_cite": "b", "slice": "replaced"},
                {"query": "q", "expect": "a", "slice": "typo"},
                {"query": "q", "expect": "a", "must_not_cite": ["a"], "slice": "replaced"},
                {"query": "q", "expect": "a", "must_not_cited": ["b"], "slice": "replaced"},
                "just a string",
            ],
        },
    )
    result = run_eval(deployment, str(golden), fmt="table")
    assert result.exit_code == 1
    message = result.output
    assert "7 problem(s)" in message
    for expected in (
        "case 2: query",
        "case 3: expect",
        "case 4: must_not_cite",
        "case 5: slice: 'typo'",
        "case 6: must_not_cite: contains the expected doc",
        "case 7: unknown key 'must_not_cited'",
        "case 8: must be a mapping",
    ):
        assert expected in message, expected
    assert "case 1" not in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[unclosed", "not valid"),
        ("{}", "cases: missing"),
        ("cases: 3", "cases: must be a list"),
        ("slices: [a, a]\ncases: []\nextra: 1", "extra: unknown top-level key"),
    ],
)
def test_golden_file_shapes_are_checked(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "golden.yaml"
    path.write_text(text)
    with pytest.raises(GoldenError) as caught:
        load_golden(path)
    assert problem in str(caught.value)


def test_json_golden_files_are_read(tmp_path: Path) -> None:
    path = tmp_path / "golden.json"
    path.write_text(
        json.dumps({"slices": ["stable", "empty", "replaced"], "cases": golden_cases()})
    )
    golden = load_golden(path)
    assert golden.slices == ("stable", "empty", "replaced")  # declared order
    path.write_text(json.dumps(golden_cases()))  # a bare list: slices in order of first use
    assert load_golden(path).slices == ("replaced", "stable")
    assert len(golden.cases) == len(QUESTIONS)


def test_the_library_function_scores_without_the_cli(deployment: Path, tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.yaml", golden_cases())
    settings = load_settings(deployment / "reconciler.toml", environ={})
    data = evaluate(settings, golden, k=1)
    assert data["k"] == 1
    assert by_slice(data)["replaced"]["stale_cited"] == 0
    assert all(len(case["top"]) <= 1 for case in data["cases"])
