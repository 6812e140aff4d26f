"""The markdown / Obsidian vault connector: the contract, then one test per way a note breaks."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors import vault as vault_module
from connectors.base import DocumentUnreadable, SourceUnavailable
from connectors.testing import SystemOfRecordContract
from connectors.vault import VaultSource
from reconciler.model import ProblemKind, SourceDocument, SourceSnapshot, VersionState


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def note(body: str = "Body.", **fields: str) -> str:
    if not fields:
        return body
    lines = [f"{key}: {value}" for key, value in fields.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + body + "\n"


def scan(root: Path, name: str = "kb") -> SourceSnapshot:
    return VaultSource(name, root).scan()


def doc(snapshot: SourceSnapshot, key: str) -> SourceDocument:
    matches = [d for d in snapshot.documents if d.source_key == key]
    assert len(matches) == 1, [d.source_key for d in snapshot.documents]
    return matches[0]


def kinds(snapshot: SourceSnapshot) -> list[ProblemKind]:
    return [problem.kind for problem in snapshot.problems]


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


class TestVaultContract(SystemOfRecordContract):
    @pytest.fixture
    def source(self, tmp_path: Path) -> VaultSource:
        root = tmp_path / "handbook"
        write(
            root,
            "policies/leave-v1.md",
            note(
                "Old leave rules.",
                family="leave",
                version="1",
                status="superseded",
                superseded_by="policies/leave-v2",
            ),
        )
        write(
            root,
            "policies/leave-v2.md",
            note(
                "New leave rules.",
                family="leave",
                version="2",
                status="current",
                effective_from="2024-01-01",
            ),
        )
        write(root, "Onboarding.md", "# Onboarding\n\nNo frontmatter at all.\n")
        write(root, "archive/Expenses.md", note("Expenses.", id="EXP-1", status="retired"))
        write(root, ".obsidian/workspace.md", "not a note")
        return VaultSource("handbook", root)

    @pytest.fixture
    def unavailable_source(self, tmp_path: Path) -> VaultSource:
        return VaultSource("handbook", tmp_path / "not-mounted")


# -- well-formed notes ---------------------------------------------------------------------


def test_every_field_is_read(vault: Path) -> None:
    write(
        vault,
        "a.md",
        note(
            "Text.",
            id="A-1",
            family="pay",
            version="3",
            status="current",
            effective_from="2024-03-01T09:30:00+02:00",
            effective_to="2025-01-01T00:00:00Z",
            title="Pay policy",
            doc_class="policy",
        ),
    )
    got = doc(scan(vault), "A-1")
    assert got == SourceDocument(
        source="kb",
        source_key="A-1",
        doc_id="kb:A-1",
        content_hash=sha("Text."),
        path="a.md",
        family="pay",
        version=3,
        state=VersionState.CURRENT,
        effective_from=datetime(2024, 3, 1, 7, 30, tzinfo=UTC),
        effective_to=datetime(2025, 1, 1, tzinfo=UTC),
        title="Pay policy",
        doc_class="policy",
    )


def test_note_without_frontmatter_is_a_document_with_no_fields(vault: Path) -> None:
    write(vault, "plain.md", "# Title\n\nJust text.\n")
    snapshot = scan(vault)
    assert snapshot.problems == ()
    got = doc(snapshot, "plain")
    assert (got.family, got.version, got.state, got.superseded_by) == (None, None, None, None)
    assert got.content_hash == sha("# Title\n\nJust text.")


def test_id_defaults_to_the_relative_posix_path_without_suffix(vault: Path) -> None:
    write(vault, "teams/hr/Leave Policy.md", "x")
    got = doc(scan(vault), "teams/hr/Leave Policy")
    assert got.doc_id == "kb:teams/hr/Leave Policy"
    assert got.path == "teams/hr/Leave Policy.md"


def test_hidden_folders_and_other_files_are_skipped_and_order_is_sorted(vault: Path) -> None:
    for rel in ("b.md", "a/z.md", "a.md", "A.md"):
        write(vault, rel, "x")
    for rel in (
        ".obsidian/app.md",
        ".git/x.md",
        ".trash/old.md",
        "sub/.hidden.md",
        "img.png",
        "notes.txt",
        "README.MD",
    ):
        write(vault, rel, "x")
    snapshot = scan(vault)
    assert [d.path for d in snapshot.documents] == ["A.md", "a.md", "a/z.md", "b.md"]
    assert snapshot.problems == ()


def test_empty_vault_is_an_empty_snapshot(vault: Path) -> None:
    snapshot = scan(vault)
    assert (snapshot.source, snapshot.documents, snapshot.problems) == ("kb", (), ())


def test_scanned_at_comes_from_the_clock(vault: Path) -> None:
    instant = datetime(2024, 5, 1, tzinfo=UTC)
    assert VaultSource("kb", vault, clock=lambda: instant).scan().scanned_at == instant


# -- YAML 1.1 surprises, handled deliberately ---------------------------------------------


def test_leading_zero_id_stays_a_string(vault: Path) -> None:
    write(vault, "a.md", note(id="0123"))
    assert doc(scan(vault), "0123").doc_id == "kb:0123"


def test_norway_family_stays_a_string(vault: Path) -> None:
    write(vault, "a.md", note(family="no"))
    assert doc(scan(vault), "a").family == "no"


def test_boolean_looking_status_is_an_invalid_field_and_the_note_is_kept(vault: Path) -> None:
    write(vault, "a.md", note(status="yes", family="f"))
    snapshot = scan(vault)
    got = doc(snapshot, "a")
    assert (got.state, got.family) == (None, "f")
    [problem] = snapshot.problems
    assert (problem.kind, problem.doc_id, problem.path) == (
        ProblemKind.INVALID_FIELD,
        "kb:a",
        "a.md",
    )
    assert "status" in problem.message


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("current", VersionState.CURRENT),
        ("superseded", VersionState.SUPERSEDED),
        ("draft", VersionState.DRAFT),
        ("retired", VersionState.RETIRED),
        ("pending", VersionState.PENDING),
        ("unknown", VersionState.UNKNOWN),
        ("Current", VersionState.CURRENT),
    ],
)
def test_every_status_is_accepted(vault: Path, status: str, state: VersionState) -> None:
    write(vault, "a.md", note(status=status))
    assert doc(scan(vault), "a").state == state


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01", datetime(2024, 1, 1, tzinfo=UTC)),
        ("2024-01-01T10:00:00", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01 10:00:00", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T10:00:00Z", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T10:00:00-05:00", datetime(2024, 1, 1, 15, tzinfo=UTC)),
        ("'2024-01-01T01:00:00+02:00'", datetime(2023, 12, 31, 23, tzinfo=UTC)),
    ],
)
def test_dates_are_utc_instants(vault: Path, text: str, expected: datetime) -> None:
    write(vault, "a.md", note(effective_from=text, effective_to=text))
    got = doc(scan(vault), "a")
    assert got.effective_from == expected
    assert got.effective_to == expected
    assert got.effective_from is not None
    assert got.effective_from.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text", ["tomorrow", "2024-13-01", "2024", "1", "9999-12-31T23:00:00-05:00"]
)
def test_bad_dates_are_invalid_fields(vault: Path, text: str) -> None:
    write(vault, "a.md", note(effective_from=text))
    snapshot = scan(vault)
    assert doc(snapshot, "a").effective_from is None
    assert kinds(snapshot) == [ProblemKind.INVALID_FIELD]


@pytest.mark.parametrize(("text", "expected"), [("0", 0), ("7", 7), ("007", 7), ("'12'", 12)])
def test_version_is_a_non_negative_integer(vault: Path, text: str, expected: int) -> None:
    write(vault, "a.md", note(version=text))
    assert doc(scan(vault), "a").version == expected


@pytest.mark.parametrize("text", ["-1", "1.5", "v2", "1_000", "0x1F", "'²'", "[1]", "{a: 1}"])
def test_bad_versions_are_invalid_fields(vault: Path, text: str) -> None:
    write(vault, "a.md", note(version=text))
    snapshot = scan(vault)
    assert doc(snapshot, "a").version is None
    assert kinds(snapshot) == [ProblemKind.INVALID_FIELD]


def test_plain_null_spellings_are_absent_but_quoted_null_is_text(vault: Path) -> None:
    write(vault, "a.md", note(family="~", title="null", doc_class="", version="Null"))
    write(vault, "b.md", note(family="'null'"))
    snapshot = scan(vault)
    got = doc(snapshot, "a")
    assert (got.family, got.title, got.doc_class, got.version) == (None, None, None, None)
    assert doc(snapshot, "b").family == "null"
    assert snapshot.problems == ()


def test_every_bad_field_is_reported_at_once(vault: Path) -> None:
    write(vault, "a.md", note(status="yes", version="x", effective_to="never", title="[a, b]"))
    snapshot = scan(vault)
    assert kinds(snapshot) == [ProblemKind.INVALID_FIELD] * 4
    assert len(snapshot.documents) == 1


# -- notes that cannot be taken at all -----------------------------------------------------


def test_bom_is_accepted_and_does_not_change_the_hash(vault: Path) -> None:
    text = note("Same body.", id="x1", status="current")
    write(vault, "bom.md", b"\xef\xbb\xbf" + text.encode("utf-8"))
    snapshot = scan(vault)
    assert snapshot.problems == ()
    got = doc(snapshot, "x1")
    assert got.state == VersionState.CURRENT
    assert got.content_hash == sha("Same body.")


def test_crlf_line_endings_do_not_change_the_hash(vault: Path) -> None:
    text = note("Line one.\nLine two.", status="current")
    write(vault, "lf.md", text)
    write(vault, "crlf.md", text.replace("\n", "\r\n"))
    snapshot = scan(vault)
    assert doc(snapshot, "lf").content_hash == doc(snapshot, "crlf").content_hash
    assert doc(snapshot, "crlf").state == VersionState.CURRENT


def test_undecodable_note_is_a_problem_not_a_document(vault: Path) -> None:
    write(vault, "latin1.md", "---\ntitle: caf\xe9\n---\n".encode("latin-1"))
    write(vault, "ok.md", "fine")
    snapshot = scan(vault)
    assert [d.source_key for d in snapshot.documents] == ["ok"]
    [problem] = snapshot.problems
    assert (problem.kind, problem.path, problem.doc_id) == (
        ProblemKind.UNDECODABLE,
        "latin1.md",
        None,
    )


def test_undecodable_file_name_is_a_problem(vault: Path) -> None:
    name = os.fsencode(vault) + b"/caf\xe9.md"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    snapshot = scan(vault)
    assert snapshot.documents == ()
    assert kinds(snapshot) == [ProblemKind.UNDECODABLE]


def test_unreadable_note_is_a_problem(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(vault, "locked.md", note(id="L"))
    write(vault, "ok.md", "fine")
    real = vault_module._read_bytes

    def read(path: Path) -> bytes:
        if path.name == "locked.md":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(vault_module, "_read_bytes", read)
    snapshot = scan(vault)
    assert [d.source_key for d in snapshot.documents] == ["ok"]
    [problem] = snapshot.problems
    assert (problem.kind, problem.path) == (ProblemKind.UNREADABLE, "locked.md")
    assert "Permission denied" in problem.message


@pytest.mark.parametrize(
    "front",
    [
        "title: [unclosed\n",
        "title: a\n  bad: indent\n",
        "status: current\nstatus: retired\n",
        'key: "unterminated\n',
    ],
)
def test_invalid_yaml_is_invalid_frontmatter(vault: Path, front: str) -> None:
    write(vault, "bad.md", f"---\n{front}---\nBody\n")
    snapshot = scan(vault)
    assert snapshot.documents == ()
    [problem] = snapshot.problems
    assert (problem.kind, problem.path) == (ProblemKind.INVALID_FRONTMATTER, "bad.md")


def test_unclosed_frontmatter_is_invalid_frontmatter(vault: Path) -> None:
    write(vault, "open.md", "---\nstatus: current\nBody without a closing line\n")
    assert kinds(scan(vault)) == [ProblemKind.INVALID_FRONTMATTER]


@pytest.mark.parametrize("front", ["- a\n- b\n", "just a sentence\n", "'quoted'\n"])
def test_frontmatter_that_is_not_a_mapping(vault: Path, front: str) -> None:
    write(vault, "odd.md", f"---\n{front}---\nBody\n")
    snapshot = scan(vault)
    assert snapshot.documents == ()
    assert kinds(snapshot) == [ProblemKind.FRONTMATTER_NOT_MAPPING]


def test_empty_frontmatter_is_a_document_with_no_fields(vault: Path) -> None:
    write(vault, "e.md", "---\n---\nBody\n")
    snapshot = scan(vault)
    assert snapshot.problems == ()
    assert doc(snapshot, "e").content_hash == sha("Body")


def test_id_that_is_not_a_string_refuses_the_note(vault: Path) -> None:
    write(vault, "a.md", note(id="[x, y]"))
    snapshot = scan(vault)
    assert snapshot.documents == ()
    assert kinds(snapshot) == [ProblemKind.INVALID_FIELD]


def test_duplicate_ids_refuse_every_claimant_naming_all_of_them(vault: Path) -> None:
    """No file displaces another: a copy sorting first must not take over the registered
    document (which keeps its state while the problem stands)."""
    write(vault, "b.md", note("second", id="same"))
    write(vault, "a.md", note("first", id="same"))
    write(vault, "same.md", "third, by its default id")
    write(vault, "other.md", note("unrelated", id="other"))
    snapshot = scan(vault)
    assert [d.path for d in snapshot.documents] == ["other.md"]
    assert kinds(snapshot) == [ProblemKind.DUPLICATE_ID] * 3
    assert {p.path for p in snapshot.problems} == {"a.md", "b.md", "same.md"}
    assert {p.doc_id for p in snapshot.problems} == {"kb:same"}
    assert all("a.md, b.md, same.md" in p.message for p in snapshot.problems)


# -- superseded_by -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pointer",
    [
        "new-id",
        "kb:new-id",
        "folder/New Note",
        "folder/New Note.md",
        "./folder/New Note.md",
        "'[[New Note]]'",
        "'[[New Note|the new one]]'",
        "'[[New Note#Scope]]'",
        "'[[folder/New Note]]'",
        "'[[folder/New Note.md]]'",
        "[[New Note]]",
        "[[New Note|alias]]",
        "['[[New Note]]']",
        "'[[new-id]]'",
    ],
)
def test_superseded_by_resolves_ids_paths_and_wikilinks(vault: Path, pointer: str) -> None:
    write(vault, "folder/New Note.md", note("new", id="new-id", status="current"))
    write(vault, "old.md", note("old", status="superseded", superseded_by=pointer))
    snapshot = scan(vault)
    assert snapshot.problems == ()
    assert doc(snapshot, "old").superseded_by == "kb:new-id"


def test_dangling_superseded_by_keeps_the_document(vault: Path) -> None:
    write(vault, "old.md", note("old", status="superseded", superseded_by="'[[Nowhere]]'"))
    snapshot = scan(vault)
    got = doc(snapshot, "old")
    assert (got.superseded_by, got.state) == (None, VersionState.SUPERSEDED)
    [problem] = snapshot.problems
    assert (problem.kind, problem.doc_id) == (ProblemKind.DANGLING_SUPERSEDED_BY, "kb:old")


def test_ambiguous_wikilink_is_dangling(vault: Path) -> None:
    write(vault, "a/Policy.md", "a")
    write(vault, "b/Policy.md", "b")
    write(vault, "old.md", note("old", superseded_by="'[[Policy]]'"))
    snapshot = scan(vault)
    assert doc(snapshot, "old").superseded_by is None
    [problem] = snapshot.problems
    assert problem.kind == ProblemKind.DANGLING_SUPERSEDED_BY
    assert "ambiguous" in problem.message


def test_pointer_to_a_refused_note_is_dangling(vault: Path) -> None:
    write(vault, "broken.md", "---\n- a list\n---\n")
    write(vault, "old.md", note("old", superseded_by="broken"))
    snapshot = scan(vault)
    assert doc(snapshot, "old").superseded_by is None
    assert kinds(snapshot) == [
        ProblemKind.FRONTMATTER_NOT_MAPPING,
        ProblemKind.DANGLING_SUPERSEDED_BY,
    ]


def test_self_supersession_is_dropped(vault: Path) -> None:
    write(vault, "a.md", note(id="A", superseded_by="'[[a]]'"))
    snapshot = scan(vault)
    assert doc(snapshot, "A").superseded_by is None
    assert kinds(snapshot) == [ProblemKind.SELF_SUPERSESSION]


@pytest.mark.parametrize("length", [2, 3, 5])
def test_cycles_of_any_length_are_reported_for_each_member(vault: Path, length: int) -> None:
    for i in range(length):
        write(vault, f"n{i}.md", note(f"n{i}", superseded_by=f"n{(i + 1) % length}"))
    write(vault, "tail.md", note("tail", superseded_by="n0"))
    snapshot = scan(vault)
    assert kinds(snapshot) == [ProblemKind.SUPERSESSION_CYCLE] * length
    assert {p.doc_id for p in snapshot.problems} == {f"kb:n{i}" for i in range(length)}
    assert all(doc(snapshot, f"n{i}").superseded_by is None for i in range(length))
    assert doc(snapshot, "tail").superseded_by == "kb:n0"
    assert len(snapshot.documents) == length + 1


@pytest.mark.parametrize("pointer", ["{to: b}", "''", "'[[]]'"])
def test_odd_superseded_by_values(vault: Path, pointer: str) -> None:
    # A list naming several notes is read as several links (tests/unit/test_vocabulary.py).
    write(vault, "b.md", "b")
    write(vault, "a.md", note(superseded_by=pointer))
    snapshot = scan(vault)
    assert doc(snapshot, "a").superseded_by is None
    assert set(kinds(snapshot)) <= {ProblemKind.INVALID_FIELD}


# -- symlinks ------------------------------------------------------------------------------


def test_symlinked_note_outside_the_root_is_refused(tmp_path: Path, vault: Path) -> None:
    secret = write(tmp_path / "elsewhere", "secret.md", note("secret", id="S"))
    (vault / "linked.md").symlink_to(secret)
    snapshot = scan(vault)
    assert snapshot.documents == ()
    [problem] = snapshot.problems
    assert (problem.kind, problem.path) == (ProblemKind.LINK_OUTSIDE_ROOT, "linked.md")


def test_symlinked_folder_outside_the_root_is_refused(tmp_path: Path, vault: Path) -> None:
    write(tmp_path / "elsewhere", "a.md", "a")
    (vault / "shared").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    snapshot = scan(vault)
    assert snapshot.documents == ()
    assert kinds(snapshot) == [ProblemKind.LINK_OUTSIDE_ROOT]


def test_symlinks_inside_the_root_are_not_counted_twice(vault: Path) -> None:
    write(vault, "real/a.md", "a")
    (vault / "alias").symlink_to(vault / "real", target_is_directory=True)
    (vault / "b.md").symlink_to(vault / "real" / "a.md")
    snapshot = scan(vault)
    assert [d.path for d in snapshot.documents] == ["real/a.md"]
    assert snapshot.problems == ()


def test_vault_root_reached_through_a_symlink_is_fine(tmp_path: Path, vault: Path) -> None:
    write(vault, "a.md", "a")
    (tmp_path / "current").symlink_to(vault, target_is_directory=True)
    snapshot = scan(tmp_path / "current")
    assert [d.path for d in snapshot.documents] == ["a.md"]
    assert snapshot.problems == ()


# -- the vault itself ----------------------------------------------------------------------


def test_missing_vault_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="does not exist"):
        scan(tmp_path / "nope")


def test_vault_that_is_a_file_is_unavailable(tmp_path: Path) -> None:
    write(tmp_path, "file.md", "x")
    with pytest.raises(SourceUnavailable, match="not a directory"):
        scan(tmp_path / "file.md")


def test_unlistable_vault_is_unavailable(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: object) -> object:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(SourceUnavailable, match="Permission denied"):
        scan(vault)


# -- hashes and bodies ---------------------------------------------------------------------


def test_frontmatter_only_edit_keeps_the_hash(vault: Path) -> None:
    write(vault, "a.md", note("The body.\n\nSecond paragraph.", status="current", version="1"))
    before = doc(scan(vault), "a").content_hash
    write(
        vault,
        "a.md",
        note(
            "The body.\n\nSecond paragraph.",
            status="superseded",
            version="1",
            superseded_by="b",
            title="Renamed",
        ),
    )
    write(vault, "b.md", "b")
    assert doc(scan(vault), "a").content_hash == before


def test_trailing_whitespace_is_not_an_edit_but_text_is(vault: Path) -> None:
    write(vault, "a.md", note("The body.", status="current"))
    before = doc(scan(vault), "a").content_hash
    write(vault, "a.md", note("The body.\n\n\n", status="current"))
    assert doc(scan(vault), "a").content_hash == before
    write(vault, "a.md", note("The body, edited.", status="current"))
    assert doc(scan(vault), "a").content_hash != before


def test_read_body_returns_the_hashed_text(vault: Path) -> None:
    write(vault, "a.md", note("# Heading\n\nText.", id="A", status="current"))
    source = VaultSource("kb", vault)
    got = doc(source.scan(), "A")
    body = source.read_body("A")
    assert body == "# Heading\n\nText."
    assert sha(body) == got.content_hash


def test_read_body_finds_a_note_created_or_moved_since_the_scan(vault: Path) -> None:
    write(vault, "a.md", note("A", id="A"))
    source = VaultSource("kb", vault)
    source.scan()
    (vault / "a.md").rename(vault / "moved.md")
    write(vault, "new.md", "new")
    assert source.read_body("A") == "A"
    assert source.read_body("new") == "new"


def test_read_body_of_a_refused_or_vanished_note_raises(vault: Path) -> None:
    write(vault, "bad.md", "---\n- list\n---\n")
    write(vault, "gone.md", "gone")
    source = VaultSource("kb", vault)
    source.scan()
    (vault / "gone.md").unlink()
    for key in ("bad", "gone"):
        with pytest.raises(DocumentUnreadable):
            source.read_body(key)


# -- the scan never crashes ----------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(
            lambda t: ("---\n" + t + "\n---\nbody").encode("utf-8", "replace")
        ),
    )
)
def test_any_bytes_give_a_document_or_a_problem(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    write(root, "n.md", data)
    snapshot = scan(root)
    assert len(snapshot.documents) + len(snapshot.problems) >= 1
    assert all(p.kind in ProblemKind for p in snapshot.problems)


def test_offset_datetimes_are_converted_not_relabelled(vault: Path) -> None:
    write(vault, "a.md", note(effective_from="2024-06-30T23:30:00-01:00"))
    got = doc(scan(vault), "a").effective_from
    assert got == datetime(2024, 7, 1, 0, 30, tzinfo=UTC)
