"""The documentation stands alone and says what the code does: every link resolves inside the
repository, and docs/contracts.md names what the code defines as the contracts."""

from __future__ import annotations

import re
from pathlib import Path

from acceptance_kit import FINDING_KEYS, REPORT_EXTRAS, REPORT_KEYS, WRITE_KEYS

from reconciler import cli
from reconciler.checks import CHECKS
from reconciler.model import IDENTITY_KEYS, MANAGED_KEYS, MANAGED_QUARANTINE_REASONS, VersionState

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CONTRACTS = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")


def test_every_link_resolves_inside_the_repository() -> None:
    broken = []
    for doc in DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
        text = re.sub(r"`[^`\n]+`", "", text)  # a link shown as code is not a link
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path = (doc.parent / target).resolve()
            if not path.is_relative_to(ROOT) or not path.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []


def test_no_doc_points_outside_the_repository() -> None:
    for path in [*DOCS, *ROOT.glob("reconciler/**/*.py"), *ROOT.glob("connectors/**/*.py")]:
        text = path.read_text(encoding="utf-8")
        assert "DESIGN.md" not in text, path
        assert "../shared" not in text, path


def test_every_connector_has_a_page() -> None:
    pages = {p.stem for p in (ROOT / "docs" / "connectors").glob("*.md")}
    for name in ("vault", "git", "confluence", "sql"):
        assert name in pages
    assert "http-registry" in pages


def code_spans(text: str) -> set[str]:
    """Every `inline code` of a markdown text (fenced blocks left out)."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return set(re.findall(r"`([^`\n]+)`", text))


def test_contracts_name_the_states_keys_and_checks() -> None:
    spans = code_spans(CONTRACTS)
    assert {str(state) for state in VersionState} <= spans
    assert set(MANAGED_KEYS) | set(IDENTITY_KEYS) <= spans
    assert set(MANAGED_QUARANTINE_REASONS) <= spans
    assert set(CHECKS) <= spans


def test_contracts_name_every_key_of_the_runs_json() -> None:
    spans = code_spans(CONTRACTS)
    assert spans >= REPORT_KEYS | REPORT_EXTRAS | FINDING_KEYS
    writes = re.search(r"`writes` \| `(\{[^`]*\})`", CONTRACTS)
    assert writes, "no writes object"
    assert set(re.findall(r'"(\w+)"', writes.group(1))) == WRITE_KEYS | {"index"}


def test_contracts_list_the_exit_codes_the_cli_has() -> None:
    codes = {
        value
        for name, value in vars(cli).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }
    assert codes == {code for code, _meaning in cli.EXIT_CODES}  # --help prints EXIT_CODES
    table = CONTRACTS.split("## Exit codes", 1)[1]
    listed = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.MULTILINE)}
    assert listed == codes
