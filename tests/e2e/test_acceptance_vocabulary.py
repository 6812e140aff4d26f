"""Acceptance of issue 22: real systems of record read by configuration alone.

The presets shipped in ``examples/`` (their config files as they are, only the table's URL and
the source's place rewritten) reconcile real documents through the CLI: ``init``, ``ingest``,
``run``. What ``default_filter()`` then serves is compared with what the documents' own
headers say, read here by a plain line reader of this file (never by the code under test):

- PEPs (``examples/peps``): a PEP is served when its ``Status`` is Final, Active, Accepted or
  Provisional and no PEP that comes into force (anything but Draft, Deferred, Withdrawn,
  Rejected) succeeds it, by its own ``Superseded-By`` or by the other's ``Replaces``;
  through the vault connector on SQLite and the git connector on PostgreSQL, right from the
  ingestion alone; across history and at every instant (the repository at the end of 2015,
  2020 and today) in ``test_peps_replay.py``;
- KEPs (``examples/kep``): each ``README.md`` with its sidecar ``kep.yaml`` (read here with
  ``yaml.safe_load``): served when its ``status`` is implementable or implemented and no KEP
  in force names it in ``replaces`` or is named by its ``superseded-by``;
- ADRs (``examples/adr``): the ``## Status`` section of each record (read here line by
  line): served when it says ``Accepted`` and no record in force supersedes it, by its own
  ``Superseded by [N. ...]`` or the other's ``Supersedes [M. ...]``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from acceptance_kit import Deployment, writes_zero
from git_kit import Repo

from bench.peps import INSTANTS, NEVER_IN_FORCE, PepLabels, pep_headers
from reconciler import default_filter
from reconciler.model import VersionState

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PEPS = EXAMPLES / "peps"
KEPS = EXAMPLES / "kep" / "docs"
ADRS = EXAMPLES / "adr" / "docs"


# -- labels, from the headers alone (bench/peps.py reads them, with a plain line reader) ------


def test_the_pep_fixture_is_large_enough_and_closed_under_its_links() -> None:
    labels = PepLabels.of(PEPS / "head")
    assert len(labels.status) >= 60
    for number, found in ((n, pep_headers(p)) for n, p in _pep_files(PEPS / "head")):
        for key in ("Superseded-By", "Replaces"):
            named = [int(n) for n in re.findall(r"[0-9]+", found.get(key, ""))]
            assert set(named) <= set(labels.status), (number, key, named)
    assert {"Final", "Active", "Superseded", "Withdrawn", "Rejected", "Draft"} <= set(
        labels.status.values()
    )
    assert 0 < len(labels.served) < len(labels.status)


def _pep_files(folder: Path) -> list[tuple[int, Path]]:
    return [
        (int(pep_headers(p)["PEP"]), p)
        for p in sorted(folder.glob("**/pep-*"))
        if pep_headers(p).get("PEP", "").isdigit()
    ]


# -- deployments of a preset ---------------------------------------------------------------


def preset(
    deploy: Deployment, name: str, *, connector: str, documents: str, guard: float = 0.2
) -> None:
    """Write ``examples/<name>/reconciler.toml`` into the deployment as shipped, with its own
    table URL, the source's type and path rewritten, and the guard's fraction."""
    text = (EXAMPLES / name / "reconciler.toml").read_text(encoding="utf-8")
    text = re.sub(r'(?m)^url = "sqlite:///reconciler.db"$', f'url = "{deploy.table_url}"', text)
    text = re.sub(r'(?m)^type = "vault"$', f'type = "{connector}"', text, count=1)
    text = re.sub(r'(?m)^path = "(?!qdrant)[^"]*"$', f'path = "{documents}"', text, count=1)
    text += f"\n[guard]\nmax_changed_fraction = {guard}\n"
    deploy.config.write_text(text, encoding="utf-8")


def cycle(deploy: Deployment, *commands: str) -> None:
    for command in commands:
        result = deploy.cli(command)
        assert result.exit_code in {0, 2}, (command, result.output)


def superseded_by(deploy: Deployment) -> dict[str, str | None]:
    return {doc_id: row["superseded_by"] for doc_id, row in deploy.rows().items()}


# -- PEPs ----------------------------------------------------------------------------------


#: Each connector on one table engine: the connector and the engine are independent axes
#: (the table contract runs every engine), so their cross product is not run.
@pytest.mark.parametrize(
    ("connector", "deploy"), [("vault", "sqlite"), ("git", "postgresql")], indirect=["deploy"]
)
def test_peps_by_configuration_alone_serve_what_their_headers_say(
    deploy: Deployment, connector: str, tmp_path: Path
) -> None:
    if connector == "vault":
        shutil.copytree(PEPS / "head", tmp_path / "peps-checkout")
    else:
        Repo(tmp_path / "peps-checkout").commit_tree(
            PEPS / "head", "today's PEPs", when=datetime(2026, 8, 22, tzinfo=UTC)
        )
    preset(deploy, "peps", connector=connector, documents="peps-checkout")
    cycle(deploy, "init", "ingest")
    labels = PepLabels.of(PEPS / "head")
    # what the ingestion alone wrote is already what the headers say: a check finds nothing
    # to repair but the headers' own contradictions
    code, first = deploy.json("check")
    assert only_source_contradictions(code, first)
    assert deploy.served() == labels.served
    cycle(deploy, "run")

    assert deploy.served() == labels.served
    # families that branch and merge (563 -> 649, 749; 397, 486 -> 773; 102 -> 101, older)
    served, rows = deploy.served(), deploy.rows()
    assert {"peps:pep-0649", "peps:pep-0749"} <= served  # the branches of 563, both in force
    assert rows["peps:pep-0563"]["superseded_by"] == "peps:pep-0649"  # the earlier to start
    if connector == "vault":  # (git declares each file's commit count as its version)
        # ordinals follow the time order: 345 (2005) before its successor 566 (2017)
        assert rows["peps:pep-0345"]["doc_version"] < rows["peps:pep-0566"]["doc_version"]
    # a successor older than its predecessor: 101 stays in force, 102 never was
    assert "peps:pep-0101" in served
    assert rows["peps:pep-0102"]["effective_to"] == rows["peps:pep-0102"]["effective_from"]
    links = superseded_by(deploy)
    assert len(links) == len(labels.status)
    for number, status in labels.status.items():
        if status != "Superseded":
            continue
        named = {f"peps:pep-{n:04d}" for n in labels.successors[number]}
        assert links[f"peps:pep-{number:04d}"] in (named or {None}), number
    # the run left nothing to repair: a second run writes nothing
    code, second = deploy.json("run")
    assert code in {0, 2}
    assert set(second["writes"].values()) == {0}


def historical(deploy: Deployment, instant: datetime) -> set[str]:
    """doc ids ``default_filter(as_of=instant, include_historical=True)`` returns."""
    found = deploy.points(default_filter(instant, include_historical=True))
    return {p["doc_id"] for p in found.payloads.values()}


#: What the PEPs' own headers contradict (Final beside a Superseded-By in force, a successor
#: older than its predecessor): reported on every check, never repaired
#: (``tests/e2e/test_contradictions_e2e.py`` names each one from the headers).
SOURCE_CONTRADICTIONS = {("family", "status_contradicts_link"), ("family", "successor_predates")}


def only_source_contradictions(code: int, data: Mapping[str, Any]) -> bool:
    """A check with nothing to repair: no write planned, no finding but the source's own
    contradictions (which make it exit 2)."""
    found = {(f["check"], f["kind"]) for f in data["findings"]}
    return code == 2 and found == SOURCE_CONTRADICTIONS and writes_zero(data)


def assert_in_force_in_time(deploy: Deployment, labels: PepLabels) -> None:
    """At each PEP's creation date and at ``INSTANTS``, the historical route admits exactly
    what the headers say was in force then (a PEP whose status never puts it in force is on
    that route as published, and is left out of both sides)."""
    never = {f"peps:pep-{n:04d}" for n, s in labels.status.items() if s in NEVER_IN_FORCE}
    instants = sorted({*INSTANTS, *(c for c in labels.created.values() if c is not None)})
    wrong = {
        t.date().isoformat(): (sorted(got - want), sorted(want - got))
        for t in instants
        if (got := historical(deploy, t) - never) != (want := set(labels.in_force_at(t)) - never)
    }
    assert not wrong, dict(list(wrong.items())[:5])


# -- KEPs: a sidecar file per document -------------------------------------------------------


def kep_labels(root: Path) -> tuple[dict[str, str], frozenset[str]]:
    """(doc id -> status, the served doc ids) from the kep.yaml files alone."""
    keps: dict[str, dict[str, object]] = {}
    for sidecar in sorted(root.glob("keps/**/kep.yaml")):
        folder = sidecar.parent.relative_to(root).as_posix()
        keps[folder] = yaml.safe_load(sidecar.read_text(encoding="utf-8"))

    def named(value: object) -> list[str]:
        items = value if isinstance(value, list) else [value] if value else []
        return [str(item).strip("/") for item in items if str(item).strip("/") in keps]

    successors: dict[str, set[str]] = {folder: set() for folder in keps}
    for folder, meta in keps.items():
        successors[folder].update(named(meta.get("superseded-by")))
        for old in named(meta.get("replaces")):
            successors[old].add(folder)
    status = {folder: str(meta.get("status")) for folder, meta in keps.items()}
    in_force = {"implementable", "implemented"}
    never = {"provisional", "deferred", "rejected", "withdrawn"}
    served = frozenset(
        f"keps:{folder}/README"
        for folder in keps
        if status[folder] in in_force
        and not any(status[s] not in never for s in successors[folder])
    )
    return {f"keps:{folder}/README": s for folder, s in status.items()}, served


@pytest.mark.parametrize("connector", ["vault", "git"])
def test_keps_read_from_their_sidecar_files(
    deploy: Deployment, connector: str, tmp_path: Path
) -> None:
    if connector == "vault":
        shutil.copytree(KEPS, tmp_path / "enhancements")
    else:
        Repo(tmp_path / "enhancements").commit_tree(
            KEPS, "the KEPs", when=datetime(2026, 7, 24, tzinfo=UTC)
        )
    preset(deploy, "kep", connector=connector, documents="enhancements")
    cycle(deploy, "init", "ingest", "run")
    status, served = kep_labels(KEPS)
    assert set(deploy.rows()) == set(status)
    assert deploy.served() == served
    assert "keps:keps/sig-cli/2377-Kustomize/README" not in served  # superseded-by, not status
    links = superseded_by(deploy)
    assert links["keps:keps/sig-auth/3130-kms-observability/README"] == (
        "keps:keps/sig-auth/3299-kms-v2-improvements/README"  # only the newer one says so
    )


# -- ADRs: lines of the body -----------------------------------------------------------------


def adr_labels(root: Path) -> tuple[dict[str, list[str]], frozenset[str]]:
    """(doc id -> the lines of its Status section, the served doc ids), read line by line."""
    sections: dict[int, list[str]] = {}
    for path in sorted(root.glob("doc/adr/[0-9]*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        start = lines.index("## Status") + 1
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("## "))
        sections[int(path.name[:4])] = [line for line in lines[start:end] if line.strip()]
    successors: dict[int, set[int]] = {n: set() for n in sections}
    for number, lines in sections.items():
        for line in lines:
            if line.startswith("Superseded by ["):
                successors[number].add(int(line.split("[", 1)[1].split(".", 1)[0]))
            if line.startswith("Supersedes ["):
                successors[int(line.split("[", 1)[1].split(".", 1)[0])].add(number)
    served = frozenset(
        f"adr:adr-{n:04d}"
        for n, lines in sections.items()
        if "Accepted" in lines and not successors[n]
    )
    return {f"adr:adr-{n:04d}": lines for n, lines in sections.items()}, served


@pytest.mark.parametrize("connector", ["vault", "git"])
def test_adrs_read_from_lines_of_their_body(
    deploy: Deployment, connector: str, tmp_path: Path
) -> None:
    adrs = None
    if connector == "vault":
        shutil.copytree(ADRS, tmp_path / "repo")
    else:
        adrs = Repo(tmp_path / "repo")
        adrs.commit_tree(ADRS, "the ADRs", when=datetime(2025, 4, 16, tzinfo=UTC))
    preset(deploy, "adr", connector=connector, documents="repo")
    cycle(deploy, "init", "ingest", "run")
    sections, served = adr_labels(ADRS)
    assert set(deploy.rows()) == set(sections)
    assert deploy.served() == served
    links = superseded_by(deploy)
    assert links["adr:adr-0007"] == "adr:adr-0008"
    # 0008's link to 0009 names a file renamed since: its text's number resolves it
    assert links["adr:adr-0008"] == "adr:adr-0009"
    code, report = deploy.json("check")
    assert code == 0, report["findings"]

    # superseding a decision is an edit of its status lines, not of its content
    record = tmp_path / "repo" / "doc" / "adr" / "0006-use-typer-for-cli.md"
    record.write_text(
        record.read_text(encoding="utf-8").replace(
            "Accepted", "Superseded by [9. Use Wireup for DI](0009-use-wireup-for-di-again.md)"
        ),
        encoding="utf-8",
    )
    if adrs is not None:
        adrs.commit("supersede 6")
    code, report = deploy.json("run")
    assert {(f["check"], f["kind"]) for f in report["findings"]} == {
        ("family", "successor_not_marked"),  # and no hash/in_place_edit
        # the new link joins 0006 to 0009's family (0006 moves, not the chain of three), where
        # it is served beside 0009 until this run supersedes it
        ("family", "membership_changed"),
        ("siblings", "live_siblings"),
    }
    assert "adr:adr-0006" not in deploy.served()
    rows = deploy.rows()
    assert rows["adr:adr-0006"]["doc_family_id"] == rows["adr:adr-0009"]["doc_family_id"]
    assert rows["adr:adr-0009"]["doc_family_id"] == "adr:adr-0007"  # the family kept its id
    code, report = deploy.json("check")
    assert code == 0, report["findings"]


def test_git_reads_sidecars_from_the_commit_and_never_through_a_symlink(tmp_path: Path) -> None:
    from connectors.git import GitSource  # noqa: PLC0415
    from connectors.vocabulary import VocabularyOptions  # noqa: PLC0415

    repo = Repo(tmp_path / "repo")
    (repo.root / "a").mkdir()
    (repo.root / "a" / "README.md").write_text("A\n", encoding="utf-8")
    (repo.root / "a" / "kep.yaml").write_text("status: replaced\n", encoding="utf-8")
    (repo.root / "b").mkdir()
    (repo.root / "b" / "README.md").write_text("B\n", encoding="utf-8")
    (repo.root / "b" / "kep.yaml").symlink_to("../a/kep.yaml")
    repo.commit("two KEPs")
    vocabulary = VocabularyOptions.model_validate(
        {
            "include": ["*/README.md"],
            "readers": ["sidecar"],
            "sidecar": "{dir}/kep.yaml",
            "status_map": {"replaced": "superseded"},
        }
    ).vocabulary(("**/*.md",))
    snapshot = GitSource("k", repo.root, vocabulary=vocabulary).scan()
    assert [(d.source_key, d.state) for d in snapshot.documents] == [
        ("a/README", VersionState.SUPERSEDED)
    ]
    [problem] = snapshot.problems
    assert problem.path == "b/README.md"
    assert "sidecar b/kep.yaml is a symbolic link" in problem.message
