"""Acceptance: "in force" means exactly one version at every instant, on vaults shaped like
real ones — two undeclared (``unknown``) versions, a successor dated ahead, a frontmatter typo.

Each test drives the CLI on SQLite and on PostgreSQL (with Qdrant local mode) and asserts on
what a ``default_filter()`` scroll returns now and at instants after each declared date.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from acceptance_kit import Deployment, day, instant, kinds, writes_zero
from prometheus_client.parser import text_string_to_metric_families

from reconciler.model import OPEN_END, parse_instant, rfc3339

DIALECTS = pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)


SECOND = timedelta(seconds=1)


def at(offset_days: float) -> datetime:
    """An instant ``offset_days`` from now."""
    return parse_instant(instant(offset_days))


def served_over_time(deploy: Deployment, *offsets: float) -> list[set[str]]:
    """What ``default_filter(as_of=now + offset)`` returns, per offset (days)."""
    return [deploy.served(at(offset)) for offset in offsets]


def row(deploy: Deployment, doc_id: str) -> tuple[str, str | None, str]:
    found = deploy.rows()[doc_id]
    return found["version_state"], found["superseded_by"], rfc3339(found["effective_to"])


# -- 1. two undeclared versions ---------------------------------------------------------------


@DIALECTS
def test_two_live_unknown_versions_become_one(deploy: Deployment) -> None:
    deploy.note("vpn-2024", family="vpn", version="1", effective_from=day(-700))
    deploy.note("vpn", family="vpn", version="2", effective_from=day(-330))
    deploy.init_ingest()
    assert deploy.served() == {"hb:vpn-2024", "hb:vpn"}  # what ingestion alone leaves

    code, data = deploy.json("check")
    assert code == 2
    [sibling] = [f for f in data["findings"] if f["kind"] == "live_siblings"]
    assert (sibling["check"], sibling["doc_id"], sibling["severity"]) == (
        "siblings",
        "hb:vpn-2024",
        "critical",
    )
    assert sibling["actual"]["version_state"] == "unknown"
    assert (sibling["actual"]["sibling"], sibling["actual"]["sibling_state"]) == (
        "hb:vpn",
        "unknown",
    )

    code, data = deploy.json("apply")
    assert code == 0, data
    # The older one is superseded by its immediate successor, from that one's start; the
    # newer one keeps its declared state.
    assert row(deploy, "hb:vpn-2024") == ("superseded", "hb:vpn", f"{day(-330)}T00:00:00Z")
    assert row(deploy, "hb:vpn") == ("unknown", None, rfc3339(OPEN_END))
    assert served_over_time(deploy, 0, 1, 400) == [{"hb:vpn"}] * 3
    # Before the successor's start, the older version is history (superseded): never two.
    assert deploy.served(at(-400)) == set()
    code, data = deploy.json("check")
    # Nothing left to repair; a vault that declares no status is told so (no write).
    assert (code, kinds(data)) == (2, {("family", "all_unknown", None)})
    assert writes_zero(data)


def test_unknown_siblings_report_policy_only_tells(deploy: Deployment) -> None:
    deploy.configure(policy={"unknown_siblings": "report"})
    deploy.note("vpn-2024", family="vpn", version="1", effective_from=day(-700))
    deploy.note("vpn", family="vpn", version="2", effective_from=day(-330))
    deploy.init_ingest()
    code, data = deploy.json("apply")
    assert code == 0
    assert writes_zero(data), data["writes"]
    [sibling] = [f for f in data["findings"] if f["kind"] != "all_unknown"]
    assert (sibling["check"], sibling["kind"], sibling["doc_id"], sibling["severity"]) == (
        "siblings",
        "live_siblings",
        "hb:vpn-2024",
        "warning",
    )
    assert sibling["action"].startswith("none")
    assert deploy.served() == {"hb:vpn-2024", "hb:vpn"}
    # A declared successor is not "unknown beside unknown": the policy does not hold it back.
    deploy.edit_front("vpn-2024", superseded_by="vpn")
    assert deploy.json("apply")[0] == 0
    assert deploy.served() == {"hb:vpn"}


# -- 2. no gap before a successor's date ------------------------------------------------------


@DIALECTS
@pytest.mark.parametrize("declared", [None, "current"])
def test_a_successor_dated_ahead_leaves_no_gap(deploy: Deployment, declared: str | None) -> None:
    """Without statuses (most vaults) as with them, the old version is served until the new
    one comes into force, and the new one from then on, with no run in between."""
    deploy.note(
        "vpn",
        family="vpn",
        version="1",
        status=declared,
        superseded_by="vpn-2027.md",
        effective_from=day(-700),
    )
    deploy.note("vpn-2027", family="vpn", version="2", status=declared, effective_from=day(2))
    deploy.init_ingest()
    code, data = deploy.json("apply")
    assert code == 0, data
    old_state = declared or "unknown"
    assert row(deploy, "hb:vpn") == (old_state, None, f"{day(2)}T00:00:00Z")
    assert deploy.rows()["hb:vpn-2027"]["version_state"] == ("pending" if declared else "unknown")
    switch = parse_instant(day(2))
    assert served_over_time(deploy, 0, 30, 800) == [{"hb:vpn"}, {"hb:vpn-2027"}, {"hb:vpn-2027"}]
    assert deploy.served(switch - SECOND) == {"hb:vpn"}
    assert deploy.served(switch) == {"hb:vpn-2027"}
    assert deploy.json("check")[0] == 0

    # At the date, the dates job only does the bookkeeping of state; retrieval had already
    # switched at the instant itself.
    later = instant(2.5)
    code, data = deploy.json("apply", "--now", later)
    assert code == 0
    assert row(deploy, "hb:vpn")[:2] == ("superseded", "hb:vpn-2027")
    assert deploy.served(parse_instant(later)) == {"hb:vpn-2027"}
    # A note still saying current once its successor is in force is stale: a warning, no
    # write (``status: superseded`` written ahead schedules it with no later edit).
    code, data = deploy.json("check", "--now", later)
    stale = {("family", "status_contradicts_link", "hb:vpn")} if declared else set()
    assert (code, kinds(data), writes_zero(data)) == (2 if declared else 0, stale, True)


def test_a_version_superseded_too_early_is_served_again(deploy: Deployment) -> None:
    """A table repaired by an older build (the old version superseded at once, nothing
    served until the successor's date) is put right by the next apply."""
    deploy.note("vpn", family="vpn", version="1", superseded_by="vpn-2027.md")
    deploy.note("vpn-2027", family="vpn", version="2", effective_from=day(5))
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    early = {"version_state": "superseded", "superseded_by": "hb:vpn-2027"}
    deploy.set_row("hb:vpn", **early)
    deploy.set_payload(sorted(deploy.points().of("hb:vpn")), early)
    assert deploy.served() == set()

    code, data = deploy.json("check")
    assert code == 2
    assert ("family", "state_mismatch", "hb:vpn") in kinds(data)
    assert deploy.json("apply")[0] == 0
    assert served_over_time(deploy, 0, 6) == [{"hb:vpn"}, {"hb:vpn-2027"}]


# -- 3. a frontmatter typo --------------------------------------------------------------------


@DIALECTS
@pytest.mark.parametrize("with_id", [True, False], ids=["frontmatter-id", "path-id"])
def test_a_frontmatter_typo_keeps_identity_and_state(deploy: Deployment, with_id: bool) -> None:
    doc_id = "hb:vpn-policy" if with_id else "hb:net/vpn"
    deploy.note(
        "net/vpn",
        id="vpn-policy" if with_id else None,
        family="vpn",
        status="current",
        effective_from=day(-100),
    )
    deploy.family("travel", 1)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    before = deploy.rows()[doc_id]
    points = deploy.points().of(doc_id)

    note = deploy.vault / "net" / "vpn.md"
    note.write_text(note.read_text().replace("status: current", "status: [current"))
    code, data = deploy.json("check")
    assert code == 2
    [broken] = data["findings"]
    assert (broken["check"], broken["kind"], broken["doc_id"]) == (
        "family",
        "invalid_source_document",
        doc_id,
    )
    assert broken["actual"]["path"] == "net/vpn.md"
    assert "not valid YAML" in broken["actual"]["message"]

    # A month on (far past the grace period), its row and payloads are as they were.
    month = instant(30)
    code, data = deploy.json("apply", "--now", month)
    assert code == 0
    assert kinds(data) == {("family", "invalid_source_document", doc_id)}
    assert writes_zero(data)
    assert deploy.rows()[doc_id] == before
    assert deploy.points().of(doc_id) == points
    assert doc_id in deploy.served(parse_instant(month))

    # Fixed again: nothing to report, nothing to write.
    note.write_text(note.read_text().replace("status: [current", "status: current"))
    code, data = deploy.json("check", "--now", month)
    assert (code, data["findings"]) == (0, [])


@DIALECTS
def test_a_typo_in_one_field_keeps_its_registered_value(deploy: Deployment) -> None:
    """A field the vault cannot read is taken as absent by the connector; for a registered
    note the reconciler keeps the registered value instead: a mistyped date does not bring
    the old version back, a mistyped status does not serve a retired note again."""
    deploy.note("vpn-v1", family="vpn", version="1", effective_from=day(-400))
    deploy.note("vpn-v2", family="vpn", version="2", effective_from=day(-30))
    deploy.note("old-faq", family="faq", status="retired")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    assert deploy.served() == {"hb:vpn-v2"}
    rows = deploy.rows()

    deploy.edit_front("vpn-v2", effective_from="2026-13-01")
    deploy.edit_front("old-faq", status="retierd")
    code, data = deploy.json("apply", "--now", instant(30))
    assert code == 0
    assert kinds(data) == {
        ("family", "invalid_source_document", "hb:vpn-v2"),
        ("family", "invalid_source_document", "hb:old-faq"),
    }
    fields = {f["doc_id"]: f["actual"]["field"] for f in data["findings"]}
    assert fields == {"hb:vpn-v2": "effective_from", "hb:old-faq": "state"}
    assert writes_zero(data)
    assert deploy.rows() == rows
    assert deploy.served(at(30)) == {"hb:vpn-v2"}


def test_a_broken_file_where_a_moved_note_was_is_not_that_note(deploy: Deployment) -> None:
    """The identity last seen at a path is taken only if no parsed note holds it now."""
    deploy.note("vpn", id="vpn-policy", family="vpn", status="current")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    (deploy.vault / "vpn.md").rename(deploy.vault / "network-vpn.md")
    (deploy.vault / "vpn.md").write_text("---\nstatus: [current\n---\nA new page.\n")
    code, data = deploy.json("check")
    assert code == 2
    assert kinds(data) == {("family", "source_problem", "hb:vpn")}
    assert deploy.json("apply")[0] == 0
    assert deploy.served() == {"hb:vpn-policy"}


def test_a_broken_file_at_the_path_of_a_retired_note_does_not_bring_it_back(
    deploy: Deployment,
) -> None:
    deploy.configure(policy={"missing_in_source_grace": "1d"})
    deploy.note("vpn", id="vpn-policy", family="vpn", status="current")
    deploy.note("other", family="other", status="current")
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    (deploy.vault / "vpn.md").unlink()
    assert deploy.json("apply", "--now", instant(2))[0] == 0
    assert deploy.rows()["hb:vpn-policy"]["version_state"] == "retired"
    (deploy.vault / "vpn.md").write_text("---\nstatus: [current\n---\nSomething new.\n")
    code, data = deploy.json("check", "--now", instant(3))
    assert code == 2
    assert kinds(data) == {("family", "source_problem", "hb:vpn")}
    assert deploy.rows()["hb:vpn-policy"]["version_state"] == "retired"


@DIALECTS
def test_a_broken_note_never_registered_is_reported_where_operators_look(
    deploy: Deployment,
) -> None:
    deploy.family("travel", 1)
    deploy.init_ingest()
    (deploy.vault / "draft-note.md").write_text("---\nstatus: [current\n---\nHalf written.\n")
    textfile = deploy.root / "reconciler.prom"
    deploy.config.write_text(
        deploy.config.read_text() + f'[metrics]\ntextfile = "{textfile}"\n', encoding="utf-8"
    )
    for command in ("check", "plan", "run"):
        code, data = deploy.json(command)
        assert code == (0 if command == "run" else 2), data
        [problem] = data["findings"]
        assert (problem["check"], problem["kind"], problem["severity"]) == (
            "family",
            "source_problem",
            "warning",
        )
        assert problem["doc_id"] == "hb:draft-note"
        assert problem["actual"]["path"] == "draft-note.md"
        assert "not valid YAML" in problem["actual"]["message"]
        assert writes_zero(data)
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(textfile.read_text())
        for sample in family.samples
    }
    assert samples[("reconciler_broken_documents", ())] == 1.0
    labels = (("check", "family"), ("kind", "source_problem"), ("severity", "warning"))
    assert samples[("reconciler_findings", labels)] == 1.0
    # Table output names it too.
    result = deploy.cli("check")
    assert "source_problem" in result.output
    assert "draft-note.md" in result.output


# -- repair of what does not exist ------------------------------------------------------------


def test_repair_of_a_document_or_family_that_does_not_exist(deploy: Deployment) -> None:
    deploy.family("travel", 1)
    deploy.init_ingest()
    for args in (["--doc", "hb:no-such-doc"], ["--family", "hb:no-such-family"]):
        for dry in ([], ["--dry-run"]):
            result = deploy.cli("repair", *args, *dry)
            assert result.exit_code == 1, result.output
            assert "no such" in result.output
            assert "agree" not in result.output
    # Nothing was recorded as a run of its own.
    assert [r["mode"] for r in deploy.dump()["runs"].values()] == ["ingest"]
    # A real one still works, and one only in the source (not yet ingested) is known too.
    assert deploy.cli("repair", "--doc", "hb:travel-v1").exit_code == 0
    deploy.note("new", family="travel", version="2", status="current")
    result = deploy.cli("repair", "--doc", "hb:new", "--dry-run")
    assert result.exit_code == 2, result.output
