"""Large runs through the CLI: the text report shows a summary and the first findings (and
writes) of each kind, everything with --all, N of each with --limit N, while JSON keeps every
finding; progress shows on a terminal's stderr (a real pseudo-terminal), never in JSON output
or when stderr is piped."""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, body

from reconciler.app.deployment import ingest_sources
from reconciler.cli.rendering import PER_KIND

#: A finding's first line in the text report: severity, check/kind, where.
FINDING = re.compile(r"^  (CRITICAL|WARNING|INFO) +(\w+)/(\w+)  (\S+)$")
#: Terminal control sequences (colours, cursor moves) in what a terminal received.
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NOTES = 40


def drifted(deploy: Deployment) -> Deployment:
    """40 notes edited in place after ingestion (40 hash/in_place_edit findings, critical) and
    a family with two versions in force (one family/invalid_supersession, a warning)."""
    for i in range(NOTES):
        deploy.note(f"note-{i:02}", body(f"note {i}", f"fact {i}."), id=f"note-{i:02}")
    deploy.family("expenses", 2)
    deploy.init_ingest()
    for i in range(NOTES):
        deploy.note(f"note-{i:02}", body(f"note {i}", f"fact {i}, edited."), id=f"note-{i:02}")
    deploy.edit_front("expenses-v1", status="current", superseded_by=None)
    return deploy


def shown(text: str) -> dict[str, list[str]]:
    """check/kind -> the documents whose findings the text report shows, in order."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = FINDING.match(line)
        if match:
            out.setdefault(f"{match[2]}/{match[3]}", []).append(match[4])
    return out


def found(data: dict[str, Any]) -> dict[str, list[str]]:
    """check/kind -> the documents of a run's JSON findings, in order."""
    out: dict[str, list[str]] = {}
    for f in data["findings"]:
        out.setdefault(f"{f['check']}/{f['kind']}", []).append(f["doc_id"] or f["family"])
    return out


def row(text: str, first: str) -> list[str]:
    """The cells of the table row starting with ``first``."""
    (line,) = [line for line in text.splitlines() if line.split()[:1] == [first]]
    return line.split()


def writes(text: str, kind: str) -> int:
    """How many write lines of a kind (table, payload, reingest) the report shows."""
    return sum(1 for line in text.splitlines() if line.startswith(f"  {kind} "))


@pytest.fixture
def big(deploy: Deployment) -> Deployment:
    return drifted(deploy)


def test_by_default_a_summary_and_the_first_findings_of_each_kind(big: Deployment) -> None:
    code, data = big.json("check")
    assert code == 2
    every = found(data)
    assert {kind: len(docs) for kind, docs in every.items()} == {
        "family/invalid_supersession": 1,
        "hash/in_place_edit": NOTES,
    }

    result = big.cli("check")
    assert result.exit_code == 2, result.output
    text = result.output
    assert shown(text) == {
        "family/invalid_supersession": every["family/invalid_supersession"],
        "hash/in_place_edit": every["hash/in_place_edit"][:PER_KIND],
    }
    more = NOTES - PER_KIND
    assert f"  … and {more} more hash/in_place_edit (use --all or --limit N)" in text
    assert "more family/" not in text
    # The writes that would follow are cut the same way, kind by kind.
    assert (writes(text, "table"), writes(text, "payload"), writes(text, "reingest")) == (
        PER_KIND,
        PER_KIND,
        PER_KIND,
    )
    assert f"  … and {more} more table writes (use --all or --limit N)" in text
    assert f"  … and {more} more re-ingest requests (use --all or --limit N)" in text
    # The summary counts everything: per check (checked, findings, by severity), per kind.
    assert ["check", "checked", "findings", "critical", "warning", "info"] in [
        line.split() for line in text.splitlines()
    ]
    checked = str(NOTES + 1)  # families: the notes' own and the expenses family
    assert row(text, "hash") == ["hash", checked, str(NOTES), str(NOTES), "0", "0"]
    assert row(text, "family") == ["family", checked, "1", "0", "1", "0"]
    assert row(text, "siblings") == ["siblings", checked, "0", "0", "0", "0"]
    assert row(text, "hash/in_place_edit") == ["hash/in_place_edit", "critical", str(NOTES)]
    assert row(text, "family/invalid_supersession")[1:] == ["warning", "1"]
    assert f"planned: {NOTES} row(s)" in text
    assert len(text.splitlines()) < 80  # --all prints well over 4 lines a finding


def test_all_prints_every_finding_and_write(big: Deployment) -> None:
    _code, data = big.json("plan")
    result = big.cli("plan", "--all")
    assert result.exit_code == 2, result.output
    assert shown(result.output) == found(data)
    assert "… and" not in result.output
    assert writes(result.output, "table") == len(data["plan"]["rows"]) == NOTES
    assert writes(result.output, "payload") == len(data["plan"]["payloads"]) == NOTES


def test_limit_shows_n_of_each_kind(big: Deployment) -> None:
    _code, data = big.json("check")
    every = found(data)
    result = big.cli("check", "--limit", "2")
    assert result.exit_code == 2, result.output
    assert shown(result.output) == {
        "family/invalid_supersession": every["family/invalid_supersession"],
        "hash/in_place_edit": every["hash/in_place_edit"][:2],
    }
    assert f"… and {NOTES - 2} more hash/in_place_edit" in result.output
    assert writes(result.output, "reingest") == 2

    # --limit 0: the summary alone, with how many of each kind there are.
    result = big.cli("check", "--limit", "0")
    assert shown(result.output) == {}
    assert f"… and {NOTES} more hash/in_place_edit" in result.output
    assert "… and 1 more family/invalid_supersession" in result.output
    assert row(result.output, "hash")[2] == str(NOTES)


def test_all_and_limit_together_are_refused_before_anything_runs(big: Deployment) -> None:
    runs = len(big.json("status")[1]["last_runs"])
    result = big.cli("apply", "--all", "--limit", "3")
    assert result.exit_code != 0
    assert "give --all or --limit N, not both" in result.output
    assert len(big.json("status")[1]["last_runs"]) == runs
    assert all(not r["quarantined"] for r in big.rows().values())


def test_json_keeps_every_finding_whatever_the_limit(big: Deployment) -> None:
    code, limited = big.json("check", "--limit", "1")
    assert code == 2
    assert len(limited["findings"]) == NOTES + 1
    _code, whole = big.json("check", "--all")
    assert found(limited) == found(whole)


def test_apply_and_repair_reports_are_cut_the_same_way(big: Deployment) -> None:
    result = big.cli("repair", "--doc", "hb:note-07", "--dry-run", "--limit", "1")
    assert result.exit_code == 2, result.output
    assert shown(result.output) == {"hash/in_place_edit": ["hb:note-07"]}

    result = big.cli("apply", "--limit", "3")
    assert result.exit_code == 0, result.output
    assert len(shown(result.output)["hash/in_place_edit"]) == 3
    assert f"… and {NOTES - 3} more payload writes" in result.output
    assert f"written: {NOTES} row(s), {NOTES} payload write(s)" in result.output
    assert sum(r["quarantined"] for r in big.rows().values()) == NOTES  # all were applied


def test_small_runs_read_as_before(deploy: Deployment) -> None:
    deploy.family("travel", 2)
    deploy.init_ingest()
    deploy.edit_front("travel-v1", status="current", superseded_by=None)
    result = deploy.cli("check")
    assert result.exit_code == 2, result.output
    assert "… and" not in result.output
    assert "findings (1):" in result.output
    assert "  WARNING  family/invalid_supersession  hb:travel-v2" in result.output
    assert "           action:   " in result.output
    deploy.edit_front("travel-v1", status="superseded", superseded_by="travel-v2")
    result = deploy.cli("check")
    assert result.exit_code == 0, result.output
    assert "no findings: the three stores agree" in result.output
    assert "kind" not in result.output.split()  # no kinds table without findings


# -- progress ------------------------------------------------------------------------------


def reconciler(config: Path, *args: str, terminal: bool) -> tuple[int, str, str]:
    """Run ``reconciler --config CONFIG ARGS`` in a real process with stdout piped and stderr
    on a pseudo-terminal (``terminal``) or a pipe; return (exit code, stdout, stderr as text,
    terminal control sequences removed)."""
    env = {
        **os.environ,
        "TERM": "xterm",
        # The engine reports every scroll batch: small batches so that 42 chunks are several.
        "RECONCILER_INDEX__SCROLL_BATCH": "10",
    }
    command = [sys.executable, "-m", "reconciler.cli", "--config", str(config), *args]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        return done.returncode, done.stdout, done.stderr
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=env) as process:
        os.close(follower)
        received = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process has exited and closed the terminal
                break
            if not chunk:
                break
            received.append(chunk)
        os.close(leader)
        assert process.stdout is not None
        stdout = process.stdout.read().decode()
        code = process.wait()
    return code, stdout, CONTROL.sub("", b"".join(received).decode())


def test_progress_on_a_terminal_for_ingest_check_and_apply(deploy: Deployment) -> None:
    for i in range(NOTES):
        deploy.note(f"note-{i:02}", id=f"note-{i:02}")
    deploy.family("expenses", 2)
    assert deploy.cli("init").exit_code == 0
    notes = NOTES + 2

    code, out, terminal = reconciler(deploy.config, "ingest", terminal=True)
    assert code == 0, terminal
    assert f"{notes}/{notes} documents read" in terminal
    assert "chunks embedded" in terminal
    assert "documents read" not in out  # the report on stdout is the report alone
    assert row(out, "hb")[2] == str(notes)  # seen

    code, out, terminal = reconciler(deploy.config, "check", terminal=True)
    assert code == 0, terminal
    assert "40 chunks checked" in terminal
    assert "no findings" in out
    assert "chunks checked" not in out

    for i in range(NOTES):  # edited in place: every document's chunks get quarantined
        deploy.note(f"note-{i:02}", body(f"note {i}", "edited"), id=f"note-{i:02}")
    code, out, terminal = reconciler(deploy.config, "apply", terminal=True)
    assert code == 0, terminal
    assert "chunks checked" in terminal
    assert "chunks scanned for writes" in terminal
    assert f"written: {NOTES} row(s)" in out


@pytest.mark.parametrize("command", ["ingest", "check", "apply"])
def test_no_progress_in_json_or_off_a_terminal(deploy: Deployment, command: str) -> None:
    for i in range(NOTES):
        deploy.note(f"note-{i:02}", id=f"note-{i:02}")
    deploy.init_ingest()
    deploy.note("note-00", body("note 0", "edited"), id="note-00")  # something to apply

    code, out, terminal = reconciler(deploy.config, "--format", "json", command, terminal=True)
    assert code in (0, 2), terminal
    assert terminal == ""  # nothing at all on the terminal: no progress, no log line
    assert isinstance(json.loads(out), dict)

    code, out, stderr = reconciler(deploy.config, command, terminal=False)
    assert code in (0, 2), stderr
    assert stderr == ""  # a cron log gets the report alone
    assert out.strip()


def test_ingestion_reports_its_progress(deploy: Deployment) -> None:
    for i in range(5):  # two sections each: two chunks
        deploy.note(f"note-{i}", body(f"note {i}", "one", "two"), id=f"note-{i}")
    assert deploy.cli("init").exit_code == 0
    events: list[tuple[str, int, int | None]] = []
    data = ingest_sources(deploy.settings, progress=lambda *event: events.append(event))
    documents = [e for e in events if e[0] == "documents"]
    chunks = [e for e in events if e[0] == "chunks"]
    # The total is known as soon as the source is listed, then every note counts once.
    assert documents == [("documents", n, 5) for n in range(6)]
    assert [count for _, count, _ in chunks] == [2, 4, 6, 8, 10]
    assert chunks[-1][1] == data["totals"]["chunks_written"]
    assert all(total is None for _, _, total in chunks)


def test_the_cli_imports_without_rich() -> None:
    """rich is imported only where something is drawn, so the CLI starts without it."""
    code = "import sys; sys.modules['rich'] = None; import reconciler.cli"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
