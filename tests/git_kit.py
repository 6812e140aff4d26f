"""A git repository in a temp folder for the tests, isolated from the user's git configuration
(no global or system config, no prompt), with commit times the test chooses."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

__all__ = ["Repo"]


class Repo:
    """A git repository in a temp folder, isolated from the user's git configuration."""

    def __init__(self, root: Path, *, bare: bool = False) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("-c", "init.defaultBranch=main", "init", "-q", *(["--bare"] if bare else []))
        if not bare:
            self.git("config", "user.name", "Test Writer")
            self.git("config", "user.email", "writer@example.com")

    def git(self, *args: str, when: datetime | None = None) -> str:
        env = {
            **os.environ,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
        }
        if when is not None:
            stamp = f"@{int(when.timestamp())} +0000"
            env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        done = subprocess.run(
            ["git", *args], cwd=self.root, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout.strip()

    def write(self, rel: str, text: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return path

    def mv(self, old: str, new: str) -> None:
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)

    def commit(self, message: str = "change", *, when: datetime | None = None) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message, when=when)
        return self.git("rev-parse", "HEAD")

    def commit_tree(self, snapshot: Path, message: str, *, when: datetime | None = None) -> str:
        """Make the work tree exactly ``snapshot``'s files, and commit them."""
        for child in self.root.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        shutil.copytree(snapshot, self.root, dirs_exist_ok=True)
        return self.commit(message, when=when)
