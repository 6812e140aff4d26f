"""A webhook's nudge (``Watch.nudge``): a flood of them (a signed delivery replayed, a
sender retrying in a loop) must not read the source at every tick of the watch."""

from __future__ import annotations

from pathlib import Path

from reconciler.app.followers import NUDGE_GAP, VaultWatch
from reconciler.app.polling import PolledWatch
from reconciler.model import SourceSnapshot


class _Counting:
    """A source that cannot tell whether it changed (no validator): read at every poll."""

    name = "reg"

    def __init__(self) -> None:
        self.scans = 0

    def scan(self) -> SourceSnapshot:
        self.scans += 1
        return SourceSnapshot(source="reg", documents=())


def test_a_flood_of_nudges_reads_a_polled_source_at_most_once_a_gap() -> None:
    source = _Counting()
    watched = PolledWatch("reg", source, interval=3600.0)  # type: ignore[arg-type]
    watched.start(None, set())
    watched.poll(0.0)  # the first read
    assert source.scans == 1
    for tick in range(1, 101):  # 10 s of the watch's ticks, a replayed hook at each
        watched.nudge()
        watched.poll(tick * 0.1)
    assert source.scans <= 1 + 10 / NUDGE_GAP + 1, source.scans
    assert source.scans >= 2  # (a nudge still reads it well before the hour)


def test_a_flood_of_nudges_rescans_a_vault_at_most_once_a_gap(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# a\n", encoding="utf-8")
    watched = VaultWatch("hb", tmp_path)
    watched._known = {"a.md"}
    rescans: list[float] = []
    watched._rescan_files = rescans.append  # type: ignore[method-assign]
    watched.poll(0.0)  # the start's rescan
    for tick in range(1, 101):
        watched.nudge()
        watched.poll(tick * 0.1)
    assert len(rescans) <= 1 + 10 / NUDGE_GAP + 1, len(rescans)
    assert len(rescans) >= 2
