"""Adversarial review of onboarding (issue 34): a note whose metadata block sits in a wrapper
the readers do not find must be said, per document, by ``vocabulary check`` (exit 2) and by
``check`` (a finding on the document), even when other notes of the vault are read: it was
read as nothing, registered ``unknown`` and served beside its successor, and both said "ok"
/ "no findings"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from connectors.vocabulary.blocks import locate

CONFIG = """
[table]
url = "sqlite:///reconciler.db"

[index]
path = "qdrant"
collection = "h"

[[sources]]
name = "hb"
type = "vault"
path = "vault"
trigger = "polling"
ttl = "24h"

[sources.options]
readers = ["frontmatter", "headers"]

[sources.options.fields]
id = "id"
family = "family"
version = "version"
status = "status"
superseded_by = "superseded_by"
"""

#: Each old note's block where the readers do not find it (an HTML comment), its successor's
#: at the top.
NOTES = {
    "a1": "---\nid: a1\nfamily: a\nversion: 1\nstatus: superseded\nsuperseded_by: a2\n---\nOld A.\n",
    "a2": "---\nid: a2\nfamily: a\nversion: 2\nstatus: current\n---\nNew A.\n",
    "b1": "<!--\nid: b1\nfamily: b\nversion: 1\nstatus: superseded\nsuperseded_by: b2\n-->\n"
    "Old B.\n",
    "b2": "---\nid: b2\nfamily: b\nversion: 2\nstatus: current\n---\nNew B.\n",
    "c1": "---\nid: c1\nfamily: c\nversion: 1\nstatus: superseded\nsuperseded_by: c2\n---\nOld C.\n",
    "c2": "---\nid: c2\nfamily: c\nversion: 2\nstatus: current\n---\nNew C.\n",
}


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [str(Path(sys.executable).parent / "reconciler"), "--config", str(root / "reconciler.toml"), *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    (tmp_path / "vault").mkdir()
    (tmp_path / "reconciler.toml").write_text(CONFIG, encoding="utf-8")
    for name, text in NOTES.items():
        (tmp_path / "vault" / f"{name}.md").write_text(text, encoding="utf-8")
    return tmp_path


def test_vocabulary_check_names_a_document_whose_block_was_not_read(vault: Path) -> None:
    # the old note b1 writes every key, and no reader took them: it would be served
    (vault / "vault" / "b1.md").write_text(
        "# Old policy B\n\nSome words.\n\n<div>\nid: b1\nstatus: superseded\n"
        "superseded_by: b2\n</div>\nOld B.\n",
        encoding="utf-8",
    )
    done = _cli(vault, "--format", "json", "vocabulary", "check")
    data = json.loads(done.stdout)
    assert done.returncode == 2, data
    assert "b1.md" in done.stdout


def test_a_yaml_block_in_an_html_comment_is_read() -> None:
    found = locate(NOTES["b1"], wanted=frozenset({"status"}))
    assert found is not None
    assert "status: superseded" in found.block
    assert found.body.strip() == "Old B."


def test_a_yaml_block_after_a_title_is_read() -> None:
    text = "# Policy C\n\n---\nid: c1\nstatus: superseded\nsuperseded_by: c2\n---\nOld C.\n"
    found = locate(text, wanted=frozenset({"status"}))
    assert found is not None
    assert "superseded_by: c2" in found.block
    assert "---" not in found.body


def test_a_yaml_block_between_dashes_in_an_html_comment_is_read() -> None:
    text = "<!--\n---\nid: b1\nstatus: superseded\nsuperseded_by: b2\n---\n-->\nOld B.\n"
    found = locate(text, wanted=frozenset({"status"}))
    assert found is not None
    assert found.block == "id: b1\nstatus: superseded\nsuperseded_by: b2\n"
    assert found.body.strip() == "Old B."


def test_a_horizontal_rule_is_no_block() -> None:
    text = "# Notes\n\nIntro.\n\n---\n\nStatus: this paragraph is prose.\n\n---\nMore.\n"
    assert locate(text, wanted=frozenset({"status"})) is None


#: The default vault: front matter only, no ``fields`` mapping (the project's own key names).
DEFAULT_CONFIG = CONFIG.split("[sources.options]", maxsplit=1)[0]


@pytest.mark.parametrize(
    "wrapped",
    [
        "<!--\n---\nid: b1\nfamily: b\nversion: 1\nstatus: superseded\nsuperseded_by: b2\n---\n-->\n",
        "# Old policy B\n\n---\nid: b1\nfamily: b\nversion: 1\nstatus: superseded\n---\n",
    ],
    ids=["in-an-html-comment", "below-a-title"],
)
def test_the_default_vault_names_a_note_whose_front_matter_is_not_at_the_top(
    tmp_path: Path, wrapped: str
) -> None:
    """With the default configuration (front matter only, nothing mapped) a note whose front
    matter sits in a wrapper or below its title was read as saying nothing, registered
    ``unknown`` and served beside its successor, and ``vocabulary check`` said ok: the
    project's own key names are looked for in such a note, as a mapped field's are."""
    (tmp_path / "vault").mkdir()
    (tmp_path / "reconciler.toml").write_text(DEFAULT_CONFIG, encoding="utf-8")
    notes = {**NOTES, "b1": wrapped + "Old B.\n", "d1": "# A note with none\n\nJust words.\n"}
    for name, text in notes.items():
        (tmp_path / "vault" / f"{name}.md").write_text(text, encoding="utf-8")
    done = _cli(tmp_path, "--format", "json", "vocabulary", "check")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "b1.md" in done.stdout
    assert "d1.md" not in done.stdout  # (a note that writes no key says nothing: not named)
    assert "front" in done.stdout.lower()  # (the cause: the frontmatter reader, at the top)
