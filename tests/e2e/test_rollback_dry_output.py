"""What ``rollback --dry-run`` prints, held byte for byte (text; JSON as its values): a plain run, a
refused one, a cascade, a field changed by hand since, a declaration undone. Run ids are
made up per run, so each is replaced by its name in the history before comparing."""

from __future__ import annotations

import json

from acceptance_kit import Deployment

GOLDEN: dict[str, str] = {
    "A cascade json": "exit 0\n"
    "{\n"
    '  "run_id": null,\n'
    '  "rolled_back": "<A>",\n'
    '  "dry_run": true,\n'
    '  "rows": 2,\n'
    '  "payload_writes": 2,\n'
    '  "points": 2,\n'
    '  "declarations": 0,\n'
    '  "cascaded": [\n'
    "    {\n"
    '      "run_id": null,\n'
    '      "rolled_back": "<B>",\n'
    '      "dry_run": true,\n'
    '      "rows": 1,\n'
    '      "payload_writes": 2,\n'
    '      "points": 2,\n'
    '      "declarations": 0,\n'
    '      "cascaded": [],\n'
    '      "not_undone": [\n'
    "        {\n"
    '          "target_type": "row",\n'
    '          "target": "hb:p2",\n'
    '          "after": {\n'
    '            "doc_class": "z",\n'
    '            "changed_since": true\n'
    "          }\n"
    "        }\n"
    "      ]\n"
    "    }\n"
    "  ],\n"
    '  "not_undone": []\n'
    "}\n",
    "A cascade table": "exit 0\n"
    "would roll back run <B>: 1 row(s), 2 payload write(s) on 2 chunk(s) "
    "restored (dry run: nothing written)\n"
    "  not undone: row hb:p2\n"
    "would roll back run <A>: 2 row(s), 2 payload write(s) on 2 chunk(s) "
    "restored (dry run: nothing written)\n",
    "A json": "exit 3\n"
    '{"error": "refused", "message": "run <A> cannot be rolled back on its own: later '
    "run(s) <B> changed the same documents (newest first). Roll them back first, or "
    'use --cascade to roll them all back, newest first (--dry-run shows it)", '
    '"exit_code": 3}\n',
    "A table": "exit 3\n"
    "error: run <A> cannot be rolled back on its own: later run(s) <B> changed the "
    "same documents (newest first). Roll them back first, or use --cascade to roll "
    "them all back, newest first (--dry-run shows it)\n",
    "B json": "exit 0\n"
    "{\n"
    '  "run_id": null,\n'
    '  "rolled_back": "<B>",\n'
    '  "dry_run": true,\n'
    '  "rows": 1,\n'
    '  "payload_writes": 2,\n'
    '  "points": 2,\n'
    '  "declarations": 0,\n'
    '  "cascaded": [],\n'
    '  "not_undone": [\n'
    "    {\n"
    '      "target_type": "row",\n'
    '      "target": "hb:p2",\n'
    '      "after": {\n'
    '        "doc_class": "z",\n'
    '        "changed_since": true\n'
    "      }\n"
    "    }\n"
    "  ]\n"
    "}\n",
    "B table": "exit 0\n"
    "would roll back run <B>: 1 row(s), 2 payload write(s) on 2 chunk(s) restored "
    "(dry run: nothing written)\n"
    "  not undone: row hb:p2\n",
    "D json": "exit 0\n"
    "{\n"
    '  "run_id": null,\n'
    '  "rolled_back": "<D>",\n'
    '  "dry_run": true,\n'
    '  "rows": 2,\n'
    '  "payload_writes": 2,\n'
    '  "points": 2,\n'
    '  "declarations": 2,\n'
    '  "cascaded": [],\n'
    '  "not_undone": []\n'
    "}\n",
    "D table": "exit 0\n"
    "would roll back run <D>: 2 row(s), 2 payload write(s) on 2 chunk(s) restored "
    "(dry run: nothing written)\n",
}


def named(deploy: Deployment, text: str, runs: dict[str, str]) -> str:
    for name, run_id in runs.items():
        text = text.replace(run_id, f"<{name}>").replace(run_id[:8], f"<{name}:8>")
    return text


def test_the_dry_run_output_of_rollback(deploy: Deployment) -> None:
    for n in range(4):
        deploy.note(f"p{n}", family=f"p{n}", status="current", doc_class="a")
    deploy.note("q0", status="current")
    deploy.note("q1", status="current")
    deploy.init_ingest()
    runs = {}
    deploy.edit_front("p0", status="retired")
    deploy.edit_front("p1", status="retired")
    code, a = deploy.json("apply")
    assert code == 0, a
    runs["A"] = a["run_id"]
    deploy.edit_front("p1", doc_class="b")
    deploy.edit_front("p2", doc_class="c")
    code, b = deploy.json("apply")
    assert code == 0, b
    runs["B"] = b["run_id"]
    deploy.set_row("hb:p2", doc_class="z")
    code, d = deploy.json("declare", "--family", "joined", "hb:q0", "hb:q1", "--reason", "one")
    assert code == 0, d
    runs["D"] = d["run_id"]
    before = deploy.dump(), deploy.points().payloads

    got = {}
    for name, args in {
        "A": ("rollback", runs["A"], "--dry-run"),
        "A cascade": ("rollback", runs["A"], "--cascade", "--dry-run"),
        "B": ("rollback", runs["B"], "--dry-run"),
        "D": ("rollback", runs["D"][:8], "--dry-run"),
    }.items():
        for fmt in ("table", "json"):
            result = deploy.cli("--format", fmt, *args)
            got[f"{name} {fmt}"] = f"exit {result.exit_code}\n" + named(deploy, result.output, runs)
            if fmt == "json" and result.exit_code == 0:
                json.loads(result.stdout)
    assert (deploy.dump(), deploy.points().payloads) == before  # dry: nothing written
    # The text is held byte for byte; the JSON as its values (its layout is not part of the
    # contract, docs/contracts.md: the captured layout was json.dumps(indent=2)'s)
    assert {k: v for k, v in got.items() if k.endswith(" table")} == {
        k: v for k, v in GOLDEN.items() if k.endswith(" table")
    }
    assert {k: as_values(v) for k, v in got.items() if k.endswith(" json")} == {
        k: as_values(v) for k, v in GOLDEN.items() if k.endswith(" json")
    }


def as_values(captured: str) -> tuple[str, object]:
    """A captured JSON output: its exit line, and the values its text holds."""
    exit_line, _, text = captured.partition("\n")
    return exit_line, json.loads(text) if text.strip() else text
