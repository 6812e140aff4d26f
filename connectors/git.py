"""The system of record for a docs-as-code git repository: one markdown file per document.

Documents are the files of the tracked branch's tip commit that lie below ``subdir`` and match
``glob``; they are read from git objects (``ls-tree``, ``cat-file``), never from a working tree,
so uncommitted edits do not count. Frontmatter is read exactly as the vault reads it
(``connectors.frontmatter``), and ``content_hash`` is taken over the same normalised body, so the
hash check sees a commit that changes a body without cutting a new version.

Identity, ordinals and dates come from the branch's first-parent history (one ``git log`` with
rename detection; a merge counts as one change, the change it brought to the branch):

- identity (``source_key``): the frontmatter ``id``, else the file's *first* path in the source
  (relative to ``subdir``, without ``.md``). A file moved or renamed inside the source keeps its
  identity, so its doc id, family and chunks stay put; a file moved in from outside the source
  (another folder, another suffix) enters it then, as a new document. Should two files claim the
  same first path (a file moved away and a new one created in its place), the older keeps it and
  the newer becomes ``<path>@<commit>`` (the commit that added it);
- version ordinal: the frontmatter ``version``, else the number of commits that changed the
  file's content (1 for the commit that added it); a pure rename or mode change is not a version;
- ``effective_from``: the frontmatter's when present (``effective_from = "frontmatter"``, the
  default), else the time of the last commit that changed the *body*. A commit that only edits
  frontmatter (marking a version superseded) does not move its start past its successor's.

Failures map to the contract: a missing path, something that is not a repository, a branch
that does not exist, a clone URL that cannot be reached, a failed fetch, a git command that
fails or times out: ``SourceUnavailable`` (an unreadable source is never an empty one). A file
that cannot be decoded or parsed: a ``SourceProblem``, as in the vault.

git runs with no shell, a timeout, a scrubbed environment (no ``GIT_DIR`` and the like inherited,
no terminal prompt) and ``-c`` settings that keep repository configuration from running
programs (no fsmonitor, no hooks, no signature checks, no ``ext::`` transport).
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, PlainValidator

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.frontmatter import NoteRefused, content_hash
from connectors.linking import admit_note, refuse_duplicates, resolve_links, unused_mappings
from connectors.options import (
    ConnectorSettings,
    Loc,
    checked_url,
    config_problems,
    invalid,
    load,
    text,
)
from connectors.vocabulary import (
    Note,
    Vocabulary,
    VocabularyOptions,
    glob_problem,
    vocabulary_rules,
)
from reconciler.model import ProblemKind, SourceDocument, SourceProblem, SourceSnapshot

__all__ = [
    "DEFAULT_GLOB",
    "DEFAULT_TIMEOUT",
    "EFFECTIVE_FROM",
    "GitOptions",
    "GitSettings",
    "GitSource",
    "default_cache_dir",
]

log = logging.getLogger(__name__)

DEFAULT_GLOB = "**/*.md"
#: Seconds one git command may take (a first clone of a large repository may need more).
DEFAULT_TIMEOUT = 120.0
#: Where ``effective_from`` comes from: frontmatter when present else the commit time; or
#: always the commit time.
EFFECTIVE_FROM = ("frontmatter", "commit")

#: Settings that keep a repository's own configuration from running programs or prompting.
_SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.quotePath=false",
    "protocol.ext.allow=never",
    "gc.auto=0",
    "maintenance.auto=false",
    "log.showSignature=false",
    "color.ui=false",
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
)
#: Variables that would point git at another repository, index, object store or config
#: (``git rev-parse --local-env-vars``, and discovery settings).
_LOCAL_ENV = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "GIT_NAMESPACE",
    }
)
_REF = re.compile(
    r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)[^\x00-\x20\x7f~^:?*\[\\]+(?<![./])(?<!\.lock)$"
)
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
_FILE_MODES = {b"100644", b"100755"}
_LINK_MODE = b"120000"
#: Stands for a sidecar that is a symlink or lies behind one (never read).
_LINKED = "symlink"


def default_cache_dir(name: str) -> Path:
    """Where a url source keeps its bare mirror unless ``options.cache_dir`` says otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "corpus-reconciler" / "git" / name


@dataclass(slots=True)
class _History:
    """One tip file's history on the tracked branch, newest change first."""

    first_path: str = ""
    first_commit: str = ""
    #: Position of the first commit in the walk (larger is older).
    first_order: int = -1
    #: (commit time, blob before or None where the file entered the source, blob after).
    changes: list[tuple[datetime, str | None, str]] = field(default_factory=list)


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
        self.subdir = _clean_subdir(subdir)
        self.glob = glob
        self.vocabulary = vocabulary or Vocabulary(include=(glob,))
        self.effective_from = effective_from
        self.cache_dir = (
            Path(cache_dir).expanduser()
            if cache_dir is not None
            else default_cache_dir(name)
            if url is not None
            else None
        )
        self.timeout = float(timeout)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._env = {k: v for k, v in os.environ.items() if k not in _LOCAL_ENV}
        self._env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
        #: source_key -> (git dir, blob id, relative path), from the last scan.
        self._blobs: dict[str, tuple[Path, str, str]] = {}

    def __repr__(self) -> str:
        where = f"path={str(self.path)!r}" if self.path is not None else f"url={self._shown_url!r}"
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
        scanned_at = self._clock()
        git_dir = self._repository()
        ref, commit = self._tip(git_dir)
        problems: list[SourceProblem] = []
        selected, sidecars = self._select(git_dir, commit, problems)
        histories = self._history(git_dir, commit, selected)
        keys = self._identities(histories)
        sidecar_blobs = [oid for oid in sidecars.values() if oid != _LINKED]
        blobs = self._read_blobs(git_dir, [*selected.values(), *sidecar_blobs])

        notes: list[Note] = []
        refused: set[str] = set()
        kept: dict[str, Note] = {}
        duplicates: dict[str, list[str]] = {}
        repo_path: dict[str, str] = {}  # relative path -> path in the repository
        for path in sorted(selected):
            rel = self._rel(path)
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
                sidecar = self._sidecar(rel, sidecars, blobs)
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

        notes = refuse_duplicates(
            notes,
            duplicates,
            refused=refused,
            problems=problems,
            problem=self._problem,
            doc_id=self._doc_id,
        )
        successors, link_problems = resolve_links(
            notes,
            refused,
            name=self.name,
            problem=self._problem,
            place="the repository",
            vocabulary=self.vocabulary,
        )
        problems.extend(link_problems)
        problems.extend(
            self._problem(ProblemKind.UNUSED_MAPPING, message, None, field=name)
            for name, message in unused_mappings(self.vocabulary, notes)
        )
        times = self._commit_times(
            git_dir,
            {
                repo_path[note.path]: histories[repo_path[note.path]].changes
                for note in notes
                if self.effective_from == "commit" or note.effective_from is None
            },
        )
        documents = []
        for note in notes:
            path = repo_path[note.path]
            ordinal = max(1, len(histories[path].changes))
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
                    superseded_by=(
                        self._doc_id(successors[note.key]) if note.key in successors else None
                    ),
                    title=note.title,
                    doc_class=note.doc_class,
                )
            )
        self._blobs = {
            note.key: (git_dir, selected[repo_path[note.path]], note.path) for note in notes
        }
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
        git_dir, oid, rel = found
        try:
            data = self._read_blobs(git_dir, [oid]).get(oid)
            if data is None:
                raise DocumentUnreadable(f"{self.name}: blob {oid} of {rel} is missing")
            return self.vocabulary.read(rel, data, default_key=source_key).body
        except (SourceUnavailable, NoteRefused) as exc:
            raise DocumentUnreadable(f"{self.name}: cannot read {rel}: {exc}") from exc

    # -- the repository --------------------------------------------------------------------

    def _repository(self) -> Path:
        """The git directory to read: the local repository's, or the refreshed mirror."""
        if self.path is not None:
            return self._local(self.path)
        return self._mirror()

    def _local(self, path: Path) -> Path:
        try:
            if not path.exists():
                raise SourceUnavailable(f"git {self.name!r}: {path} does not exist")
            if not path.is_dir():
                raise SourceUnavailable(f"git {self.name!r}: {path} is not a directory")
            root = path.resolve(strict=True)
        except OSError as exc:
            raise SourceUnavailable(f"git {self.name!r}: cannot read {path}: {exc}") from exc
        # The ceiling stops discovery at the folder itself: a plain folder inside some other
        # repository is "not a repository", never that other repository.
        out = self._git(
            "-C",
            str(root),
            "rev-parse",
            "--absolute-git-dir",
            what=f"{path} as a repository",
            env={"GIT_CEILING_DIRECTORIES": str(root.parent)},
        )
        return Path(os.fsdecode(out.strip()))

    def _mirror(self) -> Path:
        """The bare mirror of ``url``: cloned on first use, fetched on every scan."""
        assert self.url is not None
        assert self.cache_dir is not None
        cache = self.cache_dir
        try:
            fresh = not cache.exists() or (cache.is_dir() and not any(cache.iterdir()))
        except OSError as exc:
            raise SourceUnavailable(f"git {self.name!r}: cannot read {cache}: {exc}") from exc
        if fresh:
            self._clone(cache)
        not_mirror = SourceUnavailable(
            f"git {self.name!r}: {cache} is not a mirror made by this connector; "
            "point options.cache_dir elsewhere or delete it"
        )
        try:
            bare = self._git("rev-parse", "--is-bare-repository", git_dir=cache, what=f"{cache}")
            mirror = self._git(
                "config", "--get", "remote.origin.mirror", git_dir=cache, what=f"{cache}", ok=(1,)
            )
        except SourceUnavailable as exc:
            raise not_mirror from exc
        if bare.strip() != b"true" or mirror.strip() != b"true":
            raise not_mirror
        origin = self._git(
            "config", "--get", "remote.origin.url", git_dir=cache, what=f"{cache}", ok=(1,)
        )
        if os.fsdecode(origin.strip()) != self.url:
            log.info("git %s: the mirror in %s now follows %s", self.name, cache, self._shown_url)
            self._git(
                "remote",
                "set-url",
                "origin",
                self.url,
                git_dir=cache,
                what="re-pointing the mirror",
            )
            fresh = False
        if not fresh:
            self._git(
                "fetch",
                "--prune",
                "--quiet",
                "origin",
                git_dir=cache,
                what=f"fetching {self._shown_url}",
            )
        return cache

    def _clone(self, cache: Path) -> None:
        assert self.url is not None
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SourceUnavailable(f"git {self.name!r}: cannot create {cache}: {exc}") from exc
        staging = cache.parent / f".{cache.name}.clone-{uuid.uuid4().hex[:12]}"
        log.info("git %s: cloning %s into %s", self.name, self._shown_url, cache)
        try:
            self._git(
                "clone",
                "--mirror",
                "--quiet",
                "--",
                self.url,
                str(staging),
                what=f"cloning {self._shown_url}",
            )
            try:
                staging.rename(cache)  # atomic; replaces an empty folder
            except OSError:
                if not (cache / "HEAD").exists():  # not a concurrent clone that won the race
                    raise
        except OSError as exc:
            raise SourceUnavailable(f"git {self.name!r}: cannot create {cache}: {exc}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _tip(self, git_dir: Path) -> tuple[str, str]:
        """(ref, commit id) of the tracked branch."""
        if self.branch is not None:
            ref = self.branch if self.branch.startswith("refs/") else f"refs/heads/{self.branch}"
        else:
            out = self._git(
                "symbolic-ref",
                "--quiet",
                "HEAD",
                git_dir=git_dir,
                what="HEAD (detached? set options.branch)",
            )
            ref = os.fsdecode(out.strip())
        out = self._git(
            "rev-parse",
            "--verify",
            "--quiet",
            f"{ref}^{{commit}}",
            git_dir=git_dir,
            what=f"branch {ref} (missing, or no commit yet)",
        )
        return ref, out.decode("ascii").strip()

    def _select(
        self, git_dir: Path, commit: str, problems: list[SourceProblem]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Path in the repository -> blob id of every file of the source at ``commit``, and
        of every file that is the sidecar of one of them."""
        out = self._git(
            "ls-tree", "-r", "-z", "--full-tree", commit, git_dir=git_dir, what="the tree"
        )
        selected: dict[str, str] = {}
        links: dict[str, str] = {}
        files: dict[str, str] = {}
        linked: set[str] = set()  # symlinks, for sidecars that are one or lie behind one
        wants_sidecars = self.vocabulary.sidecar_path("x") is not None
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, raw = record.partition(b"\t")
            mode, kind, oid = meta.split(b" ")
            path = raw.decode("utf-8", "surrogateescape")
            if wants_sidecars and kind == b"blob" and mode in _FILE_MODES:
                files[path] = oid.decode("ascii")
            elif wants_sidecars and mode == _LINK_MODE:
                linked.add(path)
            if kind != b"blob" or not self._selects(path):
                continue
            if not _decodes(raw):
                problems.append(
                    self._problem(
                        ProblemKind.UNDECODABLE,
                        "file name is not valid UTF-8",
                        _printable(self._rel(path)),
                    )
                )
            elif mode in _FILE_MODES:
                selected[path] = oid.decode("ascii")
            elif mode == _LINK_MODE:
                links[path] = oid.decode("ascii")
        if links:
            targets = self._read_blobs(git_dir, links.values())
            for path in sorted(links):
                self._check_link(path, targets.get(links[path]), problems)
        sidecars: dict[str, str] = {}
        for path in selected if wants_sidecars else ():
            where = self.vocabulary.sidecar_path(self._rel(path))
            if where is None:
                continue
            full = self._repo_path(where)
            parts = full.split("/")
            if any("/".join(parts[:n]) in linked for n in range(1, len(parts) + 1)):
                sidecars[where] = _LINKED
            elif full in files:
                sidecars[where] = files[full]
        return selected, sidecars

    def _sidecar(
        self, rel: str, sidecars: Mapping[str, str], blobs: Mapping[str, bytes | None]
    ) -> bytes | None:
        """The content of the sidecar of the document at ``rel`` (None: it has none)."""
        where = self.vocabulary.sidecar_path(rel)
        if where is None or where not in sidecars:
            return None
        if sidecars[where] == _LINKED:
            raise NoteRefused(
                ProblemKind.LINK_OUTSIDE_ROOT,
                f"sidecar {where} is a symbolic link or lies behind one; not read",
            )
        data = blobs.get(sidecars[where])
        if data is None:
            raise NoteRefused(
                ProblemKind.UNREADABLE, f"sidecar {where}: blob {sidecars[where]} is missing"
            )
        return data

    def _check_link(self, path: str, target: bytes | None, problems: list[SourceProblem]) -> None:
        """A symlink is never followed; one pointing out of the source is a problem."""
        text = (target or b"").decode("utf-8", "replace")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), text))
        inside = not text.startswith("/") and not resolved.startswith("../") and resolved != ".."
        if inside and (not self.subdir or resolved.startswith(self.subdir + "/")):
            log.debug("git %s: skipping symlink %s (its target is read itself)", self.name, path)
            return
        problems.append(
            self._problem(
                ProblemKind.LINK_OUTSIDE_ROOT,
                f"symlink to {text}, outside the source; not read",
                self._rel(path),
            )
        )

    # -- history ---------------------------------------------------------------------------

    def _history(
        self, git_dir: Path, commit: str, selected: Mapping[str, str]
    ) -> dict[str, _History]:
        """Each selected file's history along the branch's first parents, renames followed."""
        histories = {path: _History() for path in selected}
        if not histories:
            return histories
        out = self._git(
            "log",
            "--first-parent",
            "--diff-merges=first-parent",
            "--root",
            "-M",
            "--raw",
            "--no-abbrev",
            "--no-relative",
            "-z",
            "--format=%x01%H %ct",
            commit,
            "--",
            git_dir=git_dir,
            what="the history",
        )
        tracked = {path: path for path in selected}  # name before the commit -> tip path
        tokens = out.split(b"\0")
        sha, when, order = "", datetime.min.replace(tzinfo=UTC), 0
        entries: list[tuple[str, str, str, str, str]] = []
        index = 0

        def settle() -> None:
            self._apply(entries, tracked, histories, sha, when, order)
            entries.clear()

        while index < len(tokens):
            token = tokens[index].lstrip(b"\n")
            index += 1
            if not token:
                continue
            if token.startswith(b"\x01"):
                settle()
                head, _, stamp = token[1:].decode("ascii").partition(" ")
                sha, when, order = head, datetime.fromtimestamp(int(stamp), UTC), order + 1
                continue
            fields = token[1:].decode("ascii").split(" ")
            if not token.startswith(b":") or len(fields) != 5 or index >= len(tokens):
                raise SourceUnavailable(f"git {self.name!r}: unexpected git log output")
            old, new, status = fields[2], fields[3], fields[4]
            src = tokens[index].decode("utf-8", "surrogateescape")
            index += 1
            dst = src
            if status[:1] in {"R", "C"}:
                dst = tokens[index].decode("utf-8", "surrogateescape")
                index += 1
            entries.append((status[:1], src, dst, old, new))
        settle()
        for path, history in histories.items():  # a shallow history may end before the add
            if not history.first_path:
                history.first_path = path
        return histories

    def _apply(
        self,
        entries: list[tuple[str, str, str, str, str]],
        tracked: dict[str, str],
        histories: dict[str, _History],
        sha: str,
        when: datetime,
        order: int,
    ) -> None:
        """Walk one commit backwards: attribute its changes, then restore names it renamed."""
        renamed: list[tuple[str, str]] = []
        for status, src, dst, old, new in entries:
            if status in {"A", "C"}:
                tip = tracked.pop(dst, None)
                before: str | None = None
            elif status == "R":
                tip = tracked.pop(dst, None)
                before = old
                if tip is not None and self._selects(src):
                    renamed.append((src, tip))
                else:
                    before = None  # moved in from outside the source: it enters here
            elif status in {"M", "T"}:
                tip = tracked.get(dst)
                before = old
            else:
                continue
            if tip is None:
                continue
            history = histories[tip]
            if before is None or before != new:
                history.changes.append((when, before, new))
            if before is None:
                history.first_path, history.first_commit, history.first_order = dst, sha, order
        for src, tip in renamed:
            tracked[src] = tip

    def _identities(self, histories: Mapping[str, _History]) -> dict[str, str]:
        """Each tip file's default key: its first path in the source; the oldest claim wins."""
        claims: dict[str, list[str]] = {}
        for path, history in histories.items():
            key = self.vocabulary.default_key(self._rel(history.first_path))
            claims.setdefault(key, []).append(path)
        keys: dict[str, str] = {}
        for key, paths in claims.items():
            paths.sort(key=lambda p: (-histories[p].first_order, p))
            keys[paths[0]] = key
            for path in paths[1:]:
                keys[path] = f"{key}@{histories[path].first_commit[:12] or path}"
        return keys

    def _commit_times(
        self, git_dir: Path, wanted: Mapping[str, list[tuple[datetime, str | None, str]]]
    ) -> dict[str, datetime]:
        """The time of the last commit that changed each file's body (not only frontmatter)."""
        times: dict[str, datetime] = {}
        bodies: dict[str, str | None] = {}
        cursor = {path: 0 for path, changes in wanted.items() if changes}
        while cursor:
            needed = {
                oid
                for path, at in cursor.items()
                for oid in wanted[path][at][1:]
                if oid is not None and oid not in bodies
            }
            for oid, data in self._read_blobs(git_dir, needed).items():
                bodies[oid] = self.vocabulary.body(data) if data is not None else None
            following: dict[str, int] = {}
            for path, at in cursor.items():
                when, old, new = wanted[path][at]
                if old is None or bodies[old] is None or bodies[old] != bodies[new]:
                    times[path] = when
                elif at + 1 == len(wanted[path]):
                    times[path] = when  # history ends here (shallow)
                else:
                    following[path] = at + 1
            cursor = following
        return times

    # -- git -------------------------------------------------------------------------------

    def _read_blobs(self, git_dir: Path, oids: Iterable[str]) -> dict[str, bytes | None]:
        """Blob id -> content (None when missing), with one ``cat-file --batch``."""
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        out = self._git(
            "cat-file",
            "--batch",
            git_dir=git_dir,
            what="file contents",
            stdin=("\n".join(wanted) + "\n").encode("ascii"),
        )
        found: dict[str, bytes | None] = {}
        at = 0
        try:
            for oid in wanted:
                end = out.index(b"\n", at)
                header = out[at:end].split(b" ")
                if len(header) == 2 and header[1] == b"missing":
                    found[oid] = None
                    at = end + 1
                    continue
                size = int(header[2])
                found[oid] = out[end + 1 : end + 1 + size]
                at = end + 1 + size + 1
        except (ValueError, IndexError) as exc:
            raise SourceUnavailable(f"git {self.name!r}: unexpected git cat-file output") from exc
        return found

    def _git(
        self,
        *args: str,
        what: str,
        git_dir: Path | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (),
    ) -> bytes:
        """Run one git command; its stdout, or SourceUnavailable naming ``what`` failed.

        Exit codes in ``ok`` return empty output (``config --get`` of an unset key).
        """
        command = ["git", "--no-pager"]
        for setting in _SAFE_CONFIG:
            command += ["-c", setting]
        if git_dir is not None:
            command += ["--git-dir", str(git_dir)]
        command += args
        try:
            done = subprocess.run(  # no shell: a fixed argv
                command,
                input=stdin,
                stdin=subprocess.DEVNULL if stdin is None else None,
                capture_output=True,
                timeout=self.timeout,
                env={**self._env, **(env or {})},
                check=False,
            )
        except FileNotFoundError as exc:
            raise SourceUnavailable(f"git {self.name!r}: the git command is not installed") from exc
        except subprocess.TimeoutExpired as exc:
            raise SourceUnavailable(
                f"git {self.name!r}: {what}: git took longer than {self.timeout:g}s"
            ) from exc
        except OSError as exc:
            raise SourceUnavailable(f"git {self.name!r}: {what}: cannot run git: {exc}") from exc
        if done.returncode in ok:
            return b""
        if done.returncode != 0:
            reason = _redact(done.stderr.decode("utf-8", "replace")).strip().splitlines()
            shown = reason[-1] if reason else f"exit code {done.returncode}"
            log.debug("git %s: %s failed: %s", self.name, args[:2], " | ".join(reason))
            raise SourceUnavailable(f"git {self.name!r}: cannot read {what}: {shown}")
        return done.stdout

    # -- helpers ---------------------------------------------------------------------------

    def _selects(self, path: str) -> bool:
        """Whether a path in the repository is a file of this source."""
        if self.subdir:
            if not path.startswith(self.subdir + "/"):
                return False
            path = path[len(self.subdir) + 1 :]
        return self.vocabulary.selects(path)

    def _rel(self, path: str) -> str:
        """A repository path relative to ``subdir`` (the source's root)."""
        return path[len(self.subdir) + 1 :] if self.subdir else path

    def _repo_path(self, rel: str) -> str:
        """A path relative to the source's root as a path in the repository."""
        return f"{self.subdir}/{rel}" if self.subdir else rel

    @property
    def _shown_url(self) -> str:
        return _redact(self.url or "")

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


# -- settings ------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("must be a non-empty string")
    return value


def _branch(value: Any) -> str:
    if not _REF.match(_text(value)):
        raise invalid(f"{value!r} is not a valid branch name")
    return str(value)


def _subdir(value: Any) -> str:
    parts = _text(value).replace("\\", "/").strip("/").split("/")
    if value.startswith("/") or any(part in {"", ".", ".."} for part in parts):
        raise invalid("must be a folder inside the repository, like 'docs/hr'")
    return str(value)


def _glob(value: Any) -> str:
    problem = glob_problem(_text(value))
    if problem is not None:
        raise invalid(problem)
    return str(value)


def _effective_from(value: Any) -> str:
    if _text(value) not in EFFECTIVE_FROM:
        raise invalid(f"must be one of {', '.join(EFFECTIVE_FROM)}")
    return str(value)


def _timeout(value: Any) -> float:
    try:
        seconds = float(value) if not isinstance(value, bool) else 0.0
    except (TypeError, ValueError):
        seconds = 0.0
    if not seconds > 0:
        raise invalid("must be a positive number of seconds")
    return seconds


class GitOptions(VocabularyOptions):
    """``[sources.options]`` of a git source (docs/connectors/git.md): where the documents
    are, and how they are read (docs/connectors/mapping.md)."""

    unknown_option: ClassVar[str] = "unknown option for a git source"

    branch: Annotated[str, PlainValidator(_branch)] | None = None
    subdir: Annotated[str, PlainValidator(_subdir)] | None = None
    glob: Annotated[str, PlainValidator(_glob)] = DEFAULT_GLOB
    effective_from: Annotated[str, PlainValidator(_effective_from)] = "frontmatter"
    cache_dir: Annotated[str, text("must be a non-empty string")] | None = None
    timeout: Annotated[float, PlainValidator(_timeout)] = DEFAULT_TIMEOUT


def _clone_url_problems(url: str) -> list[str]:
    problems = []
    if url.startswith("-"):
        problems.append("a clone URL cannot start with '-'")
    if url.lower().startswith("ext::"):
        problems.append("the ext:: transport runs commands; it is not allowed")
    parts = urlsplit(url)
    if parts.scheme and parts.password:
        problems.append(
            "credentials do not belong in the config file: use a git credential helper or an "
            "SSH key (the git command's own configuration)"
        )
    return problems


class GitSettings(ConnectorSettings):
    """What a git source reads of its ``[[sources]]`` entry."""

    path: str | None = None
    url: Annotated[str | None, checked_url(_clone_url_problems)] = None
    options: GitOptions = Field(default_factory=GitOptions)

    @classmethod
    def rules(cls, given: Mapping[str, Any], options: Mapping[str, Any]) -> list[tuple[Loc, str]]:
        """git on PATH; exactly one of path and url; a cache folder for a clone URL only."""
        problems: list[tuple[Loc, str]] = []
        if shutil.which("git") is None:
            problems.append((("type",), "the git connector needs the git command on PATH"))
        if given.get("path") and given.get("url"):
            problems.append(
                (("url",), "set path (a local repository) or url (a clone URL), not both")
            )
        elif not given.get("path") and not given.get("url"):
            problems.append(
                (("path",), "a git source needs path (a local repository) or url (a clone URL)")
            )
        if "cache_dir" in options and not given.get("url"):
            problems.append((("options", "cache_dir"), "cache_dir applies to url sources only"))
        if "glob" in options and "include" in options:
            problems.append(
                (("options", "glob"), "set include (a list of globs) or glob, not both")
            )
        return problems + vocabulary_rules(options)


def _clean_subdir(subdir: str | None) -> str:
    return (subdir or "").replace("\\", "/").strip("/")


# -- small helpers -------------------------------------------------------------------------


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _printable(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _redact(text: str) -> str:
    return _USERINFO.sub("***@", text)
