"""A source's own vocabulary (connectors/vocabulary/, connectors/linking.py): which files are
documents, header blocks, sidecar files, body lines, field mappings, status words, date
formats, id templates, forward and reverse links; and every mapping mistake as a config
problem or a per-document problem, never a stopped scan.

Pure parsing is tested on bytes; the rest through a real vault folder (VaultSource), which
the git connector shares (tests/e2e/test_acceptance_vocabulary.py runs both on real documents).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.base import ConnectorConfigError
from connectors.frontmatter import NoteRefused, content_hash
from connectors.testing import SystemOfRecordContract
from connectors.vault import VaultSource
from connectors.vocabulary import Vocabulary, VocabularyOptions
from reconciler.model import ProblemKind, SourceDocument, SourceSnapshot, VersionState

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PRESETS = {"peps": "head", "kep": "docs", "adr": "docs"}

PEP_OPTIONS: dict[str, Any] = {
    "include": ["peps/pep-*.rst"],
    "readers": ["headers"],
    "id_template": "pep-{:04d}",
    "date_formats": ["%d-%b-%Y"],
    "fields": {
        "id": "PEP",
        "title": "Title",
        "status": "Status",
        "superseded_by": "Superseded-By",
        "replaces": "Replaces",
        "effective_from": "Created",
    },
    "status_map": {
        "Final": "current",
        "Active": "current",
        "Superseded": "superseded",
        "Withdrawn": "retired",
        "Rejected": "retired",
    },
}


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def entry(options: dict[str, Any], path: str = "vault") -> SimpleNamespace:
    return SimpleNamespace(name="kb", type="vault", path=path, url=None, options=options)


def source(root: Path, options: dict[str, Any]) -> VaultSource:
    return VaultSource.from_settings(entry(options, str(root)))


def vocabulary(**options: Any) -> Vocabulary:
    return VocabularyOptions.model_validate(options).vocabulary(("**/*.md",))


def doc(snapshot: SourceSnapshot, key: str) -> SourceDocument:
    matches = [d for d in snapshot.documents if d.source_key == key]
    assert len(matches) == 1, [d.source_key for d in snapshot.documents]
    return matches[0]


def pep(number: int, status: str, created: str = "01-Jan-2001", **headers: str) -> str:
    lines = [f"PEP: {number}", f"Title: PEP {number}", f"Status: {status}", f"Created: {created}"]
    lines += [f"{key.replace('_', '-')}: {value}" for key, value in headers.items()]
    return "\n".join(lines) + f"\n\n\nAbstract\n========\n\nThe text of PEP {number}.\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    return folder


# -- which files are documents -------------------------------------------------------------


def test_include_and_exclude_globs_pick_any_text_extension(root: Path) -> None:
    write(root, "peps/pep-0001.rst", pep(1, "Active"))
    write(root, "peps/pep-0000.rst", pep(0, "Active"))
    write(root, "peps/conf.py", "print('not a document')")
    write(root, "README.md", "# not a PEP")
    snapshot = source(root, {**PEP_OPTIONS, "exclude": ["peps/pep-0000.rst"]}).scan()
    assert {d.source_key for d in snapshot.documents} == {"pep-0001"}
    assert doc(snapshot, "pep-0001").path == "peps/pep-0001.rst"


def test_without_options_a_vault_reads_markdown_frontmatter_as_always(root: Path) -> None:
    write(root, "a.md", "---\nstatus: current\n---\nBody.")
    write(root, "b.txt", "PEP: 2\nStatus: Final\n\nBody.")
    snapshot = VaultSource("kb", root).scan()
    assert {d.source_key for d in snapshot.documents} == {"a"}
    assert doc(snapshot, "a").state is VersionState.CURRENT


# -- the header block ----------------------------------------------------------------------


def test_headers_are_read_with_continuation_lines_and_repeated_keys() -> None:
    text = (
        "PEP: 12\nTitle: A long\n   title on two lines\nauthor: A\nAuthor: B\n"
        "STATUS:   Final\nCreated: 05-Jul-2001\n\nBody: not a header.\n"
    )
    vocab = vocabulary(
        readers=["headers"],
        fields={"id": "PEP", "title": "Title", "status": "status", "effective_from": "Created"},
        date_formats=["%d-%b-%Y"],
        id_template="pep-{:04d}",
        status_map={"Final": "current"},
    )
    note = vocab.read("pep-0012.rst", text.encode())
    assert note.key == "pep-0012"
    assert note.title == "A long title on two lines"
    assert note.state is VersionState.CURRENT
    assert note.effective_from is not None
    assert note.effective_from.isoformat().startswith("2001-07-05T00:00:00+00:00")
    assert note.body == "Body: not a header."
    repeated = vocabulary(readers=["headers"], fields={"title": "Author"}).read("x", text.encode())
    assert repeated.title is None
    assert ("title", "Author must be a single value, got ['A', 'B']; taken as absent") in (
        repeated.invalid
    )


def test_a_file_that_does_not_open_with_a_header_has_none() -> None:
    vocab = vocabulary(readers=["headers"], fields={"status": "Status"})
    for text in ["# Title\n\nStatus: Final\n", "From the desk of: me\n", "\nStatus: Final\n"]:
        note = vocab.read("x.md", text.encode())
        if text.startswith("From"):
            assert note.body == "From the desk of: me"  # never taken as a mbox "From " line
            continue
        assert note.state is None
        assert "Status: Final" in note.body


def test_metadata_edits_are_not_content_edits_in_any_reader() -> None:
    headers = vocabulary(
        readers=["headers"], fields={"status": "Status"}, status_map={"Final": "current"}
    )
    a = headers.read("x", b"Status: Draft\nTitle: T\n\nThe body.\n")
    b = headers.read("x", b"Status: Final\nTitle: T\n\nThe body.\n")
    assert a.state is VersionState.DRAFT
    assert b.state is VersionState.CURRENT
    assert content_hash(a.body) == content_hash(b.body)
    body = vocabulary(
        readers=["body"],
        body_patterns=[r"^Status: (?P<status>\w+)(?: by \[?ADR-(?P<superseded_by>\d+))?"],
    )
    c = body.read("adr/1.md", b"# 1. Use X\n\nStatus: Accepted\n\nWe use X.\n")
    d = body.read("adr/1.md", b"# 1. Use X\n\nStatus: Superseded by [ADR-3\n\nWe use X.\n")
    assert c.state is None  # 'Accepted' is no state word and there is no status_map
    assert c.invalid
    assert c.invalid[0][0] == "state"
    assert d.state is VersionState.SUPERSEDED
    assert [link.target for link in d.links] == ["3"]
    assert c.body == d.body == "# 1. Use X\n\nWe use X."


# -- sidecar files -------------------------------------------------------------------------


def test_a_sidecar_yaml_or_json_file_holds_the_metadata(root: Path) -> None:
    options = {
        "include": ["keps/**/README.md"],
        "readers": ["sidecar", "frontmatter"],
        "sidecar": "{dir}/kep.yaml",
        "fields": {"id": "kep-number", "status": "status", "superseded_by": "superseded-by"},
        "id_template": "kep-{}",
        "status_map": {"implemented": "current", "replaced": "superseded"},
    }
    write(root, "keps/sig-a/1-old/README.md", "---\nstatus: current\n---\n# Old\n")
    write(
        root,
        "keps/sig-a/1-old/kep.yaml",
        "kep-number: 1\nstatus: replaced\nsuperseded-by:\n  - keps/sig-a/2-new\n",
    )
    write(root, "keps/sig-a/2-new/README.md", "# New\n")
    write(root, "keps/sig-a/2-new/kep.yaml", '{"kep-number": 2, "status": "implemented"}')
    write(root, "keps/sig-a/3-bare/README.md", "# No sidecar\n")
    snapshot = source(root, options).scan()
    assert doc(snapshot, "kep-1").state is VersionState.SUPERSEDED  # the sidecar comes first
    assert doc(snapshot, "kep-1").superseded_by == "kb:kep-2"  # a folder holding one document
    assert doc(snapshot, "kep-2").state is VersionState.CURRENT
    assert doc(snapshot, "keps/sig-a/3-bare/README").state is None
    assert doc(snapshot, "kep-1").content_hash == content_hash("# Old")


def test_a_broken_sidecar_refuses_the_document_and_names_the_file(root: Path) -> None:
    options = {"readers": ["sidecar"], "sidecar": "{dir}/{stem}.meta.yaml"}
    write(root, "a.md", "A")
    write(root, "a.meta.yaml", "status: [unclosed\n")
    snapshot = source(root, options).scan()
    assert snapshot.documents == ()
    [problem] = snapshot.problems
    assert problem.kind is ProblemKind.INVALID_FRONTMATTER
    assert "sidecar a.meta.yaml is not valid YAML or JSON" in problem.message
    assert problem.path == "a.md"
    assert problem.source_key == "a"


# -- field mapping, precedence, status words, dates ----------------------------------------


def test_readers_combine_in_the_stated_precedence() -> None:
    text = b"---\nstatus: draft\ntitle: From YAML\n---\nStatus: Final\nTitle: From headers\n\nB"
    first = vocabulary(
        readers=["frontmatter", "headers"], fields={"status": "status", "title": "title"}
    ).read("x.md", text)
    assert (first.state, first.title) == (VersionState.DRAFT, "From YAML")
    flipped = vocabulary(
        readers=["headers", "frontmatter"],
        fields={"status": "status", "title": ["Heading", "title"]},
        status_map={"Final": "current"},
    ).read("x.md", text)
    assert (flipped.state, flipped.title) == (VersionState.CURRENT, "From headers")
    assert flipped.body == "B"


def test_status_words_map_and_the_declared_default_catches_the_rest() -> None:
    mapped = vocabulary(
        readers=["headers"], status_map={"Final": "current"}, fields={"status": "Status"}
    )
    assert mapped.read("x", b"Status: final\n\nB").state is VersionState.CURRENT  # any case
    assert mapped.read("x", b"Status: Superseded\n\nB").state is VersionState.SUPERSEDED
    unmapped = mapped.read("x", b"Status: April Fool!\n\nB")
    assert unmapped.state is None
    assert unmapped.invalid == [
        (
            "state",
            "Status 'April Fool!' has no entry in status_map and no status_default (known: "
            "current|superseded|pending|draft|retired|unknown|Final); taken as absent",
        )
    ]
    defaulted = vocabulary(
        readers=["headers"], fields={"status": "Status"}, status_default="unknown"
    )
    assert defaulted.read("x", b"Status: April Fool!\n\nB").state is VersionState.UNKNOWN


def test_dates_in_the_declared_formats_beside_iso_8601() -> None:
    vocab = vocabulary(
        readers=["headers"],
        fields={"effective_from": "Created", "effective_to": "Expires"},
        date_formats=["%d-%b-%Y", "%Y/%m/%d"],
    )
    note = vocab.read("x", b"Created: 05-Jul-2001\nExpires: 2030/01/31\n\nB")
    assert str(note.effective_from) == "2001-07-05 00:00:00+00:00"
    assert str(note.effective_to) == "2030-01-31 00:00:00+00:00"
    bad = vocab.read("x", b"Created: 5th of July\n\nB")
    assert bad.effective_from is None
    assert bad.invalid[0][0] == "effective_from"
    assert "'%d-%b-%Y', '%Y/%m/%d'" in bad.invalid[0][1]


def test_static_site_draft_and_expiry_keys() -> None:
    vocab = vocabulary(
        fields={"status": "draft", "effective_to": "expiryDate"},
        status_map={"true": "draft", "false": "current"},
    )
    note = vocab.read("post.md", b"---\ndraft: true\nexpiryDate: 2027-01-01\n---\nB")
    assert note.state is VersionState.DRAFT
    assert str(note.effective_to) == "2027-01-01 00:00:00+00:00"


def test_an_id_that_does_not_fit_the_template_refuses_the_document() -> None:
    vocab = vocabulary(readers=["headers"], fields={"id": "PEP"}, id_template="pep-{:04d}")
    with pytest.raises(NoteRefused, match="does not fit id_template"):
        vocab.read("x", b"PEP: eight\n\nB")


# -- links ---------------------------------------------------------------------------------


def test_forward_and_reverse_links_name_the_same_successors(root: Path) -> None:
    write(root, "peps/pep-0002.rst", pep(2, "Superseded", **{"Superseded_By": "3"}))
    write(root, "peps/pep-0003.rst", pep(3, "Final", Replaces="2, 4"))
    write(root, "peps/pep-0004.rst", pep(4, "Final"))  # only the newer one says so
    snapshot = source(root, PEP_OPTIONS).scan()
    assert doc(snapshot, "pep-0002").superseded_by == "kb:pep-0003"
    assert doc(snapshot, "pep-0004").superseded_by == "kb:pep-0003"
    assert doc(snapshot, "pep-0003").superseded_by is None
    assert snapshot.problems == ()


def test_every_successor_named_forward_or_reverse_is_one(root: Path) -> None:
    write(root, "peps/pep-0010.rst", pep(10, "Superseded", **{"Superseded_By": "11"}))
    write(root, "peps/pep-0011.rst", pep(11, "Final"))
    write(root, "peps/pep-0012.rst", pep(12, "Final", Replaces="10"))
    write(root, "peps/pep-0020.rst", pep(20, "Superseded", **{"Superseded_By": "21, 22"}))
    write(root, "peps/pep-0021.rst", pep(21, "Final", Replaces="20"))
    write(root, "peps/pep-0022.rst", pep(22, "Final"))
    write(root, "peps/pep-0030.rst", pep(30, "Withdrawn"))
    write(root, "peps/pep-0031.rst", pep(31, "Final", Replaces="30"))
    write(root, "peps/pep-0032.rst", pep(32, "Final", Replaces="30"))
    snapshot = source(root, PEP_OPTIONS).scan()
    # a fan-out, however it is spelt: forward first, in the order written, then reverse
    assert doc(snapshot, "pep-0010").successors == ("kb:pep-0011", "kb:pep-0012")
    assert doc(snapshot, "pep-0020").successors == ("kb:pep-0021", "kb:pep-0022")
    assert doc(snapshot, "pep-0030").successors == ("kb:pep-0031", "kb:pep-0032")
    assert doc(snapshot, "pep-0010").superseded_by == "kb:pep-0011"  # the first declared
    assert doc(snapshot, "pep-0011").successors == ()
    assert snapshot.problems == ()


def test_a_cycle_drops_the_links_inside_it_and_keeps_those_leaving_it(root: Path) -> None:
    write(root, "a.md", "---\nsuperseded_by: [b, d]\n---\nA")
    write(root, "b.md", "---\nsuperseded_by: c\n---\nB")
    write(root, "c.md", "---\nsuperseded_by: a\n---\nC")
    write(root, "d.md", "D")
    snapshot = VaultSource("kb", root).scan()
    assert doc(snapshot, "a").successors == ("kb:d",)
    assert doc(snapshot, "b").successors == doc(snapshot, "c").successors == ()
    cycles = sorted(p.doc_id for p in snapshot.problems)
    assert cycles == ["kb:a", "kb:b", "kb:c"]
    assert {p.kind for p in snapshot.problems} == {ProblemKind.SUPERSESSION_CYCLE}


def test_links_as_markdown_links_wikilinks_relative_paths_and_patterns(root: Path) -> None:
    options = {
        "include": ["docs/adr/*.md"],
        "readers": ["body"],
        "body_patterns": [
            r"^Superseded by (?P<superseded_by>.+)$",
            r"^Supersedes (?P<replaces>.+)$",
            r"^Replaced by (?P<superseded_by>ADR-\d+)$",
        ],
        "link_pattern": r"ADR-(?P<id>\d+)",
        "id_template": "docs/adr/{:04d}",
    }
    write(root, "docs/adr/0001.md", "# 1\n\nSuperseded by [2. Two](0002.md#context)\n")
    write(root, "docs/adr/0002.md", "# 2\n\nSupersedes [[0001]]\n")
    write(root, "docs/adr/0003.md", "# 3\n\nReplaced by ADR-4\n")
    write(root, "docs/adr/0004.md", "# 4\n\nSupersedes [link](https://example.com/0009.md)\n")
    write(root, "docs/adr/0005.md", "# 5\n\nSuperseded by ../adr/0006.md\n")
    write(root, "docs/adr/0006.md", "# 6\n\nSupersedes [[0003]]\n")
    snapshot = source(root, options).scan()
    # a markdown link (relative to the note, anchor dropped) and a wikilink agree
    assert doc(snapshot, "docs/adr/0001").superseded_by == "kb:docs/adr/0002"
    # a plain path relative to the note
    assert doc(snapshot, "docs/adr/0005").superseded_by == "kb:docs/adr/0006"
    # 0003 says ADR-4 (the link pattern, then the id template) replaces it; 0006 says it
    # replaces 0003: both are its successors (a fan-out)
    assert doc(snapshot, "docs/adr/0003").successors == ("kb:docs/adr/0004", "kb:docs/adr/0006")
    kinds = {(p.doc_id, p.kind) for p in snapshot.problems}
    # a link out of the source names no document
    assert kinds == {("kb:docs/adr/0004", ProblemKind.DANGLING_SUPERSEDED_BY)}


def test_a_multi_valued_yaml_list_names_several(root: Path) -> None:
    write(root, "a.md", "---\nsuperseded_by: [a, b]\n---\nA")
    write(root, "b.md", "B")
    snapshot = VaultSource("kb", root).scan()
    assert doc(snapshot, "a").superseded_by == "kb:b"
    assert doc(snapshot, "a").successors == ("kb:b",)
    assert [p.kind for p in snapshot.problems] == [ProblemKind.SELF_SUPERSESSION]


@st.composite
def histories(draw: st.DrawFn) -> tuple[int, dict[int, int], dict[int, str]]:
    """A random supersession graph (each version at most one successor, no cycle) and, for
    each link, how the source writes it: forward, reverse or both."""
    count = draw(st.integers(min_value=1, max_value=12))
    successors: dict[int, int] = {}
    for old in range(count):
        if draw(st.booleans()):
            newer = [n for n in range(old + 1, count)]
            if newer:
                successors[old] = draw(st.sampled_from(newer))
    spelling = {old: draw(st.sampled_from(["forward", "reverse", "both"])) for old in successors}
    return count, successors, spelling


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=histories())
def test_property_every_spelling_of_a_history_gives_the_same_successors(
    tmp_path_factory: pytest.TempPathFactory, history: tuple[int, dict[int, int], dict[int, str]]
) -> None:
    """Forward links, reverse links, or both, feed one resolution: whichever way each link is
    written, every version gets exactly the successor the history gives it, with no problem."""
    count, successors, spelling = history
    root = tmp_path_factory.mktemp("history")
    for number in range(count):
        headers: dict[str, str] = {}
        if number in successors and spelling[number] in {"forward", "both"}:
            headers["Superseded_By"] = str(successors[number])
        replaced = [
            str(old)
            for old, new in successors.items()
            if new == number and spelling[old] in {"reverse", "both"}
        ]
        if replaced:
            headers["Replaces"] = ", ".join(replaced)
        write(root, f"peps/pep-{number:04d}.rst", pep(number, "Final", **headers))
    snapshot = source(root, PEP_OPTIONS).scan()
    got = {d.source_key: d.superseded_by for d in snapshot.documents}
    assert got == {
        f"pep-{n:04d}": f"kb:pep-{successors[n]:04d}" if n in successors else None
        for n in range(count)
    }
    assert [p for p in snapshot.problems if p.kind is not ProblemKind.UNUSED_MAPPING] == []


# -- mapping mistakes ----------------------------------------------------------------------


def test_every_config_mistake_is_listed_at_load_at_once() -> None:
    bad = {
        "include": ["/etc/*.md", "ok/*.md"],
        "readers": ["headers", "html"],
        "body_patterns": ["^Status: (?P<state>\\w+)", "(unclosed"],
        "fields": {"colour": "Colour", "status": 3},
        "status_map": {"Final": "in-force"},
        "status_default": "live",
        "date_formats": ["Created", "%d-%b-%Y"],
        "id_template": "pep-{number}",
        "link_pattern": "(?P<name>x)",
        "sidecar": "../{dir}/meta.yaml",
    }
    problems = dict(VaultSource.config_problems(entry(bad)))
    assert set(problems) == {
        "options.include.0",
        "options.readers.1",
        "options.body_patterns.0",
        "options.body_patterns.1",
        "options.fields.colour",
        "options.fields.status",
        "options.status_map.Final",
        "options.status_default",
        "options.date_formats.0",
        "options.id_template",
        "options.link_pattern",
        "options.sidecar",
        "options.readers",  # sidecar set, but no sidecar reader
    }
    assert "group 'state' names no field" in problems["options.body_patterns.0"]
    assert "is not a field" in problems["options.fields.colour"]
    with pytest.raises(ConnectorConfigError, match=r"options\.status_default"):
        VaultSource.from_settings(entry(bad))


def test_readers_that_need_their_option_say_so() -> None:
    problems = dict(VaultSource.config_problems(entry({"readers": ["sidecar", "body"]})))
    assert "sidecar" in problems["options.sidecar"]
    assert "body_patterns" in problems["options.body_patterns"]


def test_a_mapped_key_that_no_document_holds_is_one_problem_of_the_source(root: Path) -> None:
    write(root, "peps/pep-0001.rst", pep(1, "Active"))
    options = {**PEP_OPTIONS, "fields": {**PEP_OPTIONS["fields"], "doc_class": "Typ"}}
    snapshot = source(root, options).scan()
    mistakes = [p for p in snapshot.problems if p.kind is ProblemKind.UNUSED_MAPPING]
    assert {p.field for p in mistakes} == {"doc_class"}  # links: a young corpus has none
    assert all(p.doc_id is None and p.path is None for p in mistakes)
    assert (
        "fields.doc_class = ['Typ']" in next(p for p in mistakes if p.field == "doc_class").message
    )
    assert doc(snapshot, "pep-0001").state is VersionState.CURRENT  # the scan goes on


def test_values_that_mean_none_are_no_value(root: Path) -> None:
    options = {
        "include": ["*/README.md"],
        "readers": ["sidecar"],
        "sidecar": "{dir}/meta.yaml",
        "empty_values": ["n/a", "TBD"],
    }
    write(root, "a/README.md", "A")
    write(root, "a/meta.yaml", "status: current\nsuperseded_by: [N/A]\nreplaces: tbd\n")
    snapshot = source(root, options).scan()
    assert doc(snapshot, "a/README").superseded_by is None
    assert snapshot.problems == ()
    without = source(root, {key: v for key, v in options.items() if key != "empty_values"})
    assert {p.kind for p in without.scan().problems} == {ProblemKind.DANGLING_SUPERSEDED_BY}


def test_a_markdown_link_to_a_renamed_file_resolves_by_its_text_only_with_a_pattern(
    root: Path,
) -> None:
    options: dict[str, Any] = {
        "include": ["adr/*.md"],
        "readers": ["body"],
        "body_patterns": [
            r"^# (?P<id>\d+)\. (?P<title>.+)$",
            r"^Superseded by (?P<superseded_by>.+)$",
        ],
        "id_template": "adr-{:04d}",
    }
    write(root, "adr/0001-a.md", "# 1. A\n\nSuperseded by [2. B](0002-b.md)\n\nText of A.\n")
    write(root, "adr/0002-b-renamed.md", "# 2. B\n\nText of B.\n")
    no_pattern = source(root, options).scan()
    assert doc(no_pattern, "adr-0001").superseded_by is None
    assert [p.kind for p in no_pattern.problems] == [ProblemKind.DANGLING_SUPERSEDED_BY]
    with_pattern = source(root, {**options, "link_pattern": r"^(?P<id>\d+)\."}).scan()
    assert doc(with_pattern, "adr-0001").superseded_by == "kb:adr-0002"
    # the title line stays in the content; the status line does not
    assert doc(with_pattern, "adr-0001").content_hash == content_hash("# 1. A\n\nText of A.")


def test_a_field_mapped_to_nothing_is_not_read_nor_reported(root: Path) -> None:
    write(root, "peps/pep-0001.rst", pep(1, "Active", Version="$Revision$"))
    read = source(root, PEP_OPTIONS).scan()
    assert doc(read, "pep-0001").version is None
    assert [p.field for p in read.problems if p.kind is ProblemKind.INVALID_FIELD] == ["version"]
    options = {**PEP_OPTIONS, "fields": {**PEP_OPTIONS["fields"], "version": []}}
    off = source(root, options).scan()
    assert [p.kind for p in off.problems if p.field == "version"] == []


# -- the presets keep the source contract --------------------------------------------------


@pytest.fixture(params=sorted(PRESETS))
def preset_source(request: pytest.FixtureRequest) -> VaultSource:
    """A vault over a preset's real documents, configured by its shipped reconciler.toml."""
    config = tomllib.loads((EXAMPLES / request.param / "reconciler.toml").read_text("utf-8"))
    [entry_] = config["sources"]
    folder = EXAMPLES / request.param / PRESETS[request.param]
    return VaultSource.from_settings(
        SimpleNamespace(name=entry_["name"], path=str(folder), url=None, options=entry_["options"])
    )


class TestPresetContract(SystemOfRecordContract):
    """Each preset, as shipped, is a system of record like any other."""

    @pytest.fixture
    def source(self, preset_source: VaultSource) -> VaultSource:
        return preset_source

    @pytest.fixture
    def unavailable_source(self, preset_source: VaultSource, tmp_path: Path) -> VaultSource:
        return VaultSource(
            preset_source.name, tmp_path / "gone", vocabulary=preset_source.vocabulary
        )


# -- what the review found -------------------------------------------------------------------


def test_a_yaml_string_is_one_link_a_header_value_is_a_list(root: Path) -> None:
    write(root, "a.md", '---\nsuperseded_by: "Policy, v2.md"\n---\nA')
    write(root, "Policy, v2.md", "B")
    snapshot = VaultSource("kb", root).scan()
    assert doc(snapshot, "a").superseded_by == "kb:Policy, v2"  # as before vocabularies
    assert snapshot.problems == ()


def test_adding_a_superseded_by_paragraph_is_no_content_edit() -> None:
    vocab = vocabulary(
        readers=["body"],
        body_patterns=[r"^(?P<status>Accepted)$", r"^Superseded by (?P<superseded_by>.+)$"],
    )
    before = "# 8. X\n\n## Status\n\nAccepted\n\n## Context\n\nText.\n"
    replaced = "# 8. X\n\n## Status\n\nSuperseded by [9. Y](0009-y.md)\n\n## Context\n\nText.\n"
    both = (
        "# 8. X\n\n## Status\n\nAccepted\n\nSuperseded by [9. Y](0009-y.md)\n\n## Context\n\n"
        "Text.\n"
    )
    bodies = {vocab.read("x.md", text.encode()).body for text in (before, replaced, both)}
    assert bodies == {"# 8. X\n\n## Status\n\n## Context\n\nText."}


def test_a_forward_link_to_a_refused_note_lets_no_reverse_link_decide(root: Path) -> None:
    write(root, "x.md", "---\nsuperseded_by: y\n---\nX")
    write(root, "y.md", "---\nreplaces: x\nstatus: [unclosed\n---\nY")
    write(root, "z.md", "---\nreplaces: x\n---\nZ")
    snapshot = VaultSource("kb", root).scan()
    assert doc(snapshot, "x").superseded_by is None
    conflict = next(p for p in snapshot.problems if p.kind is ProblemKind.CONFLICTING_LINKS)
    assert conflict.field == "superseded_by"  # the registered successor is kept
    assert conflict.doc_id == "kb:x"


def test_link_pattern_does_not_hide_the_link_as_written(root: Path) -> None:
    options = {"link_pattern": r"ADR-(?P<id>[0-9]+)"}
    write(root, "a.md", "---\nsuperseded_by: docs/ADR-12-foo.md\n---\nA")
    write(root, "docs/ADR-12-foo.md", "B")
    snapshot = source(root, options).scan()
    assert doc(snapshot, "a").superseded_by == "kb:docs/ADR-12-foo"


def test_empty_lists_and_offsets_in_dates_are_accepted_at_load() -> None:
    given = {
        "exclude": [],
        "body_patterns": [],
        "date_formats": ["%Y-%m-%d %H:%M %z"],
        "empty_values": [],
    }
    assert VaultSource.config_problems(entry(given)) == []
    note = vocabulary(
        readers=["headers"], fields={"effective_from": "Date"}, date_formats=["%Y-%m-%d %H:%M %z"]
    ).read("x", b"Date: 2026-01-02 10:00 +0200\n\nB")
    assert str(note.effective_from) == "2026-01-02 08:00:00+00:00"
    assert dict(VaultSource.config_problems(entry({"include": []}))) == {
        "options.include": "names no file: give at least one glob"
    }


def test_an_id_the_template_cannot_format_is_a_refused_document_not_a_crash(
    root: Path,
) -> None:
    options = {"fields": {"id": "num"}, "id_template": "x{:c}"}
    write(root, "a.md", "---\nnum: '99999999'\n---\nA")
    write(root, "b.md", "---\nnum: '66'\n---\nB")
    snapshot = source(root, options).scan()
    assert [d.source_key for d in snapshot.documents] == ["xB"]
    assert [p.kind for p in snapshot.problems] == [ProblemKind.INVALID_FIELD]


def test_status_words_that_differ_only_in_case_must_agree() -> None:
    problems = dict(
        VaultSource.config_problems(entry({"status_map": {"Final": "current", "final": "draft"}}))
    )
    assert "differ only in case" in problems["options.status_map.final"]
    assert (
        VaultSource.config_problems(entry({"status_map": {"Final": "current", "FINAL": "current"}}))
        == []
    )


def test_a_sidecar_that_is_a_link_or_lies_behind_one_is_never_read(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    write(outside, "kep.yaml", "title: SECRET\nstatus: current\n")
    options = {"include": ["*/README.md"], "readers": ["sidecar"], "sidecar": "{dir}/kep.yaml"}
    write(root, "a/README.md", "A")
    (root / "a" / "kep.yaml").symlink_to(outside / "kep.yaml")
    write(root, "b/README.md", "B")
    (root / "b" / "meta").symlink_to(outside, target_is_directory=True)
    itself = {**options, "include": ["a/README.md"]}
    behind = {**options, "include": ["b/README.md"], "sidecar": "{dir}/meta/kep.yaml"}
    for chosen in (itself, behind):
        snapshot = source(root, chosen).scan()
        assert snapshot.documents == ()
        [problem] = [p for p in snapshot.problems if (p.path or "").endswith("README.md")]
        assert problem.kind is ProblemKind.LINK_OUTSIDE_ROOT
        assert "symbolic link or lies behind one" in problem.message


@pytest.mark.parametrize(("field", "kind"), [("id", "refused"), ("title", "invalid")])
def test_an_empty_list_is_no_single_value(root: Path, field: str, kind: str) -> None:
    write(root, "a.md", f"---\n{field}: []\nsuperseded_by: []\n---\nA")
    snapshot = VaultSource("kb", root).scan()
    if kind == "refused":  # as before vocabularies: an id must be a string
        assert snapshot.documents == ()
    else:
        assert doc(snapshot, "a").title is None
    assert [p.kind for p in snapshot.problems] == [ProblemKind.INVALID_FIELD]


def test_a_long_cycle_gives_findings_linear_in_its_length(root: Path) -> None:
    """Issue 24: a 1,000-note cycle once wrote every id into every member's message."""
    size = 1000
    for n in range(size):
        write(root, f"n{n}.md", f"---\nsuperseded_by: n{(n + 1) % size}\n---\nN{n}")
    snapshot = VaultSource("kb", root).scan()
    cycles = [p for p in snapshot.problems if p.kind is ProblemKind.SUPERSESSION_CYCLE]
    assert len(cycles) == size
    assert all(d.superseded_by is None for d in snapshot.documents)
    assert max(len(p.message) for p in cycles) < 120
    assert cycles[0].message == (
        "superseded_by forms a cycle of 1000 (n0 -> n1 -> n2 -> … -> n998 -> n999 -> n0); ignored"
    )
