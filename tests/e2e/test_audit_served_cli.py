"""``reconciler audit served`` and ``audit history`` through the CLI, on real deployments:
what they refuse (an instant before the log, a broken chain, no scope, a scope the log never
wrote), what they cannot know and say so (a payload changed by another tool, an older log
whose ingestion entries did not record payloads), and the picture: one lane a version, and a
history whose every period is what ``audit served`` says at its start."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, day
from sqlalchemy import create_engine, select, update
from sqlalchemy.orm import Session

from reconciler import default_filter
from reconciler.model import MANAGED_KEYS
from reconciler.stores.sql.audit import GENESIS, entry_hash_of
from reconciler.stores.sql.audit_reading import entry_of
from reconciler.stores.sql.schema import AuditHeadRow, AuditRow, RunRow

SVG = "{http://www.w3.org/2000/svg}"


def families(deploy: Deployment) -> None:
    """Family ``a``: v1 replaced by v2 (marked); family ``b``: one current note."""
    deploy.family("a", 2, sections=3)
    deploy.note("b-v1", id="b-v1", family="b", status="current", effective_from=day(-30))


def now() -> datetime:
    return datetime.now(UTC)


def served(deploy: Deployment, at: datetime, *scope: str) -> tuple[int, Any]:
    return deploy.json("audit", "served", "--at", at.isoformat(), *scope)


def variants_by_point(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        str(point): variant
        for document in data["documents"]
        for variant in document["variants"]
        for point in variant["points"]
    }


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_what_it_refuses(deploy: Deployment) -> None:
    families(deploy)
    before = now() - timedelta(seconds=1)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0

    result = deploy.cli("audit", "served", "--at", before.isoformat(), "--family", "hb:a")
    assert result.exit_code == 1
    assert "before the audit log begins" in result.output
    assert "cannot say what was served then" in result.output

    result = deploy.cli("audit", "served", "--at", now().isoformat())
    assert result.exit_code == 64
    assert "--family F or --doc D" in result.output

    result = deploy.cli("audit", "served", "--at", now().isoformat(), "--family", "a")
    assert result.exit_code == 1
    assert "no entry about family 'a'" in result.output  # ids are as the payloads spell them

    result = deploy.cli("audit", "history", "--family", "hb:a", "-o", "timeline.png")
    assert result.exit_code == 64
    assert "SVG" in result.output

    deploy.sql("UPDATE audit_log SET reason = 'edited' WHERE seq = 2")
    for args in (["served", "--at", now().isoformat()], ["history"]):
        result = deploy.cli("audit", *args, "--family", "hb:a")
        assert result.exit_code == 1, args
        assert "fails verification" in result.output
        assert "entry 2" in result.output


def test_a_write_by_another_tool_is_in_doubt_until_the_log_sees_it(deploy: Deployment) -> None:
    families(deploy)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    [point] = list(deploy.points().of("hb:b-v1"))
    quiet = now()
    deploy.set_payload([point], {"quarantined": True})
    hidden = now()
    assert point not in deploy.points(default_filter(hidden)).payloads
    code, repaired = deploy.json("apply")  # finds the quarantine, lifts it: the log sees it
    assert code == 0, repaired
    assert repaired["writes"]["points"] == 1
    after = now()

    for at in (quiet, hidden):  # when it changed, the log does not know
        code, data = served(deploy, at, "--family", "hb:b")
        assert code == 0
        variant = variants_by_point(data)[point]
        assert (variant["status"], variant["why"], variant["admitted"]) == (
            "in_doubt",
            "outside",
            None,
        )
        assert [p["quarantined"] for p in variant["payloads"]] == [False, True]
        assert data["undetermined"] == ["hb:b-v1"]
        assert any(
            "1 point(s) undetermined: changed by something other" in b for b in data["basis"]
        )
    code, data = served(deploy, after, "--family", "hb:b")
    assert variants_by_point(data)[point]["admitted"] is True
    assert data["served"] == ["hb:b-v1"]


def rewrite_as_an_older_version(deploy: Deployment) -> None:
    """The log as a version before this one left it: its ingestion entries without the
    points and payload they wrote; the chain hashed again, runs' heads and the head moved."""
    engine = create_engine(deploy.settings.table.resolved_url())
    try:
        with Session(engine) as session, session.begin():
            moved: dict[str, str] = {}
            prev = GENESIS
            for row in session.scalars(select(AuditRow).order_by(AuditRow.seq)).all():
                if row.target_type == "ingest":
                    row.after = {
                        k: v for k, v in row.after.items() if k not in ("payload", "points")
                    }
                digest = entry_hash_of(prev, entry_of(row))
                moved[row.entry_hash] = digest
                row.prev_hash, row.entry_hash, prev = prev, digest, digest
                session.flush()
            for run in session.scalars(select(RunRow)).all():
                head = (run.counts or {}).get("audit_head")
                if head in moved:
                    run.counts = {**run.counts, "audit_head": moved[head]}
            session.execute(update(AuditHeadRow).values(entry_hash=prev))
    finally:
        engine.dispose()
    code, verified = deploy.json("audit", "verify")
    assert (code, verified["problems"]) == (0, [])


def test_an_older_log_says_what_it_cannot_answer(deploy: Deployment) -> None:
    families(deploy)
    deploy.init_ingest()
    ingested = now()
    deploy.edit_front("b-v1", status="retired")
    assert deploy.json("apply")[0] == 0
    applied = now()
    rewrite_as_an_older_version(deploy)
    points = deploy.points().payloads

    everything = ["--doc", "hb:a-v1", "--doc", "hb:a-v2", "--doc", "hb:b-v1"]
    code, data = served(deploy, ingested, *everything)
    assert code == 0
    said = variants_by_point(data)
    assert set(said) == set(points)  # the points an older entry wrote, named all the same
    assert {(v["status"], v["why"], v["admitted"]) for v in said.values()} == {
        ("unknown", "legacy_ingest", None)
    }
    assert sorted(data["undetermined"]) == ["hb:a-v1", "hb:a-v2", "hb:b-v1"]
    assert data["log"]["ingests_without_payload"] == 3
    assert any("did not record the payload" in line for line in data["basis"])

    result = deploy.cli("audit", "served", "--at", applied.isoformat(), "--family", "hb:a")
    assert result.exit_code == 1  # no entry names the family: the older ingestion did not
    assert "name such documents with --doc" in result.output

    code, data = served(deploy, applied, *everything)
    said = variants_by_point(data)
    [retired] = list(deploy.points().of("hb:b-v1"))
    assert (said[retired]["status"], said[retired]["admitted"]) == ("known", False)
    assert said[retired]["payloads"] == [
        {k: points[retired].get(k) for k in MANAGED_KEYS}
    ]  # what the retiring write found and wrote: known from then on
    others = {p for p in said if p != retired}
    assert {said[p]["status"] for p in others} == {"unknown"}  # never written since


@pytest.mark.parametrize("deploy", ["sqlite", "edge"], indirect=True)
def test_history_is_served_at_each_period_and_draws_a_lane_a_version(
    deploy: Deployment, tmp_path: Path
) -> None:
    families(deploy)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    deploy.edit_front("a-v2", status="retired")
    code, retired = deploy.json("apply")
    assert code == 0
    assert deploy.json("rollback", retired["run_id"])[0] == 0

    picture = tmp_path / "a.svg"
    result = deploy.cli(
        "--format", "json", "audit", "history", "--family", "hb:a", "-o", str(picture)
    )
    assert result.exit_code == 0, result.output
    history = json.loads(result.stdout)
    assert [d["doc_id"] for d in history["documents"]] == ["hb:a-v1", "hb:a-v2"]
    for document in history["documents"]:
        states = [
            v["payloads"][0]["version_state"]
            for p in document["periods"]
            for v in p["variants"]
            if v["status"] == "known"
        ]
        assert len(states) >= 3  # ingested, changed by the run, changed back by the rollback
        for period in document["periods"]:
            code, data = served(
                deploy, datetime.fromisoformat(period["from"]), "--doc", document["doc_id"]
            )
            assert code == 0
            [answer] = data["documents"]
            at_start = Counter(
                json.dumps(v["payloads"], sort_keys=True)
                for v in answer["variants"]
                for _ in v["points"]
            )
            in_history = Counter()
            for variant in period["variants"]:
                if variant["status"] != "absent":
                    in_history[json.dumps(variant["payloads"], sort_keys=True)] += variant["points"]
            assert at_start == in_history, (document["doc_id"], period["from"])
        assert document["served"]  # v2 was served, then not, then again; v1 meanwhile

    root = ET.parse(picture).getroot()
    assert root.tag == f"{SVG}svg"
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert [t for t in texts if t.startswith("v")][:2] == ["v1  hb:a-v1", "v2  hb:a-v2"]
    assert "family hb:a" in texts
    bars = [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    assert any("retired" in (b.find(f"{SVG}title").text or "") for b in bars)  # type: ignore[union-attr]

    result = deploy.cli("audit", "history", "--family", "hb:a")
    assert result.exit_code == 0
    assert "served by default_filter (log time):" in result.output
    assert "this answer rests on:" in result.output


def test_the_text_answer_names_each_version_and_what_it_rests_on(deploy: Deployment) -> None:
    families(deploy)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    result = deploy.cli("audit", "served", "--at", now().isoformat(), "--family", "hb:a")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("what default_filter(as_of=")
    [v1] = [line for line in lines if line.startswith("hb:a ") and "hb:a-v1" in line]
    [v2] = [line for line in lines if line.startswith("hb:a ") and "hb:a-v2" in line]
    assert "superseded" in v1
    assert " no " in v1
    assert "current" in v2
    assert " yes " in v2
    assert "3/3" in v2
    assert "this answer rests on:" in lines
    assert any("entries were verified (hash chain intact)" in line for line in lines)
    result = deploy.cli("audit", "served", "--at", "now", "--family", "hb:a")
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if line.startswith("hb:a ")] == [v1, v2]
