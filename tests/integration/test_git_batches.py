"""The git connector reads blobs in batches (``connectors.git.bodies``): a scan a batch of
files at a time, ``read_body`` the document asked with the ones after it. What it returns must
be what reading them all at once (the scan, before) and each blob alone (``read_body``,
before) returned, whatever the batch sizes and the order documents are asked in."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from unittest import mock

import pytest
from git_kit import Repo
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from connectors.base import DocumentUnreadable
from connectors.git import GitSource, bodies
from connectors.git.command import Git
from connectors.vocabulary import Vocabulary
from reconciler.model import SourceSnapshot

T0 = datetime(2024, 1, 10, 9, 0, tzinfo=UTC)
VOCABULARY = Vocabulary(readers=("sidecar", "frontmatter"), sidecar="{dir}/{stem}.meta.yaml")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """Documents of every kind a scan meets: plain, with a sidecar, with a sidecar that is a
    symlink, refused, two files with the same blob, a superseded pair, nested folders."""
    repo = Repo(tmp_path_factory.mktemp("batches") / "docs")
    for n in range(23):
        folder = ("a/", "b/c/", "")[n % 3]
        head = f"---\nfamily: f{n % 5}\nversion: {n}\nstatus: draft\n---\n"
        repo.write(f"{folder}doc{n:02}.md", head + f"Body {n}.\n" + "words " * n)
        if n % 4 == 0:
            repo.write(f"{folder}doc{n:02}.meta.yaml", f"id: side-{n}\nstatus: current\n")
    repo.write("same-1.md", "Same body.\n")
    repo.write("same-2.md", "Same body.\n")
    repo.write("broken.md", "---\n: [unclosed\n---\nbody\n")
    repo.write("bad-side.md", "Has a broken sidecar.\n")
    repo.write("bad-side.meta.yaml", ": [unclosed\n")
    repo.write("linked.md", "Its sidecar is a link.\n")
    os.symlink("doc00.meta.yaml", repo.root / "linked.meta.yaml")
    repo.write("old.md", "---\nid: old\nstatus: superseded\nsuperseded_by: new\n---\nOld.\n")
    repo.write("new.md", "---\nid: new\nstatus: current\n---\nNew.\n")
    repo.commit("the corpus", when=T0)
    return repo


def source(repo: Repo) -> GitSource:
    return GitSource("kb", repo.root, vocabulary=VOCABULARY, clock=lambda: T0)


@pytest.fixture(scope="module")
def whole(repo: Repo) -> SourceSnapshot:
    """The scan as it was: every blob read with one ``cat-file``."""
    with mock.patch.object(bodies, "SCAN_BATCH", 1_000_000):
        return source(repo).scan()


def blob_alone(repo: Repo, path: str) -> bytes:
    """The file's blob at the tip, read alone (what ``read_body`` read before)."""
    oid = repo.git("rev-parse", f"HEAD:{path}")
    found = Git("kb", 30).read_blobs(repo.root / ".git", [oid])[oid]
    assert found is not None
    return found


@pytest.fixture(scope="module")
def bodies_alone(repo: Repo, whole: SourceSnapshot) -> dict[str, str]:
    return {
        d.source_key: VOCABULARY.read(
            d.path, blob_alone(repo, d.path), default_key=d.source_key
        ).body
        for d in whole.documents
    }


def test_the_corpus_has_documents_problems_and_sidecars(whole: SourceSnapshot) -> None:
    assert len(whole.documents) >= 25
    assert {d.source_key for d in whole.documents} >= {"side-0", "side-4", "old", "new"}
    assert {p.path for p in whole.problems} >= {"broken.md", "bad-side.md", "linked.md"}


@contextmanager
def batches(scan: int, ahead: int) -> Iterator[None]:
    with (
        mock.patch.object(bodies, "SCAN_BATCH", scan),
        mock.patch.object(bodies, "READ_AHEAD", ahead),
    ):
        yield


@settings(max_examples=examples(25))
@given(scan=st.integers(1, 40), ahead=st.integers(1, 40))
def test_a_scan_in_batches_is_the_scan_of_all_at_once(
    repo: Repo, whole: SourceSnapshot, scan: int, ahead: int
) -> None:
    with batches(scan, ahead):
        assert source(repo).scan() == whole


@settings(max_examples=examples(25))
@given(data=st.data(), scan=st.integers(1, 40), ahead=st.integers(1, 40))
def test_read_body_reads_ahead_what_each_blob_read_alone_gives(
    repo: Repo,
    whole: SourceSnapshot,
    bodies_alone: dict[str, str],
    data: st.DataObject,
    scan: int,
    ahead: int,
) -> None:
    """Any order of keys (repeats, unknown ones), after a scan and then a scan of a few
    paths (what ``serve``'s watch does): each body is the one its blob alone gives."""
    keys = sorted(bodies_alone)
    paths = [d.path for d in whole.documents]
    with batches(scan, ahead):
        read = source(repo)
        read.scan()
        for _ in range(2):
            asked = data.draw(st.lists(st.sampled_from([*keys, "no-such-doc"]), max_size=40))
            for key in asked:
                if key == "no-such-doc":
                    with pytest.raises(DocumentUnreadable):
                        read.read_body(key)
                else:
                    assert read.read_body(key) == bodies_alone[key], key
            read.scan_paths(data.draw(st.lists(st.sampled_from(paths), max_size=6)))
