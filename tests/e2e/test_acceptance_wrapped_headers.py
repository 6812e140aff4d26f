"""Acceptance of issue 34: header blocks where real corpora put them.

The real PEPs of ``examples/peps/head`` rewritten into two shapes other corpora use, their
text otherwise unchanged:

- a mediawiki export: the header block inside ``<pre>``…``</pre>``, each line indented by two
  spaces, and in every fifth page a notice above it (``{{Archived}}``);
- a markdown page: a title line, then the block in a fenced block indented by two spaces.

The wiki export is read through the vault and the git connector.

The PEP preset is run on them as shipped (only ``include`` names the new files) through the
CLI: ``init``, ``ingest``, ``run``. What ``default_filter()`` then serves is what the headers
say: the statuses are read back from the rewritten files by a regular expression of this file
and must equal the original headers (``bench/peps.py``'s line reader), whose served set is the
labels. On today's main every document of both shapes read as ``unknown`` and was served.
"""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from acceptance_kit import Deployment
from git_kit import Repo
from test_acceptance_vocabulary import PEPS, cycle, preset

from bench.peps import PepLabels

#: A header line of a rewritten file, whatever wraps it: the test's own reader.
_STATUS = re.compile(r"^[ \t]*Status:[ \t]*(?P<status>.+?)[ \t]*$", re.MULTILINE)
_NUMBER = re.compile(r"^[ \t]*PEP:[ \t]*(?P<number>[0-9]+)[ \t]*$", re.MULTILINE)


def _split(text: str) -> tuple[list[str], str]:
    head, _, body = text.partition("\n\n")
    return head.split("\n"), body


def mediawiki(text: str, index: int) -> str:
    lines, body = _split(text)
    notice = "{{Archived}}\nThis page was migrated from the old wiki.\n\n" if index % 5 == 0 else ""
    block = "\n".join(f"  {line}" for line in lines)
    return f"{notice}<pre>\n{block}\n</pre>\n\n{body}"


def fenced(text: str, index: int) -> str:
    lines, body = _split(text)
    block = "\n".join(f"  {line}" for line in lines)
    return f"# PEP page {index}\n\n  ```text\n{block}\n  ```\n\n{body}"


SHAPES = {"mediawiki": (mediawiki, ".wiki"), "fenced": (fenced, ".md")}


def rewrite(into: Path, shape: str) -> dict[int, str]:
    """The fixture's PEPs rewritten into ``shape`` under ``into``; their statuses as the
    test's regex reads them back."""
    wrap, suffix = SHAPES[shape]
    statuses: dict[int, str] = {}
    sources = sorted((PEPS / "head").glob("peps/pep-*.rst"))
    for index, path in enumerate(sources):
        if path.name == "pep-0000.rst":
            continue
        text = wrap(path.read_text(encoding="utf-8"), index)
        target = into / "peps" / f"{path.stem}{suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        number, status = _NUMBER.search(text), _STATUS.search(text)
        assert number is not None, path
        assert status is not None, path
        statuses[int(number.group("number"))] = status.group("status")
    return statuses


@pytest.mark.parametrize("deploy", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("shape", "connector"), [("mediawiki", "vault"), ("fenced", "vault"), ("mediawiki", "git")]
)
def test_wrapped_header_blocks_serve_what_their_headers_say(
    deploy: Deployment, shape: str, connector: str, tmp_path: Path
) -> None:
    documents = tmp_path / "wrapped"
    statuses = rewrite(documents, shape)
    labels = PepLabels.of(PEPS / "head")
    assert statuses == dict(labels.status)  # the rewriting kept every header
    if connector == "git":
        Repo(tmp_path / "repo").commit_tree(
            documents, "a wiki export", when=datetime(2026, 8, 22, tzinfo=UTC)
        )
        documents = tmp_path / "repo"
    preset(deploy, "peps", connector=connector, documents=str(documents))
    suffix = SHAPES[shape][1]
    text = deploy.config.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^include = .*$", f'include = ["peps/pep-*{suffix}"]', text)
    deploy.config.write_text(text, encoding="utf-8")
    cycle(deploy, "init", "ingest", "run")
    assert deploy.served() == labels.served
    code, check = deploy.json("check")
    assert code in {0, 2}
    assert not [f for f in check["findings"] if f["kind"] in {"source_problem", "all_unknown"}]
    shutil.rmtree(documents)
