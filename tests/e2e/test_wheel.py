"""What a pip user gets (issue 34): the wheel carries the annotated example configuration that
``reconciler config example`` prints, and datasketch (which brings scipy, 143 MB) only with the
``discovery`` extra, never with the base install."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_the_example_config_and_leaves_datasketch_to_an_extra(
    tmp_path: Path,
) -> None:
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*build, "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("corpus_reconciler-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        example = archive.read("reconciler/settings/reconciler.example.toml").decode("utf-8")
        metadata = archive.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    shipped = (ROOT / "reconciler" / "settings" / "reconciler.example.toml").read_text("utf-8")
    assert example == shipped
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    sketch = [line for line in requires if "datasketch" in line]
    assert sketch
    assert all('extra == "' in line for line in sketch), sketch
    assert 'Requires-Dist: datasketch>=2.0; extra == "discovery"' in sketch
