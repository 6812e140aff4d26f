"""Contradictions in the source are findings (issue 27, items 2 and 4), through the CLI.

- The real PEPs (``examples/peps/head``, its preset as shipped): ``check`` names exactly the
  PEPs whose headers contradict their links, worked out here from the headers by a plain line
  reader (``bench.peps``; never by the code under test): a status in force (Final, Active,
  Accepted, Provisional) beside a successor that comes into force (by its ``Superseded-By`` or
  the other's ``Replaces``) created already, and a successor created before the PEP it
  supersedes. Warnings with no write: a second run reports them again and writes nothing.
- A vault's scheduled successor (``status: current``, ``superseded_by`` a version that starts
  next month) is no contradiction; once it has started, the note still saying ``current`` is
  reported (``[policy] status_contradicts_link = "ignore"`` silences it) and rows are right
  either way: the time rule supersedes the old version. Written ahead as ``status:
  superseded``, the old note is served until the switch and never reported.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from acceptance_kit import Deployment, body, day, instant, kinds, writes_zero

from bench.peps import NEVER_IN_FORCE, SERVED_STATUSES, PepLabels, pep_headers

PEPS = Path(__file__).resolve().parents[2] / "examples" / "peps"
CONTRADICTIONS = frozenset({"status_contradicts_link", "successor_predates"})


def created(path: Path) -> datetime:
    """A PEP's ``Created`` header as an instant (the preset's ``effective_from``)."""
    text = pep_headers(path)["Created"]
    for shape in ("%d-%b-%Y", "%d-%B-%Y", "%d %b %Y", "%d %B %Y"):
        try:
            return datetime.strptime(text, shape).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise AssertionError(f"{path.name}: Created {text!r}")


def expected_contradictions(folder: Path, now: datetime) -> dict[tuple[str, str], set[str]]:
    """(kind, doc id) -> the successors it names, from the headers alone."""
    labels = PepLabels.of(folder)
    start = {int(pep_headers(p)["PEP"]): created(p) for p in folder.glob("peps/pep-*.rst")}

    def doc_id(number: int) -> str:
        return f"peps:pep-{number:04d}"

    found: dict[tuple[str, str], set[str]] = {}
    for number, status in labels.status.items():
        entering = [s for s in labels.successors[number] if labels.status[s] not in NEVER_IN_FORCE]
        begun = {doc_id(s) for s in entering if start[s] <= now}
        if status in SERVED_STATUSES and begun:
            found[("status_contradicts_link", doc_id(number))] = begun
        older = {doc_id(s) for s in entering if start[s] < start[number]}
        if older:
            found[("successor_predates", doc_id(number))] = older
    return found


def contradictions_of(report: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    listed = {"status_contradicts_link": "successors_in_force", "successor_predates": "successors"}
    found = {}
    for f in report["findings"]:
        if f["kind"] in CONTRADICTIONS:
            assert (f["check"], f["severity"]) == ("family", "warning"), f
            assert f["action"].startswith("none: declared links win"), f
            found[(f["kind"], f["doc_id"])] = {s["doc_id"] for s in f["actual"][listed[f["kind"]]]}
    return found


def test_the_peps_contradictions_are_named_exactly_and_never_written(tmp_path: Path) -> None:
    deploy = Deployment(tmp_path)
    shutil.copytree(PEPS / "head", tmp_path / "head")
    deploy.config.write_text((PEPS / "reconciler.toml").read_text(encoding="utf-8"), "utf-8")
    deploy.init_ingest()

    expected = expected_contradictions(PEPS / "head", datetime.now(UTC))
    # what the issue saw, among what the headers say
    assert {
        ("status_contradicts_link", "peps:pep-0248"),
        ("status_contradicts_link", "peps:pep-0333"),
        ("status_contradicts_link", "peps:pep-0409"),
        ("status_contradicts_link", "peps:pep-0397"),
        ("status_contradicts_link", "peps:pep-0486"),
        ("status_contradicts_link", "peps:pep-0609"),
        ("successor_predates", "peps:pep-0102"),
        ("successor_predates", "peps:pep-0631"),
    } <= set(expected)
    assert expected[("successor_predates", "peps:pep-0102")] == {"peps:pep-0101"}
    assert expected[("status_contradicts_link", "peps:pep-0397")] == {"peps:pep-0773"}

    code, first = deploy.json("run")
    assert code == 0, first
    assert contradictions_of(first) == expected
    # "Superseded" and no successor (PEPs 6, 411): said, not contradicted
    assert not {f["doc_id"] for f in first["findings"]} & {"peps:pep-0006", "peps:pep-0411"}
    rows = deploy.rows()
    for _kind, doc_id in expected:
        assert rows[doc_id]["version_state"] == "superseded", doc_id  # declared links win

    for command in ("check", "run"):
        code, again = deploy.json(command)
        assert contradictions_of(again) == expected, command
        assert writes_zero(again), (command, again["writes"])
        if command == "check":
            assert code == 2  # a finding is drift to look at
    assert deploy.rows() == rows


def test_a_scheduled_successor_is_no_contradiction_and_a_stale_note_is_one(
    deploy: Deployment,
) -> None:
    deploy.note(
        "vpn",
        body("VPN", "Use the old gateway."),
        id="vpn",
        status="current",
        superseded_by="vpn-2",
        effective_from=day(-100),
    )
    deploy.note(
        "vpn-2", body("VPN 2", "Use the new gateway."), id="vpn-2", status="current",
        effective_from=day(30),
    )  # fmt: skip
    # the same, written ahead as what it is to become: served until its successor starts
    deploy.note(
        "mail",
        body("Mail", "Use the old server."),
        id="mail",
        status="superseded",
        superseded_by="mail-2",
        effective_from=day(-100),
    )
    deploy.note(
        "mail-2", body("Mail 2", "Use the new server."), id="mail-2", status="current",
        effective_from=day(30),
    )  # fmt: skip
    deploy.init_ingest()
    code, data = deploy.json("check")
    assert (code, data["findings"]) == (0, [])  # the vault's way to schedule a replacement
    assert deploy.served() == {"hb:vpn", "hb:mail"}

    later = instant(31)
    code, data = deploy.json("apply", "--now", later)
    assert code == 0, data
    assert ("family", "status_contradicts_link", "hb:vpn") in kinds(data)
    rows = deploy.rows()
    assert (rows["hb:vpn"]["version_state"], rows["hb:vpn"]["superseded_by"]) == (
        "superseded",
        "hb:vpn-2",
    )
    assert deploy.served(datetime.fromisoformat(later)) == {"hb:vpn-2", "hb:mail-2"}
    code, data = deploy.json("check", "--now", later)
    assert (code, kinds(data)) == (2, {("family", "status_contradicts_link", "hb:vpn")})
    assert writes_zero(data)

    deploy.configure(policy={"status_contradicts_link": "ignore"})
    code, data = deploy.json("check", "--now", later)
    assert (code, data["findings"]) == (0, [])

    deploy.configure()  # reported again, until the note says what the rule did
    deploy.edit_front("vpn", status="superseded")
    code, data = deploy.json("check", "--now", later)
    assert (code, data["findings"]) == (0, []), data["findings"]
