"""The git connector itself, ``GitSource``: a scan turns the tip's documents (``tree``) and
their history (``history``) into the snapshot, links resolved across the repository;
``read_body`` reads one document as of the last scan's commit.

Each file is read exactly as the vault reads one (``connectors.vocabulary``: frontmatter by
default), and ``content_hash`` is taken over the same normalised body, so the hash check sees a
commit that changes a body without cutting a new version. Failures map to the contract: git
cannot read the source: ``SourceUnavailable`` (an unreadable source is never an empty one); a
file that cannot be decoded or parsed: a ``SourceProblem``, as in the vault.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.frontmatter import NoteRefused, content_hash
from connectors.git.bodies import ReadAhead, scan_batches
from connectors.git.command import Git, redact
from connectors.git.delta import Tree, advance, whole
from connectors.git.history import commit_times
from connectors.git.options import (
    DEFAULT_GLOB,
    DEFAULT_TIMEOUT,
    EFFECTIVE_FROM,
    GitSettings,
    clean_subdir,
)
from connectors.git.repository import default_cache_dir, open_repository, tip
from connectors.git.tree import Scope, read_sidecar
from connectors.linking import admit_note, settle_notes, successor_fields
from connectors.options import config_problems, load
from connectors.vocabulary import Note, Vocabulary
from reconciler.model import ProblemKind, SourceDocument, SourceProblem, SourceSnapshot

__all__ = ["GitSource"]

log = logging.getLogger(__name__)


#: The last tree read, by (source, repository, subdir), with the vocabulary it was read with.
_LAST_TREE: dict[tuple[str, str, str | None], tuple[Vocabulary, Tree]] = {}


class GitSource:
    """A docs-as-code git repository: a local path, or a clone URL mirrored in a cache folder."""

    def __init__(
        self,
        name: str,
        path: Path | str | None = None,
        *,
        url: str | None = None,
        branch: str | None = None,
        subdir: str | None = None,
        glob: str = DEFAULT_GLOB,
        vocabulary: Vocabulary | None = None,
        effective_from: str = "frontmatter",
        cache_dir: Path | str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if (path is None) == (url is None):
            raise ConnectorConfigError(f"git source {name!r}: give path or url, exactly one")
        if effective_from not in EFFECTIVE_FROM:
            raise ConnectorConfigError(
                f"git source {name!r}: effective_from must be one of {', '.join(EFFECTIVE_FROM)}"
            )
        self.name = name
        self.path = Path(path) if path is not None else None
        self.url = url
        self.branch = branch or None
        self.subdir = clean_subdir(subdir)
        self.glob = glob
        self.vocabulary = vocabulary or Vocabulary(include=(glob,))
        #: The notes the last scan took, as read, when ``keep_notes`` (a dry read) asks.
        self.keep_notes = False
        self.last_notes: tuple[Note, ...] = ()
        self.effective_from = effective_from
        self.cache_dir = (
            Path(cache_dir).expanduser()
            if cache_dir is not None
            else default_cache_dir(name)
            if url is not None
            else None
        )
        self._git = Git(name, float(timeout))
        self._clock = clock or (lambda: datetime.now(UTC))
        #: source_key -> (git dir, blob id, relative path), from the last scan.
        self._blobs: dict[str, tuple[Path, str, str]] = {}
        self._bodies = ReadAhead(self._git)

    @property
    def timeout(self) -> float:
        """Seconds one git command may take."""
        return self._git.timeout

    def __repr__(self) -> str:
        where = (
            f"path={str(self.path)!r}"
            if self.path is not None
            else f"url={redact(self.url or '')!r}"
        )
        return f"GitSource(name={self.name!r}, {where})"

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with a git source's settings (checked when the config loads)."""
        return config_problems(GitSettings, settings)

    @classmethod
    def from_settings(cls, settings: Any) -> GitSource:
        """Build from a ``[[sources]]`` entry (type "git")."""
        config = load(GitSettings, settings)
        options = config.options
        return cls(
            settings.name,
            config.path,
            url=config.url,
            branch=options.branch,
            subdir=options.subdir,
            glob=options.glob,
            vocabulary=options.vocabulary((options.glob,)),
            effective_from=options.effective_from,
            cache_dir=options.cache_dir,
            timeout=options.timeout,
        )

    # -- the SystemOfRecord contract -------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """Read every selected file of the branch tip; raise SourceUnavailable if git cannot."""
        return self._scan(None)

    def scan_paths(self, paths: Collection[str]) -> SourceSnapshot:
        """Read only the documents at ``paths`` (relative to the source's root) of the branch
        tip: a path that is no document there is left out, as a scan would leave it. Each
        identity still comes from the whole tree's history (a first path two files claim is
        settled as a scan settles it); only the blobs at ``paths`` are read and parsed."""
        return self._scan(frozenset(paths))

    def _scan(self, only: frozenset[str] | None) -> SourceSnapshot:
        scanned_at = self._clock()
        git_dir = open_repository(self._git, path=self.path, url=self.url, cache_dir=self.cache_dir)
        ref, commit = tip(self._git, git_dir, self.branch)
        scope = Scope(self.subdir, self.vocabulary)
        tree = self._tree(git_dir, commit, scope)
        selected, sidecars, history, keys = tree.selected, tree.sidecars, tree.history, tree.keys
        problems = list(tree.problems)
        if only is not None:  # (the whole tree's identities, the blobs at ``only``)
            wanted = (scope.repo_path(rel) for rel in only)
            selected = {path: selected[path] for path in wanted if path in selected}
            problems = [problem for problem in problems if problem.path in only]

        notes: list[Note] = []
        refused: set[str] = set()
        kept: dict[str, Note] = {}
        duplicates: dict[str, list[str]] = {}
        repo_path: dict[str, str] = {}  # relative path -> path in the repository
        for path, blobs in scan_batches(self._git, git_dir, selected, sidecars, scope):
            rel = scope.rel(path)
            data = blobs.get(selected[path])
            if data is None:
                refused.add(rel)
                problems.append(
                    self._problem(
                        ProblemKind.UNREADABLE,
                        f"blob {selected[path]} is missing from the repository",
                        rel,
                        key=keys[path],
                    )
                )
                continue
            try:
                sidecar = read_sidecar(self.vocabulary, rel, sidecars, blobs)
                note = self.vocabulary.read(rel, data, default_key=keys[path], sidecar=sidecar)
            except NoteRefused as exc:
                refused.add(rel)
                problems.append(self._problem(exc.kind, exc.message, rel, key=keys[path]))
                continue
            if not admit_note(
                note,
                rel,
                doc_id=self._doc_id(note.key),
                kept=kept,
                refused=refused,
                problems=problems,
                problem=self._problem,
                duplicates=duplicates,
            ):
                continue
            notes.append(note)
            repo_path[rel] = path

        notes, successors = settle_notes(
            notes,
            duplicates,
            refused=refused,
            problems=problems,
            problem=self._problem,
            doc_id=self._doc_id,
            name=self.name,
            place="the repository",
            vocabulary=self.vocabulary,
        )
        if self.keep_notes:  # ``reconciler vocabulary check`` shows them
            self.last_notes = tuple(notes)
        times = commit_times(
            self._git,
            git_dir,
            self.vocabulary,
            {
                repo_path[note.path]: history[repo_path[note.path]].changes
                for note in notes
                if self.effective_from == "commit" or note.effective_from is None
            },
        )
        documents = []
        for note in notes:
            path = repo_path[note.path]
            ordinal = max(1, len(history[path].changes))
            start = note.effective_from if self.effective_from == "frontmatter" else None
            documents.append(
                SourceDocument(
                    source=self.name,
                    source_key=note.key,
                    doc_id=self._doc_id(note.key),
                    content_hash=content_hash(note.body),
                    path=note.path,
                    family=note.family,
                    version=note.version if note.version is not None else ordinal,
                    state=note.state,
                    effective_from=start if start is not None else times.get(path),
                    effective_to=note.effective_to,
                    **successor_fields(successors.get(note.key, ()), self._doc_id),
                    title=note.title,
                    doc_class=note.doc_class,
                )
            )
        blobs_of = {
            note.key: (git_dir, selected[repo_path[note.path]], note.path) for note in notes
        }
        if only is None:
            self._blobs = blobs_of
        else:  # (in place: a few documents, not a copy of the repository's)
            self._blobs.update(blobs_of)
        self._bodies.scanned(self._blobs, list(blobs_of))
        log.info(
            "git %s: %d document(s), %d problem(s) at %s %s",
            self.name,
            len(documents),
            len(problems),
            ref,
            commit[:12],
        )
        return SourceSnapshot(
            source=self.name,
            documents=tuple(documents),
            problems=tuple(problems),
            scanned_at=scanned_at,
        )

    def _tree(self, git_dir: Path, commit: str, scope: Scope) -> Tree:
        """The tip's selected files, their sidecars, history and identities: the last tree
        read when it is this tip's (``serve``'s watch reads a few paths of a tip several
        times), read from it when the branch moved on from it (``delta.advance``), else read
        whole."""
        key = (self.name, str(git_dir), self.subdir)
        kept = _LAST_TREE.pop(key, None)
        _LAST_TREE.clear()  # (one tree at a time: its history is the size of the repository)
        last = kept[1] if kept is not None and kept[0] == self.vocabulary else None
        tree = None
        if last is not None:
            tree = (
                last if last.commit == commit else advance(self._git, git_dir, last, commit, scope)
            )
        else:
            log.debug("git %s: the tree at %s read whole (none read before)", self.name, commit)
        if tree is None:
            tree = whole(self._git, git_dir, commit, scope, self._problem)
        _LAST_TREE[key] = (self.vocabulary, tree)
        return tree

    def prime(self) -> None:
        """Read the tip's tree now (``serve``'s watch, as it starts), so that the next read of
        a later tip is its difference from this one (``delta.advance``), not a whole read;
        nothing where the source reads sidecars (such a read is always whole)."""
        scope = Scope(self.subdir, self.vocabulary)
        if self.vocabulary.sidecar_path("x") is not None:
            return
        git_dir = open_repository(self._git, path=self.path, url=self.url, cache_dir=self.cache_dir)
        _ref, commit = tip(self._git, git_dir, self.branch)
        self._tree(git_dir, commit, scope)

    def read_body(self, source_key: str) -> str:
        """Return the body of the document ``source_key`` as of the last scan's commit."""
        if source_key not in self._blobs:
            try:
                self.scan()  # the document may have been added since the last scan
            except SourceUnavailable as exc:
                raise DocumentUnreadable(f"{self.name}: {source_key!r}: {exc}") from exc
        found = self._blobs.get(source_key)
        if found is None:
            raise DocumentUnreadable(f"{self.name}: no readable document with id {source_key!r}")
        _, oid, rel = found
        try:
            data = self._bodies.blob(source_key)  # (with the next ones of the last scan)
            if data is None:
                raise DocumentUnreadable(f"{self.name}: blob {oid} of {rel} is missing")
            return self.vocabulary.read(rel, data, default_key=source_key).body
        except (SourceUnavailable, NoteRefused) as exc:
            raise DocumentUnreadable(f"{self.name}: cannot read {rel}: {exc}") from exc

    def _doc_id(self, key: str) -> str:
        return f"{self.name}:{key}"

    def _problem(
        self,
        kind: ProblemKind,
        message: str,
        path: str | None,
        doc_id: str | None = None,
        *,
        key: str | None = None,
        field: str | None = None,
    ) -> SourceProblem:
        log.debug("git %s: %s %s: %s", self.name, kind.value, path, message)
        if doc_id is not None:
            key = doc_id[len(self.name) + 1 :]
        return SourceProblem(
            source=self.name,
            kind=kind,
            message=message,
            path=path,
            doc_id=doc_id,
            source_key=key,
            field=field,
        )
