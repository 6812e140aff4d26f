"""Blobs read a batch at a time: one ``git cat-file --batch`` for many documents, not one each.

A scan reads its documents' blobs in batches (``scan_batches``: its memory is a batch's, not
the repository's); ``read_body`` reads the document asked and the ones after it in the last
scan's order (``ReadAhead``), which is the order an ingestion asks for them in, so an
ingestion of N documents runs git N / ``READ_AHEAD`` times instead of N. A blob is named by
its content (its id), so a blob read ahead is the blob read alone; the batch is let go at the
next scan, and holds at most ``READ_AHEAD`` blobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from connectors.git.command import Git
from connectors.git.tree import Scope, sidecar_blobs

__all__ = ["READ_AHEAD", "SCAN_BATCH", "ReadAhead", "scan_batches"]

#: Documents a scan reads with one ``cat-file``.
SCAN_BATCH = 1024
#: Documents ``read_body`` reads with one ``cat-file``: the one asked and those after it.
READ_AHEAD = 64


def scan_batches(
    git: Git,
    git_dir: Path,
    selected: Mapping[str, str],
    sidecars: Mapping[str, str],
    scope: Scope,
) -> Iterator[tuple[str, Mapping[str, bytes | None]]]:
    """Each path of ``selected`` (path -> blob id), sorted, with the blobs read for its batch
    of ``SCAN_BATCH`` paths: theirs and their sidecars' (blob id -> content, None when
    missing)."""
    paths = sorted(selected)
    size = SCAN_BATCH
    for start in range(0, len(paths), size):
        batch = paths[start : start + size]
        wanted = {scope.vocabulary.sidecar_path(scope.rel(path)) for path in batch}
        theirs = {where: sidecars[where] for where in wanted if where and where in sidecars}
        oids = [selected[path] for path in batch]
        blobs = git.read_blobs(git_dir, [*oids, *sidecar_blobs(theirs)])
        for path in batch:
            yield path, blobs


class ReadAhead:
    """The blobs of the documents of the last scan, read ``READ_AHEAD`` at a time in its
    order."""

    def __init__(self, git: Git) -> None:
        self._git = git
        self._order: dict[str, int] = {}  # source key -> its place in the last scan
        self._keys: list[str] = []
        self._blobs: Mapping[str, tuple[Path, str, str]] = {}
        self._read: dict[tuple[Path, str], bytes | None] = {}  # the batch read last

    def scanned(self, blobs: Mapping[str, tuple[Path, str, str]], keys: Sequence[str]) -> None:
        """A scan took ``keys`` in this order; ``blobs``: every key's (git dir, blob id, path)."""
        self._blobs = blobs
        self._keys = list(keys)
        self._order = {key: n for n, key in enumerate(self._keys)}
        self._read = {}

    def blob(self, key: str) -> bytes | None:
        """The blob of the document ``key`` (None: missing from the repository); raises
        ``SourceUnavailable`` when git cannot read it."""
        git_dir, oid, _ = self._blobs[key]
        if (git_dir, oid) in self._read:
            return self._read[(git_dir, oid)]
        at = self._order.get(key)
        keys = [key] if at is None else self._keys[at : at + READ_AHEAD]
        oids = {self._blobs[k][1] for k in keys if self._blobs[k][0] == git_dir} | {oid}
        self._read = {}  # (a read that fails leaves no batch)
        found = self._git.read_blobs(git_dir, oids)
        self._read = {(git_dir, one): found.get(one) for one in oids}
        return self._read[(git_dir, oid)]
