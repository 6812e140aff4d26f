"""``reconciler vocabulary check`` (a dry read) and ``ingest``'s refusal on a fresh deployment
whose configuration reads nothing of a field it maps (issue 34).

The documents are real PEPs of ``examples/peps/head`` with their header block wrapped in
``<pre>``, as a wiki export writes them. The natural first configuration (the PEP preset's
fields under the default frontmatter reader) reads nothing: ``vocabulary check`` says which
field, where the key is written and why it was not read, exits 2 and writes nothing;
``ingest`` refuses with nothing registered, unless ``--accept-unread``. The preset itself
reads every field, and ``ingest`` goes on.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment
from click.testing import CliRunner
from test_acceptance_vocabulary import PEPS, preset
from test_acceptance_wrapped_headers import mediawiki

from bench.peps import PepLabels
from reconciler.cli import cli

COUNT = 12
EXAMPLES = PEPS.parent


def wiki_peps(into: Path) -> dict[str, str]:
    """``COUNT`` PEPs in ``<pre>`` blocks; path -> status, read by a regex of this file."""
    statuses = {}
    for index, path in enumerate(sorted((PEPS / "head").glob("peps/pep-0[0-9]*.rst"))[:COUNT]):
        text = mediawiki(path.read_text(encoding="utf-8"), index + 1)
        target = into / "peps" / f"{path.stem}.wiki"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        found = re.search(r"^ *Status: *(.+?) *$", text, re.MULTILINE)
        assert found is not None
        statuses[f"peps/{path.stem}.wiki"] = found.group(1)
    return statuses


def configure(deploy: Deployment, *, readers: str | None) -> None:
    preset(deploy, "peps", connector="vault", documents="vault")
    text = deploy.config.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^include = .*$", 'include = ["peps/*.wiki"]', text)
    text = re.sub(r"(?m)^exclude = .*$", "", text)
    if readers is None:
        text = re.sub(r"(?m)^readers = .*$", "", text)  # the default: frontmatter
    deploy.config.write_text(text, encoding="utf-8")


def stores_untouched(deploy: Deployment) -> bool:
    return not (deploy.root / "reconciler.db").exists() and not (deploy.root / "qdrant").exists()


@pytest.fixture
def wiki(deploy: Deployment) -> dict[str, str]:
    return wiki_peps(deploy.vault)


def test_a_config_that_reads_nothing_is_named_before_anything_is_written(
    deploy: Deployment, wiki: dict[str, str]
) -> None:
    configure(deploy, readers=None)
    code, data = deploy.json("vocabulary", "check", "--sample", "2")
    assert code == 2
    assert data["ok"] is False
    (report,) = data["sources"]
    assert report["documents"] == COUNT
    assert report["states"]["unknown"] == COUNT
    assert report["mostly_unknown"] is True
    assert {"id", "status", "title", "effective_from", "doc_class"} <= set(report["unread"])
    fields = {f["field"]: f for f in report["fields"]}
    assert fields["status"]["missing"] == COUNT
    status = next(u for u in report["unread_keys"] if u["field"] == "status")["message"]
    assert "frontmatter reader" in status
    assert re.search(r"line \d+ writes 'Status: \w+'", status)
    assert len(report["sample"]) == 2
    assert stores_untouched(deploy)
    text = deploy.cli("vocabulary", "check")
    assert text.exit_code == 2
    assert "READ FROM NO DOCUMENT" in text.output


def test_the_preset_reads_every_field_and_the_states_the_headers_give(
    deploy: Deployment, wiki: dict[str, str]
) -> None:
    configure(deploy, readers="headers")
    code, data = deploy.json("vocabulary", "check", "--sample", "3")
    assert code == 0, data
    (report,) = data["sources"]
    assert report["unread"] == []
    assert report["unread_keys"] == []
    fields = {f["field"]: f for f in report["fields"]}
    for name in ("id", "status", "title", "effective_from"):
        assert fields[name]["found"] == COUNT, fields[name]
    sampled: dict[str, Any] = {s["path"]: s for s in report["sample"]}
    assert len(sampled) == 3
    for path, shown in sampled.items():
        assert shown["read"]["status"] == {"headers": wiki[path]}
    never = sum(1 for s in wiki.values() if s in {"Draft", "Deferred"})
    assert report["states"]["draft"] == never
    assert stores_untouched(deploy)


def test_ingest_on_a_fresh_deployment_refuses_what_reads_nothing(
    deploy: Deployment, wiki: dict[str, str]
) -> None:
    configure(deploy, readers=None)
    assert deploy.cli("init").exit_code == 0
    code, refused = deploy.json("ingest")
    assert code == 2
    assert refused["error"] == "vocabulary_unread"
    assert refused["exit_code"] == 2
    assert "fields.status" in refused["message"]
    assert "--accept-unread" in refused["message"]
    assert deploy.rows() == {}
    code, _data = deploy.json("ingest", "--accept-unread")
    assert code == 0
    assert len(deploy.rows()) == COUNT
    # no longer fresh: the same config ingests without the flag (nothing new to register)
    code, again = deploy.json("ingest")
    assert code == 0, again


def test_ingest_with_the_preset_is_not_refused(deploy: Deployment, wiki: dict[str, str]) -> None:
    configure(deploy, readers="headers")
    deploy.init_ingest()
    served = deploy.served()
    labels = PepLabels.of(PEPS / "head")
    assert served <= labels.served | {f"peps:pep-{n:04d}" for n in labels.status}
    assert len(deploy.rows()) == COUNT


@pytest.mark.parametrize("preset_name", ["peps", "kep", "adr"])
def test_the_shipped_presets_read_every_field_they_map(preset_name: str) -> None:
    """The refusal must never fire on the examples as shipped; the dry read writes nothing."""
    folder = EXAMPLES / preset_name
    before = sorted(p.name for p in folder.iterdir())
    result = CliRunner().invoke(
        cli,
        ["--config", str(folder / "reconciler.toml"), "--format", "json", "vocabulary", "check"],
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)["sources"]
    assert report["unread"] == []
    assert report["states"]["unknown"] == 0
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_note_the_source_refuses_is_named_in_the_table_output(deploy: Deployment) -> None:
    """A note whose front matter does not parse is not taken (vault.md, "What a bad note
    costs"): the dry read must say so and where, or a person counting documents before the
    first ingestion sees one fewer and nothing about it. Before, only ``--format json``
    carried it (a bare count under ``problems``); the table said nothing."""
    (deploy.vault / "good.md").write_text("---\nstatus: current\n---\nbody\n", encoding="utf-8")
    (deploy.vault / "broken.md").write_text(
        "---\nstatus: current\ntitle: [unclosed\n---\nbody\n", encoding="utf-8"
    )
    (deploy.vault / "dangling.md").write_text(
        "---\nstatus: superseded\nsuperseded_by: nowhere\n---\nbody\n", encoding="utf-8"
    )
    code, data = deploy.json("vocabulary", "check")
    (report,) = data["sources"]
    assert report["documents"] == 2
    assert report["problems"]["invalid_frontmatter"] == 1
    first = {(p["kind"], p["path"]) for p in report["problems_first"]}
    assert ("invalid_frontmatter", "broken.md") in first
    assert ("dangling_superseded_by", "dangling.md") in first
    text = deploy.cli("vocabulary", "check")
    assert text.exit_code == code
    assert "broken.md" in text.output
    assert "invalid_frontmatter" in text.output
    assert "dangling.md" in text.output
    assert stores_untouched(deploy)


def test_a_yaml_key_in_another_case_is_named_not_read_as_nothing(deploy: Deployment) -> None:
    """YAML keys are exact (mapping.md, `fields`), so front matter writing `superseded-by:`
    under a mapping of `Superseded-By` gives no link. Before, nothing said so: the link field
    is reported only where documents write its key, and the key was looked for in its mapped
    case only, so `vocabulary check` said "ok" (exit 0) while every link was dropped. With no
    mapping at all, a note writing `Status:` was registered `unknown` (and served) silently."""
    mapping = '[sources.options.fields]\nstatus = "status"\nsuperseded_by = "Superseded-By"\n'
    deploy.configure(source_extra=mapping)
    (deploy.vault / "new.md").write_text("---\nstatus: current\n---\nnew\n", encoding="utf-8")
    for name in ("a", "b"):
        (deploy.vault / f"{name}.md").write_text(
            f"---\nstatus: superseded\nsuperseded-by: new\n---\n{name}\n", encoding="utf-8"
        )
    code, data = deploy.json("vocabulary", "check")
    assert code == 2
    (report,) = data["sources"]
    assert report["unread"] == ["superseded_by"]
    (unread,) = report["unread_keys"]
    assert "'superseded-by'" in unread["message"]
    assert stores_untouched(deploy)


def test_a_note_writing_a_default_key_in_another_case_is_named(deploy: Deployment) -> None:
    for name in ("a", "b", "c"):
        (deploy.vault / f"{name}.md").write_text("---\nstatus: current\n---\nx\n", "utf-8")
    (deploy.vault / "d.md").write_text("---\nStatus: superseded\n---\nx\n", encoding="utf-8")
    code, data = deploy.json("vocabulary", "check")
    assert code == 2
    (report,) = data["sources"]
    assert report["states"]["unknown"] == 1
    (missed,) = report["key_not_read"]["first"]
    assert (missed["path"], missed["field"]) == ("d.md", "status")
    assert "'Status'" in missed["message"]


def test_a_config_with_no_source_says_it_read_nothing(tmp_path: Path) -> None:
    """An adopted collection (docs/adopting.md) has no `[[sources]]` yet: the dry read has
    nothing to read, and said "ok", as if a configuration had been checked and found sound."""
    config = tmp_path / "reconciler.toml"
    config.write_text(
        '[table]\nurl = "sqlite:///reconciler.db"\n[index]\npath = "qdrant"\n', "utf-8"
    )
    result = CliRunner().invoke(cli, ["--config", str(config), "vocabulary", "check"])
    assert result.exit_code == 0
    assert "no source" in result.output
    assert result.output.strip() != "ok"
    assert not (tmp_path / "reconciler.db").exists()
