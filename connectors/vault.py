"""The system of record for a markdown / Obsidian vault: one note per document version.

A note declares its version state in YAML frontmatter (docs/connectors/vault.md). This module reads the
vault strictly: every scalar is loaded as a string and converted on purpose (no YAML 1.1
surprises such as ``0123`` becoming 83 or ``no`` becoming False), and every note that cannot
be taken as it is becomes a ``SourceProblem`` rather than a crash or a silent default.

What a bad note costs, deliberately:

- the note's identity is unknown (unreadable, undecodable, unparsable frontmatter, frontmatter
  that is not a mapping, an ``id`` that is not a string, a symlink out of the vault): the note
  is *not* yielded, only its problem (with its path);
- one field is invalid (``status: yes``, ``version: 1.5``, an unparsable date): the note *is*
  yielded with that field taken as absent (``None``), and the problem names the field
  (``SourceProblem.field``; the engine keeps a registered note's value for it);
- ``superseded_by`` dangles, names the note itself, or is part of a cycle: the note is yielded
  without ``superseded_by``;
- two notes share an id: the first by path order is yielded, the other only as a problem.

Symlinks are never followed: a link (file or directory) whose target lies outside the vault
root is refused with ``LINK_OUTSIDE_ROOT``; a link inside the root is skipped, since its
target is scanned under its own path (following it would count the same note twice).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from connectors.base import DocumentUnreadable, SourceUnavailable
from connectors.frontmatter import NoteRefused, content_hash
from connectors.linking import admit_note, settle_notes, successor_fields
from connectors.options import (
    ConnectorSettings,
    Loc,
    config_problems,
    load,
    text,
    unset,
)
from connectors.vocabulary import Note, Vocabulary, VocabularyOptions, vocabulary_rules
from reconciler.model import (
    ProblemKind,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
)

__all__ = ["VaultOptions", "VaultSettings", "VaultSource"]

log = logging.getLogger(__name__)


#: The notes of a vault whose options name no ``include``.
DEFAULT_INCLUDE = ("**/*.md",)


class VaultOptions(VocabularyOptions):
    """How a vault's documents are found and read (docs/connectors/mapping.md); by default
    every ``*.md`` note, with YAML frontmatter under the project's own key names."""

    unknown_option: ClassVar[str] = "unknown option for a vault source"


class VaultSettings(ConnectorSettings):
    """What a vault source reads of its ``[[sources]]`` entry."""

    path: Annotated[str, text("a vault source needs path (the vault folder)")] = Field(
        default=None, validate_default=True
    )
    url: Annotated[None, unset("a vault source reads a folder: set path, not url")] = None
    options: VaultOptions = Field(default_factory=VaultOptions)

    @classmethod
    def rules(cls, given: Mapping[str, Any], options: Mapping[str, Any]) -> list[tuple[Loc, str]]:
        """The vocabulary's rules across options."""
        return vocabulary_rules(options)


class VaultSource:
    """A folder of markdown notes with YAML frontmatter (Obsidian-compatible)."""

    def __init__(
        self,
        name: str,
        path: Path | str,
        *,
        vocabulary: Vocabulary | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.name = name
        self.path = Path(path)
        self.vocabulary = vocabulary or Vocabulary(include=DEFAULT_INCLUDE)
        #: The notes the last scan took, as read, when ``keep_notes`` (a dry read) asks.
        self.keep_notes = False
        self.last_notes: tuple[Note, ...] = ()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._paths: dict[str, str] = {}  # source_key -> relative path, from the last scan

    def __repr__(self) -> str:
        return f"VaultSource(name={self.name!r}, path={str(self.path)!r})"

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with a vault source's settings (checked when the config loads)."""
        return config_problems(VaultSettings, settings)

    @classmethod
    def from_settings(cls, settings: Any) -> VaultSource:
        """Build from a ``[[sources]]`` entry (type "vault")."""
        config = load(VaultSettings, settings)
        return cls(
            settings.name, config.path, vocabulary=config.options.vocabulary(DEFAULT_INCLUDE)
        )

    # -- the SystemOfRecord contract -------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """Read every note's frontmatter and body hash; raise SourceUnavailable if the vault is."""
        scanned_at = self._clock()
        root = self._root()
        problems: list[SourceProblem] = []
        return self._snapshot(root, self._walk(root, problems), problems, scanned_at)

    def scan_paths(self, paths: Collection[str]) -> SourceSnapshot:
        """Read only the notes at ``paths`` (relative to the vault, as a scan names them): a
        path that is no note now (deleted, hidden, not included) is left out, as a scan
        would leave it. ``serve``'s watch reads a few changed notes of a large vault so."""
        scanned_at = self._clock()
        root = self._root()
        problems: list[SourceProblem] = []
        found: list[str] = []
        for rel in sorted(set(paths)):
            parts = rel.split("/")
            if not rel or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
                continue
            if not self.vocabulary.selects(rel):
                continue
            path = root / rel
            try:
                if any((root / "/".join(parts[:n])).is_symlink() for n in range(1, len(parts))):
                    continue  # behind a linked folder: a scan does not go there either
                if path.is_symlink():
                    self._check_link(root, path, rel, problems)
                elif path.is_file():
                    found.append(rel)
            except OSError as exc:
                problems.append(
                    self._problem(
                        ProblemKind.UNREADABLE, f"cannot stat: {_reason(exc)}", _printable(rel)
                    )
                )
        return self._snapshot(root, found, problems, scanned_at, keep_paths=True)

    def _snapshot(
        self,
        root: Path,
        rels: list[str],
        problems: list[SourceProblem],
        scanned_at: datetime,
        *,
        keep_paths: bool = False,
    ) -> SourceSnapshot:
        """The notes at ``rels`` read, linked and settled into a snapshot."""
        notes: list[Note] = []
        refused: set[str] = set()
        kept: dict[str, Note] = {}
        duplicates: dict[str, list[str]] = {}
        for rel in rels:
            try:
                note = self._read(root, rel)
            except OSError as exc:
                refused.add(rel)
                problems.append(
                    self._problem(ProblemKind.UNREADABLE, f"cannot read note: {_reason(exc)}", rel)
                )
                continue
            except NoteRefused as exc:
                refused.add(rel)
                problems.append(self._problem(exc.kind, exc.message, rel))
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

        notes, successors = settle_notes(
            notes,
            duplicates,
            refused=refused,
            problems=problems,
            problem=self._problem,
            doc_id=self._doc_id,
            name=self.name,
            place="the vault",
            vocabulary=self.vocabulary,
        )
        if self.keep_notes:  # ``reconciler vocabulary check`` shows them
            self.last_notes = tuple(notes)
        documents = tuple(
            SourceDocument(
                source=self.name,
                source_key=note.key,
                doc_id=self._doc_id(note.key),
                content_hash=content_hash(note.body),
                path=note.path,
                family=note.family,
                version=note.version,
                state=note.state,
                effective_from=note.effective_from,
                effective_to=note.effective_to,
                **successor_fields(successors.get(note.key, ()), self._doc_id),
                title=note.title,
                doc_class=note.doc_class,
            )
            for note in notes
        )
        paths = {note.key: note.path for note in notes}
        self._paths = {**self._paths, **paths} if keep_paths else paths
        log.info(
            "vault %s: %d document(s), %d problem(s)", self.name, len(documents), len(problems)
        )
        return SourceSnapshot(
            source=self.name,
            documents=documents,
            problems=tuple(problems),
            scanned_at=scanned_at,
        )

    def read_body(self, source_key: str) -> str:
        """Return the body of the note with id ``source_key`` (the text its hash is taken of)."""
        body = self._read_known(source_key)
        if body is None:
            self.scan()  # the note may have moved or been created since the last scan
            body = self._read_known(source_key)
        if body is None:
            raise DocumentUnreadable(f"{self.name}: no readable note with id {source_key!r}")
        return body

    # -- walking ---------------------------------------------------------------------------

    def _root(self) -> Path:
        try:
            if not self.path.exists():
                raise SourceUnavailable(f"vault {self.name!r}: {self.path} does not exist")
            if not self.path.is_dir():
                raise SourceUnavailable(f"vault {self.name!r}: {self.path} is not a directory")
            root = self.path.resolve(strict=True)
            with os.scandir(root):
                pass
        except OSError as exc:
            raise SourceUnavailable(
                f"vault {self.name!r}: cannot read {self.path}: {_reason(exc)}"
            ) from exc
        return root

    def _walk(self, root: Path, problems: list[SourceProblem]) -> list[str]:
        """Relative posix paths of every note under ``root``, sorted; problems appended."""
        found: list[str] = []
        pending: list[tuple[Path, str]] = [(root, "")]
        while pending:
            directory, prefix = pending.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = list(listing)
            except OSError as exc:
                if not prefix:
                    raise SourceUnavailable(
                        f"vault {self.name!r}: cannot list {self.path}: {_reason(exc)}"
                    ) from exc
                problems.append(
                    self._problem(
                        ProblemKind.UNREADABLE,
                        f"cannot list folder, its notes are not scanned: {_reason(exc)}",
                        _printable(prefix),
                    )
                )
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue  # .obsidian, .git, .trash, editor temp files: never notes
                rel = prefix + entry.name
                try:
                    if entry.is_symlink():
                        self._check_link(root, Path(entry.path), rel, problems)
                    elif entry.is_dir(follow_symlinks=False):
                        pending.append((Path(entry.path), rel + "/"))
                    elif self.vocabulary.selects(rel) and entry.is_file(follow_symlinks=False):
                        found.append(rel)
                except OSError as exc:
                    problems.append(
                        self._problem(
                            ProblemKind.UNREADABLE, f"cannot stat: {_reason(exc)}", _printable(rel)
                        )
                    )
        notes: list[str] = []
        for rel in sorted(found):
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                problems.append(
                    self._problem(
                        ProblemKind.UNDECODABLE, "file name is not valid UTF-8", _printable(rel)
                    )
                )
                continue
            notes.append(rel)
        return notes

    def _check_link(self, root: Path, link: Path, rel: str, problems: list[SourceProblem]) -> None:
        target = Path(os.path.realpath(link))
        if target.is_relative_to(root):
            log.debug(
                "vault %s: skipping symlink %s (its target is scanned itself)", self.name, rel
            )
            return
        if self.vocabulary.selects(rel) or target.is_dir():
            problems.append(
                self._problem(
                    ProblemKind.LINK_OUTSIDE_ROOT,
                    f"symlink to {target}, outside the vault root; not read",
                    _printable(rel),
                )
            )

    # -- helpers ---------------------------------------------------------------------------

    def _read_known(self, source_key: str) -> str | None:
        rel = self._paths.get(source_key)
        if rel is None:
            return None
        try:
            note = self._read(self.path, rel)
        except (OSError, NoteRefused):
            return None
        return note.body if note.key == source_key else None

    def _read(self, root: Path, rel: str) -> Note:
        """Parse the note at ``rel``, with its sidecar file when the vocabulary has one.

        A sidecar that is a symbolic link, or lies behind one, refuses the note (its row
        keeps its state): following it could read metadata from outside the vault.
        """
        sidecar: bytes | None = None
        where = self.vocabulary.sidecar_path(rel)
        if where is not None:
            base = os.path.realpath(root)
            lexical = os.path.normpath(os.path.join(base, where))
            if os.path.lexists(lexical) and os.path.realpath(lexical) != lexical:
                raise NoteRefused(
                    ProblemKind.LINK_OUTSIDE_ROOT,
                    f"sidecar {where} is a symbolic link or lies behind one; not read",
                )
            try:
                sidecar = _read_bytes(Path(lexical))
            except FileNotFoundError:
                sidecar = None
            except OSError as exc:
                raise NoteRefused(
                    ProblemKind.UNREADABLE, f"cannot read sidecar {where}: {_reason(exc)}"
                ) from exc
        return self.vocabulary.read(rel, _read_bytes(root / rel), sidecar=sidecar)

    def _doc_id(self, key: str) -> str:
        return f"{self.name}:{key}"

    def _problem(
        self,
        kind: ProblemKind,
        message: str,
        path: str | None,
        doc_id: str | None = None,
        *,
        field: str | None = None,
    ) -> SourceProblem:
        log.debug("vault %s: %s %s: %s", self.name, kind.value, path, message)
        if doc_id is not None:
            key: str | None = doc_id[len(self.name) + 1 :]
        elif path is not None and self.vocabulary.selects(path):
            key = self.vocabulary.default_key(path)  # a refused note: its default id
        else:  # a folder, or the whole source
            key = None
        return SourceProblem(
            source=self.name,
            kind=kind,
            message=message,
            path=path,
            doc_id=doc_id,
            source_key=key,
            field=field,
        )


# -- one note ------------------------------------------------------------------------------


def _read_bytes(path: Path) -> bytes:
    """Read a file without following a symlink swapped in since the walk."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


# -- small helpers -------------------------------------------------------------------------


def _reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _printable(rel: str) -> str:
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
