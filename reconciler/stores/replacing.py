"""A small file a store keeps beside its data, replaced whole or not at all."""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path

__all__ = ["replace_text"]


def replace_text(path: Path, text: str, *, prefix: str) -> None:
    """Replace the file at ``path`` with ``text`` atomically: a temporary file named
    ``prefix…`` in the same folder (made if missing), synced, renamed over ``path``. A process
    killed meanwhile leaves the file as it was (or absent), never a part of it; a failure
    (``OSError``) removes the temporary file and is raised."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
