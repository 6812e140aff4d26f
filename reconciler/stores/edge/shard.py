"""Opening a Qdrant Edge shard, and Edge's failures said as the port's errors.

Edge raises bare ``Exception``s. Here, once: a shard another process (or another open in this
one) holds is ``IndexUnavailable`` saying so; any other failure to open it or of a read is
``IndexUnavailable`` (retry later), of a write ``IndexWriteError`` with ``points_written``, as
the qdrant-client adapter does; a write to a missing point says the next run skips it. A shard
is neither opened nor written below the free-space floor (``files.ensure_space``).
``reconciler.stores.edge.index`` wraps every call to the shard in ``reading`` or ``writing``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from reconciler.errors import ConfigError, IndexUnavailable, IndexWriteError
from reconciler.stores.edge.files import EDGE_CONFIG, ensure_space
from reconciler.stores.replacing import replace_text

__all__ = ["is_shard", "open_shard", "reading", "write_config", "writing"]

#: The prefix of ``write_config``'s temporary file in a shard's folder.
_CONFIG_TMP = ".edge_config-"
#: What Edge's error says when another open holds the shard, or a point is missing.
_LOCKED = "WouldBlock"
_MISSING_POINT = "No point with id"


def is_shard(path: Path) -> bool:
    """Whether a shard has been created at ``path``: it holds segments, or a configuration
    that is not empty. An empty ``edge_config.json`` with no segments is a creation killed
    before its configuration was written (by a build that did not write it atomically): no
    point can be there, and the shard is created again (``write_config``)."""
    if (path / "segments").exists():
        return True
    try:
        return (path / EDGE_CONFIG).stat().st_size > 0
    except OSError:
        return False


def write_config(path: Path, layout: Mapping[str, Any]) -> None:
    """Write a new shard's configuration into the folder ``path`` atomically: a temporary
    file, synced, renamed over ``edge_config.json``, so a process killed meanwhile leaves the
    folder with no configuration (not a shard: created again by the next run) or with all of
    it, never an empty file that Edge cannot load. Temporaries such a kill left are removed."""
    path.mkdir(parents=True, exist_ok=True)
    for left in path.glob(f"{_CONFIG_TMP}*"):
        with suppress(OSError):
            left.unlink()
    replace_text(path / EDGE_CONFIG, json.dumps(dict(layout)), prefix=_CONFIG_TMP)


def read_config(path: Path) -> dict[str, Any]:
    """A shard's configuration as Edge persists it (``edge_config.json`` in the folder
    ``path``); ``IndexUnavailable`` when it cannot be read."""
    try:
        layout: dict[str, Any] = json.loads((path / EDGE_CONFIG).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexUnavailable(f"cannot read the configuration of {path}: {exc}") from exc
    return layout


def check_dim(path: Path, dim: int) -> None:
    """``ConfigError`` unless the shard at ``path`` holds vectors of ``dim`` (a layout this
    build does not read passes: Edge checks each vector's size anyway)."""
    try:
        size = read_config(path)["vectors"][""]["size"]
    except (IndexUnavailable, KeyError, TypeError):
        return
    if size != dim:
        raise ConfigError([("ingest.dim", f"{dim} differs from the vector size {size} of {path}")])


def open_shard(path: Path, opener: Callable[[], qe.EdgeShard]) -> qe.EdgeShard:
    """The shard ``opener`` loads or creates at ``path``, its failure said as
    ``IndexUnavailable`` (held by another open, appeared meanwhile, or anything else)."""
    ensure_space(path, "be opened")
    try:
        shard: qe.EdgeShard = opener()
    except Exception as exc:
        text = str(exc)
        if _LOCKED in text:
            raise IndexUnavailable(
                f"the Qdrant Edge shard at {path} is open in another process (or "
                "already open in this one): Edge allows one open shard at a time. Stop the "
                "other reconciler, ingestion or reader and retry, or use a Qdrant server "
                '(index.engine = "qdrant" with index.url)'
            ) from exc
        if "already contains segment data" in text:
            raise IndexUnavailable(
                f"a Qdrant Edge shard appeared at {path} while this one was being "
                "created (another ingestion?); retry"
            ) from exc
        raise IndexUnavailable(
            f"cannot open the Qdrant Edge shard at {path}: {text}; check index.path, "
            "its permissions and free disk space"
        ) from exc
    return shard


@contextmanager
def reading(path: Path, action: str) -> Iterator[None]:
    """Map an Edge failure to ``IndexUnavailable`` (retry later)."""
    try:
        yield
    except (IndexUnavailable, TypeError, ValueError):
        raise
    except Exception as exc:
        raise IndexUnavailable(
            f"{action} on the Qdrant Edge shard {path} failed: {exc}; check the disk "
            "and the shard folder, then retry"
        ) from exc


@contextmanager
def writing(path: Path, what: str, *, written: int) -> Iterator[None]:
    """Map an Edge failure to ``IndexWriteError`` saying how far the writes got; refuse
    (``StoreFault``, nothing of this write sent) when the disk is too full to write."""
    ensure_space(path, "be written")
    try:
        yield
    except (IndexUnavailable, TypeError, ValueError):
        raise
    except Exception as exc:
        text = str(exc)
        if _MISSING_POINT in text:
            point = text.split(_MISSING_POINT, 1)[1].strip()
            detail = (
                f"point {point} does not exist (deleted after the scan?); the next run skips it"
            )
        else:
            detail = f"{text}; check the disk and the shard folder, then retry"
        raise IndexWriteError(f"{what} failed: {detail}", points_written=written) from exc
