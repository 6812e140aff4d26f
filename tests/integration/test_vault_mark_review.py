"""A vault's mark and the rescan at a restart (``VaultWatch``): what a file's mtime says
must not lose a change made while ``serve`` was down."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.app.followers import VaultWatch
from reconciler.stores.sql.watermarks import WatchMark


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    for name in ("a.md", "b.md"):
        (root / name).write_text(f"# {name}\n", encoding="utf-8")
    old = time.time() - 3600
    for name in ("a.md", "b.md"):
        os.utime(root / name, (old, old))
    return root


def _restarted(root: Path, until: datetime) -> VaultWatch:
    """A watch started from the mark ``until`` (its observer not started: only the rescan at
    start is under test)."""
    watched = VaultWatch("hb", root)
    mark = WatchMark("hb", None, until, datetime.now(UTC))
    watched._since = watched._until = mark.changed_until
    watched._known = {"a.md", "b.md"}
    return watched


def test_a_future_mtime_does_not_push_the_mark_past_later_changes(tmp_path: Path) -> None:
    """A note whose mtime is ahead of the clock (copied from a machine whose clock is wrong,
    `touch -d`, an archive's dates) is reconciled; the mark must not take its date, or every
    change made while serve is down until then is missed at the next start."""
    root = _vault(tmp_path)
    watched = VaultWatch("hb", root)
    watched._since = watched._until = datetime.now(UTC) - timedelta(minutes=1)
    watched._known = {"a.md", "b.md"}
    ahead = time.time() + 365 * 86400
    os.utime(root / "b.md", (ahead, ahead))
    watched._seen(str(root / "b.md"))
    watched.done(watched.take(), {"b.md"}, ())
    _, until = watched.reached()
    assert until is not None
    assert until <= datetime.now(UTC) + timedelta(seconds=5), until  # not a year ahead
    # serve stops; a.md is edited meanwhile; serve starts again from the mark
    (root / "a.md").write_text("# a, edited\n", encoding="utf-8")
    again = _restarted(root, until)
    again._rescan_files(0.0)
    assert "a.md" in again.batch.paths


def test_a_file_put_in_place_with_an_old_mtime_while_serve_was_down_is_found(
    tmp_path: Path,
) -> None:
    """A sync tool (Syncthing, Obsidian Sync, rsync -a, `cp -p`, `mv` from another folder)
    writes a note with the mtime it had where it was edited, before the watch's mark: the
    rescan at start must still see it (its ctime says it changed here, now)."""
    root = _vault(tmp_path)
    time.sleep(0.02)  # (the files' ctime before the mark)
    mark = datetime.now(UTC)
    time.sleep(0.02)
    # serve stops at ``mark``; a.md arrives, edited elsewhere an hour ago
    (root / "a.md").write_text("# a, synced\n", encoding="utf-8")
    edited = time.time() - 3600
    os.utime(root / "a.md", (edited, edited))
    again = _restarted(root, mark)
    again._rescan_files(0.0)
    assert "a.md" in again.batch.paths
    assert "b.md" not in again.batch.paths
