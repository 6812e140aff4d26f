"""``reconciler declare FILE`` on a file nobody vouches for, through the CLI on SQLite and Qdrant
local mode: the reviewed file ``suggest -o`` wrote, then damaged as the attacks on it did (an
alias bomb in ``evidence``, a decision given twice, wrong types, a binary file, a deep nesting,
one document accepted into two families, a look-alike id). Each is exit 1 with every problem
listed (by line where the file has one), no traceback, and nothing written anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from acceptance_kit import Deployment, body, day

#: name: (title, text, days from today to its effective_from, or None)
NOTES = {
    "expenses-2024": ("Expenses policy 2024", "Claim within 30 days. Receipts over 20.", -400),
    "expenses": ("Expenses policy", "Claim within 60 days. Receipts over 25.", -30),
    "vpn-old": ("VPN setup (old)", "Install the client. Use the old gateway host.", None),
    "vpn": ("VPN setup", "Install the client. Use the new gateway host.", None),
}


def suggested(deploy: Deployment, tmp_path: Path) -> tuple[Path, str]:
    """A deployment of four notes and the proposals file ``suggest -o`` writes for it."""
    for name, (title, text, start) in NOTES.items():
        when = None if start is None else day(start)
        deploy.note(name, body(title, text), effective_from=when)
    deploy.init_ingest()
    path = tmp_path / "proposals.yaml"
    for args in (("run",), ("suggest", "-o", str(path))):
        assert deploy.cli(*args).exit_code == 0, args
    return path, path.read_text(encoding="utf-8")


def tables(deploy: Deployment) -> dict[str, Any]:
    return {k: v for k, v in deploy.dump().items() if k != "leases"}


def refused(deploy: Deployment, path: Path, *expected: str) -> str:
    """``declare path`` refuses with every ``expected`` fragment, and writes nothing."""
    before = tables(deploy)
    result = deploy.cli("declare", str(path))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    for fragment in expected:
        assert fragment in result.output, (fragment, result.output)
    assert tables(deploy) == before
    return result.output


def test_a_damaged_reviewed_file_is_refused_whole_with_every_problem_by_line(
    deploy: Deployment, tmp_path: Path
) -> None:
    path, text = suggested(deploy, tmp_path)
    lines = text.splitlines()

    def line(fragment: str, after: int = 0) -> int:
        return next(n + 1 for n, t in enumerate(lines) if fragment in t and n >= after)

    accepted = text.replace("decision: undecided", "decision: accept")
    # an alias bomb in the evidence: refused as it is read, never expanded
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
        for a, b in zip("abcdefgh", "bcdefghi", strict=False)
    )
    path.write_text(accepted + "laughs:\n" + "".join(f"  {t}\n" for t in bomb.splitlines()))
    refused(deploy, path, "aliases are refused", f"line {len(lines) + 2}: the anchor &a")
    # a decision given twice: not the last one silently
    first = line("decision: undecided")
    twice = [*lines[:first], "  decision: accept", *lines[first:]]
    path.write_text("\n".join(twice).replace("decision: undecided", "decision: reject", 1) + "\n")
    refused(deploy, path, f"line {first + 1}: the key 'decision' a second time in one mapping")
    # wrong types, each listed with its line
    path.write_text(
        accepted.replace(
            f"min_score: {yaml.safe_load(text)['min_score']}", "min_score: abc"
        ).replace("documents: 4", "documents: [1, 2]")
    )
    refused(
        deploy,
        path,
        f"line {line('min_score')}: min_score: Input should be a valid number",
        f"line {line('documents')}: documents: Input should be a valid integer",
    )
    # not text, or too deep to be a proposals file
    path.write_bytes(text.encode() + b"\x00\x01\xff")
    refused(deploy, path, "a NUL byte", "a binary file, not text")
    path.write_bytes(text.encode().replace(b"documents: 4", b"documents: \xff"))
    refused(deploy, path, f"line {line('documents')}: not UTF-8 text (byte 0xff")
    path.write_text(accepted + "deep: " + "[" * 20_000 + "]" * 20_000 + "\n")
    refused(deploy, path, "exceeded maximum nesting depth")


def test_one_document_in_two_families_in_one_file_refuses_the_whole_file(
    deploy: Deployment, tmp_path: Path
) -> None:
    path, text = suggested(deploy, tmp_path)
    data = yaml.safe_load(text)
    families = [p for p in data["proposals"] if p["kind"] == "family"]
    assert len(families) == 2
    for p in families:
        p["decision"] = "accept"
    families[1]["members"].append("hb:expenses")  # also in the first family
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    output = refused(deploy, path, "hb:expenses is declared into two or more families at once")
    assert families[0]["id"] in output
    assert families[1]["id"] in output


def test_a_look_alike_id_is_flagged_with_the_real_id_and_the_character(
    deploy: Deployment, tmp_path: Path
) -> None:
    path, text = suggested(deploy, tmp_path)
    data = yaml.safe_load(text)
    link = next(p for p in data["proposals"] if p["older"] == "hb:expenses-2024")
    link |= {"decision": "accept", "older": "hb:exp\u0435nses-2024"}  # a Cyrillic e
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    refused(
        deploy,
        path,
        "no document 'hb:exp\\u0435nses-2024' in the table",
        "it looks like 'hb:expenses-2024', which the table holds",
        "U+0435 CYRILLIC SMALL LETTER IE at position 6",
    )
    link["older"] = "hb:expenses\u200b-2024"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    refused(deploy, path, "U+200B ZERO WIDTH SPACE at position 11 (invisible)")
