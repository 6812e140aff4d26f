"""What a Qdrant Edge shard's files take of this machine: the page cache and the disk.

Edge maps its files and reads and writes them through the kernel, so two things the engine
itself never checks are checked here, with no driver imported:

* reading ahead (``read_ahead``): before a whole scroll or one of many documents, the shard's
  files but the vectors' are read through once, in order, so that a page cache that has let
  them go is refilled by one sequential read rather than a page at a time, unless they would
  take more than half of the memory available (``available_memory``);
* the free-space floor (``ensure_space``): a shard is neither opened nor written with less
  than ``EDGE_MIN_FREE`` on its disk, where Edge would die with SIGBUS rather than fail.

``reconciler.stores.edge.index`` calls both; they take paths, not a shard.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from pathlib import Path

from reconciler.errors import StoreFault

log = logging.getLogger(__name__)

__all__ = [
    "CGROUP_MEMORY",
    "EDGE_CONFIG",
    "EDGE_MIN_FREE",
    "MEMINFO",
    "MIB",
    "READ_AHEAD_BYTES_PER_DOC",
    "available_memory",
    "ensure_space",
    "read_ahead",
    "read_through",
]

#: A scroll of the whole shard, or one that selects at least one document per this many bytes
#: of the shard's files, first reads those files through (``read_ahead``), once an open. A
#: page cache that no longer holds the shard otherwise serves a scoped scroll's points, which
#: lie all over the files, a page at a time. On this project's bench machine (1M chunks, 600 MB
#: of files) the scroll of 11,661 documents took 3.3 s cold against 1.2 s warm, about 180 µs
#: more a document, while reading the files in order took 0.5-0.7 s: the reading pays from
#: about one document per 180 KiB of files; rounded up to 192 KiB, a little on the side of not
#: reading (about 3,100 documents there). A whole scroll reads every page anyway: in order
#: first, it took 8.9 s instead of 16.7.
READ_AHEAD_BYTES_PER_DOC = 192 * 1024
MIB = 1024 * 1024
#: Free space a shard's disk must have for the shard to be opened or written. Measured: a
#: shard opened on a disk with 16 MiB free died with SIGBUS (Edge rolled a 32 MiB WAL
#: segment and wrote it through its mapping); one segment and as much again for the writes.
EDGE_MIN_FREE = 64 * MIB
#: The file of a shard's configuration (Edge's name; Edge itself rewrites it atomically on load).
EDGE_CONFIG = "edge_config.json"
#: Bytes read at a time when reading the files through (the pages land in the page cache).
_READ_AHEAD_CHUNK = 1 << 20
#: Where Linux says how much memory is available, and a cgroup v2 container's own limit.
MEMINFO = "/proc/meminfo"
CGROUP_MEMORY = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current")


def read_ahead(shard: Path, *, documents: int | None, bytes_per_doc: int) -> int | None:
    """Before a whole scroll (``documents`` None) or one selecting that many documents, read
    the files of the shard at ``shard`` through, but the vectors' (payload-only work never reads
    them), so that the scroll finds their pages in the page cache. Not for a scroll of fewer
    documents than one per ``bytes_per_doc`` of the files, and not when the files would take
    more than half the memory available (they would push each other out before the scroll
    reached them). Sizes are the bytes on disk (Edge preallocates sparse files). Best effort:
    a file that cannot be read is skipped, and only regular files are read. Returns the bytes
    read, or ``None`` when nothing was to be read (no segments, too few documents, too little
    memory).

    (Read, not only advised: ``posix_fadvise(WILLNEED)`` queues the same reads without
    waiting, but pages nobody has touched are the first a reclaiming kernel takes back,
    and on the bench machine most were gone before the scroll came to them.)"""
    segments = shard / "segments"
    if not segments.is_dir():
        return None
    found: list[tuple[str, int]] = []
    for folder, subfolders, files in os.walk(segments):
        subfolders[:] = [d for d in subfolders if not d.startswith("vector_")]  # (vectors)
        for name in files:
            with contextlib.suppress(OSError):
                path = os.path.join(folder, name)
                status = os.stat(path)
                if stat.S_ISREG(status.st_mode):
                    found.append((path, min(status.st_size, status.st_blocks * 512)))
    total = sum(size for _path, size in found)
    if documents is not None and documents * bytes_per_doc < total:
        return None  # a few documents: their own pages cost less than the files
    room = available_memory()
    if room is None or total > room // 2:
        log.debug("edge read-ahead %s: %d byte(s), %s available: skipped", shard, total, room)
        return None
    chunk = bytearray(_READ_AHEAD_CHUNK)
    done = sum(read_through(path, chunk) for path, _size in found)
    log.debug("edge read-ahead %s: %d byte(s) read", shard, done)
    return done


def read_through(path: str, chunk: bytearray) -> int:
    """Read a file from start to end into ``chunk`` (over and over); the bytes read, 0 for a
    file that cannot be read."""
    done = 0
    with contextlib.suppress(OSError), open(path, "rb", buffering=0) as file:
        while read := file.readinto(chunk):
            done += read
    return done


def available_memory() -> int | None:
    """Bytes of memory available for new pages without swapping: Linux's ``MemAvailable``,
    else the free pages ``sysconf`` counts, and no more than what a cgroup v2 limit leaves
    this container; ``None`` where none of it is known."""
    room: int | None = None
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open(MEMINFO, encoding="ascii") as info,
    ):
        for line in info:
            if line.startswith("MemAvailable:"):
                room = int(line.split()[1]) * 1024
                break
    if room is None:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            room = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, ValueError):
        limit, used = (Path(p).read_text(encoding="ascii").strip() for p in CGROUP_MEMORY)
        if limit != "max":
            left = max(int(limit) - int(used), 0)
            room = left if room is None else min(room, left)
    return room


def ensure_space(shard: Path, action: str) -> None:
    """Refuse to open or write the shard at ``shard`` with less than ``EDGE_MIN_FREE`` on its
    disk (``StoreFault``, naming the disk; ``action``: "be opened", "be written").

    Edge maps its files (preallocated sparse: 32 MiB a WAL segment) and writes into them;
    on a full disk such a write does not fail, it kills the process with SIGBUS. So
    every command, ``check`` too, is refused here first, with a message naming the disk.
    """
    where = shard
    try:
        while not where.exists() and where != where.parent:
            where = where.parent
        free = shutil.disk_usage(where).free
    except OSError:
        return  # not knowable: Edge's own errors say what is wrong
    if free < EDGE_MIN_FREE:
        raise StoreFault(
            f"chunk index at {shard}: disk full ({free / MIB:.1f} MiB free on the disk "
            f"of {where}); a Qdrant Edge shard needs {EDGE_MIN_FREE // MIB} MiB free to "
            f"{action} (it writes into files it maps, and on a full disk the process would "
            "die with SIGBUS). Free space on that disk, then run again"
        )
