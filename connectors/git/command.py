"""Runs git for the git connector, and only this module does: a repository's own configuration
must never get to run a program or prompt on the reconciler's behalf.

git runs with no shell, a timeout, a scrubbed environment (no ``GIT_DIR`` and the like inherited,
no terminal prompt) and ``-c`` settings that keep repository configuration from running
programs (no fsmonitor, no hooks, no signature checks, no ``ext::`` transport). A command that
cannot run, fails or times out raises ``SourceUnavailable`` naming what could not be read, with
any credentials in a URL redacted.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from connectors.base import SourceUnavailable

__all__ = ["Git", "redact"]

log = logging.getLogger(__name__)

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
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def redact(text: str) -> str:
    """``text`` with the user information of any URL in it (``user:token@``) replaced."""
    return _USERINFO.sub("***@", text)


class Git:
    """The git command for one source: its name in errors, its timeout, its environment."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout
        self._env = {k: v for k, v in os.environ.items() if k not in _LOCAL_ENV}
        self._env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")

    def run(
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
            reason = redact(done.stderr.decode("utf-8", "replace")).strip().splitlines()
            shown = reason[-1] if reason else f"exit code {done.returncode}"
            log.debug("git %s: %s failed: %s", self.name, args[:2], " | ".join(reason))
            raise SourceUnavailable(f"git {self.name!r}: cannot read {what}: {shown}")
        return done.stdout

    def read_blobs(self, git_dir: Path, oids: Iterable[str]) -> dict[str, bytes | None]:
        """Blob id -> content (None when missing), with one ``cat-file --batch``."""
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        out = self.run(
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
