"""Which git directory a git source reads, and which commit: a local repository as it is, or a
bare mirror of a clone URL (cloned into a cache folder on first use, fetched on every scan), and
the tip of the tracked branch.

An unreadable source is never an empty one: a missing path, something that is not a
repository, a cache folder that is not this connector's mirror, a clone URL that cannot be
reached, a failed fetch, a branch that does not exist all raise ``SourceUnavailable``.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

from connectors.base import SourceUnavailable
from connectors.git.command import Git, redact

__all__ = ["default_cache_dir", "open_repository", "tip"]

log = logging.getLogger(__name__)


def default_cache_dir(name: str) -> Path:
    """Where a url source keeps its bare mirror unless ``options.cache_dir`` says otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "corpus-reconciler" / "git" / name


def open_repository(
    git: Git, *, path: Path | None, url: str | None, cache_dir: Path | None
) -> Path:
    """The git directory to read: the local repository's, or the refreshed mirror."""
    if path is not None:
        return _local(git, path)
    assert url is not None
    assert cache_dir is not None
    return _mirror(git, url, cache_dir)


def tip(git: Git, git_dir: Path, branch: str | None) -> tuple[str, str]:
    """(ref, commit id) of the tracked branch (``HEAD``'s when ``branch`` is None)."""
    if branch is not None:
        ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
    else:
        out = git.run(
            "symbolic-ref",
            "--quiet",
            "HEAD",
            git_dir=git_dir,
            what="HEAD (detached? set options.branch)",
        )
        ref = os.fsdecode(out.strip())
    out = git.run(
        "rev-parse",
        "--verify",
        "--quiet",
        f"{ref}^{{commit}}",
        git_dir=git_dir,
        what=f"branch {ref} (missing, or no commit yet)",
    )
    return ref, out.decode("ascii").strip()


def _local(git: Git, path: Path) -> Path:
    try:
        if not path.exists():
            raise SourceUnavailable(f"git {git.name!r}: {path} does not exist")
        if not path.is_dir():
            raise SourceUnavailable(f"git {git.name!r}: {path} is not a directory")
        root = path.resolve(strict=True)
    except OSError as exc:
        raise SourceUnavailable(f"git {git.name!r}: cannot read {path}: {exc}") from exc
    # The ceiling stops discovery at the folder itself: a plain folder inside some other
    # repository is "not a repository", never that other repository.
    out = git.run(
        "-C",
        str(root),
        "rev-parse",
        "--absolute-git-dir",
        what=f"{path} as a repository",
        env={"GIT_CEILING_DIRECTORIES": str(root.parent)},
    )
    return Path(os.fsdecode(out.strip()))


def _mirror(git: Git, url: str, cache: Path) -> Path:
    """The bare mirror of ``url``: cloned on first use, fetched on every scan."""
    try:
        fresh = not cache.exists() or (cache.is_dir() and not any(cache.iterdir()))
    except OSError as exc:
        raise SourceUnavailable(f"git {git.name!r}: cannot read {cache}: {exc}") from exc
    if fresh:
        _clone(git, url, cache)
    not_mirror = SourceUnavailable(
        f"git {git.name!r}: {cache} is not a mirror made by this connector; "
        "point options.cache_dir elsewhere or delete it"
    )
    try:
        bare = git.run("rev-parse", "--is-bare-repository", git_dir=cache, what=f"{cache}")
        mirror = git.run(
            "config", "--get", "remote.origin.mirror", git_dir=cache, what=f"{cache}", ok=(1,)
        )
    except SourceUnavailable as exc:
        raise not_mirror from exc
    if bare.strip() != b"true" or mirror.strip() != b"true":
        raise not_mirror
    origin = git.run(
        "config", "--get", "remote.origin.url", git_dir=cache, what=f"{cache}", ok=(1,)
    )
    if os.fsdecode(origin.strip()) != url:
        log.info("git %s: the mirror in %s now follows %s", git.name, cache, redact(url))
        git.run(
            "remote",
            "set-url",
            "origin",
            url,
            git_dir=cache,
            what="re-pointing the mirror",
        )
        fresh = False
    if not fresh:
        git.run(
            "fetch",
            "--prune",
            "--quiet",
            "origin",
            git_dir=cache,
            what=f"fetching {redact(url)}",
        )
    return cache


def _clone(git: Git, url: str, cache: Path) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceUnavailable(f"git {git.name!r}: cannot create {cache}: {exc}") from exc
    staging = cache.parent / f".{cache.name}.clone-{uuid.uuid4().hex[:12]}"
    log.info("git %s: cloning %s into %s", git.name, redact(url), cache)
    try:
        git.run(
            "clone",
            "--mirror",
            "--quiet",
            "--",
            url,
            str(staging),
            what=f"cloning {redact(url)}",
        )
        try:
            staging.rename(cache)  # atomic; replaces an empty folder
        except OSError:
            if not (cache / "HEAD").exists():  # not a concurrent clone that won the race
                raise
    except OSError as exc:
        raise SourceUnavailable(f"git {git.name!r}: cannot create {cache}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
