"""A Qdrant Edge shard's configuration is written whole or not at all (issue 38's CI: a split
killed while it created its archive left an empty ``edge_config.json``, which Edge cannot load,
and the next run could not open the archive to finish the moves)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_default_filter import DOCUMENTS, chunk_records

from reconciler.stores import replacing
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.edge.shard import is_shard, write_config


def _source(folder: Path) -> EdgeChunkIndex:
    """A shard with a few chunks, whose configuration the others copy."""
    index = EdgeChunkIndex(folder / "source")
    index.ensure_collection(dim=4)
    index.upsert_chunks(r for d in DOCUMENTS[:2] for r in chunk_records(d))
    return index


def test_an_empty_configuration_without_segments_is_no_shard_and_is_created_again(
    tmp_path: Path,
) -> None:
    """What a build that wrote the file in place left when killed: an empty
    ``edge_config.json`` and no segments. No point can be there, so it is no shard: opened,
    it is absent; ``ensure_layout`` creates it, and it then holds what is copied into it."""
    source = _source(tmp_path)
    try:
        ids = sorted(str(c.point_id) for c in source.scroll())
        points = source.read_points(ids)
        half = tmp_path / "archive"
        half.mkdir()
        (half / "edge_config.json").write_bytes(b"")
        assert not is_shard(half)
        archive = EdgeChunkIndex(half)
        try:
            assert not archive.exists()
            archive.ensure_layout(source.vector_layout(), indexes=source.payload_indexes())
            assert archive.exists()
            assert archive.copy_points(points) == len(points)
            assert sorted(str(c.point_id) for c in archive.scroll()) == ids
        finally:
            archive.close()
    finally:
        source.close()


def test_an_empty_configuration_beside_segments_is_still_a_shard(tmp_path: Path) -> None:
    """Segments hold points: such a folder is a shard whatever its configuration says, so it
    is never created again over them (opening it fails, saying which shard)."""
    folder = tmp_path / "shard"
    (folder / "segments").mkdir(parents=True)
    (folder / "edge_config.json").write_bytes(b"")
    assert is_shard(folder)


def test_a_configuration_write_that_fails_leaves_no_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write stopped before its rename (here the rename fails) leaves neither a
    configuration nor its temporary file: the folder is no shard, and the next write makes it."""
    layout = {"vectors": {"": {"size": 4, "distance": "Cosine"}}}
    folder = tmp_path / "shard"

    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(replacing.os, "replace", fail)
    with pytest.raises(OSError, match="No space"):
        write_config(folder, layout)
    assert not is_shard(folder)
    assert sorted(p.name for p in folder.iterdir()) == []
    monkeypatch.undo()
    write_config(folder, layout)
    assert json.loads((folder / "edge_config.json").read_text("utf-8")) == layout


#: Writes shard configurations into new folders under argv[1] until killed.
_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from reconciler.stores.edge.shard import write_config
    root, layout = Path(sys.argv[1]), {"vectors": {"": {"size": 4, "distance": "Cosine"}},
                                       "pad": "x" * 2_000_000}
    print("ready", flush=True)
    n = 0
    while True:
        write_config(root / f"s{n:06d}", layout)
        n += 1
    """
)


@pytest.mark.parametrize("seed", range(8))
def test_a_configuration_write_killed_anywhere_is_whole_or_absent(
    tmp_path: Path, seed: int
) -> None:
    """SIGKILL a process that writes configurations one after another, at a random moment:
    every folder it touched is either no shard (no configuration, perhaps a temporary file the
    next write removes) or holds the whole configuration, never a part or an empty file."""
    rng = random.Random(seed)
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.05, 0.4))
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait(timeout=30)
        if writer.stdout is not None:
            writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL
    folders = sorted(tmp_path.iterdir())
    assert folders  # (it wrote some before the kill)
    for folder in folders:
        config = folder / "edge_config.json"
        if is_shard(folder):
            layout = json.loads(config.read_text("utf-8"))  # whole: it parses
            assert layout["vectors"] == {"": {"size": 4, "distance": "Cosine"}}
            assert len(layout["pad"]) == 2_000_000
        else:
            assert not config.exists()
            write_config(folder, {"vectors": {}})  # the next write makes it, leftovers gone
            assert [p.name for p in folder.iterdir()] == ["edge_config.json"]
