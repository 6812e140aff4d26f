"""A full disk under a Qdrant Edge shard is a message, never SIGBUS (issue 24, item 7).

Edge maps its files (preallocated sparse; 32 MiB a WAL segment) and writes into them: on a
full disk such a write killed every command, ``check`` too, with SIGBUS (exit 135, no word).
Every open and every write of the shard now first checks the free space of its disk.

The real test runs the console command in a subprocess (a SIGBUS would take pytest with it) on
a real tmpfs filled to the brim, which needs root to mount; the guard's logic is also tested
in-process against a disk that reports how much is free.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment

from reconciler.errors import StoreFault
from reconciler.stores.edge import files as edge_files
from reconciler.stores.edge.index import EDGE_MIN_FREE, EdgeChunkIndex

MIB = 1024 * 1024


@contextlib.contextmanager
def tmpfs(where: Path, size_mib: int) -> Iterator[bool]:
    """Mount a tmpfs of ``size_mib`` at ``where``; yield whether it could be mounted."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def leave_free(folder: Path, mib: int) -> Path:
    """Fill the disk of ``folder`` until about ``mib`` MiB are left; return the filler."""
    filler = folder / "filler"
    room = shutil.disk_usage(folder).free - mib * MIB
    with filler.open("wb") as handle:
        handle.write(b"\0" * max(0, room))
    return filler


def command(deploy: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from reconciler.cli import main; main()",
            "--config",
            str(deploy.config),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RECONCILER_CONFIG": ""},
        check=False,
    )


def test_every_command_on_a_full_disk_says_so_and_none_dies(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    with tmpfs(disk, 160) as mounted:
        if not mounted:
            pytest.skip(
                "mounting a tmpfs needs root (CI runs as root; the guard's logic is "
                "tested in-process below)"
            )
        deploy = Deployment(disk / "deployment", engine="edge")
        for n in range(4):
            deploy.family(f"f{n}", 2)
        deploy.init_ingest()
        filler = leave_free(disk, 16)  # a shard opened here died with SIGBUS
        for verb in ("check", "run", "status"):
            done = command(deploy, verb)
            assert done.returncode == 1, (verb, done.returncode, done.stderr[-1500:])
            assert "disk full" in done.stderr
            assert "needs 64 MiB free" in done.stderr
            assert "Traceback" not in done.stderr
        filler.unlink()
        done = command(deploy, "check")
        assert done.returncode in {0, 2}, done.stderr[-1500:]


class FakeDisk:
    """``shutil.disk_usage`` for the shard's module, with as much free as a test says."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.real = shutil.disk_usage

    def __call__(self, path: Any) -> Any:
        real = self.real(path)
        return type(real)(real.total, real.total - self.free, self.free)


def test_the_shard_is_neither_opened_nor_written_below_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = EdgeChunkIndex(tmp_path / "shards" / "corpus")
    index.ensure_collection(dim=4)
    index.close()
    disk = FakeDisk(EDGE_MIN_FREE - 1)
    monkeypatch.setattr(edge_files.shutil, "disk_usage", disk)
    with pytest.raises(StoreFault, match=r"needs 64 MiB free to be opened"):
        EdgeChunkIndex(tmp_path / "shards" / "corpus")
    disk.free = EDGE_MIN_FREE
    opened = EdgeChunkIndex(tmp_path / "shards" / "corpus")
    disk.free = MIB
    with pytest.raises(StoreFault, match=r"1.0 MiB free .* needs 64 MiB free to be written"):
        opened.create_payload_index(key="version_state", schema="keyword")
    assert opened.update_calls == 0
    disk.free = EDGE_MIN_FREE
    opened.close()
