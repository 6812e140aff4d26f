"""Resident-set measurements of the current process, in MiB.

``/proc/self/status`` (VmRSS, VmHWM) where it exists; ``getrusage`` elsewhere. VmHWM belongs
to the process's own address space, so a fresh ``exec`` starts from zero (``ru_maxrss`` may
keep a pre-exec high-water mark on Linux). Writing ``5`` to ``/proc/self/clear_refs`` resets
VmHWM to the current RSS, which lets a phase measure its own peak after opening the stores.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mib(field: str) -> float | None:
    try:
        text = _STATUS.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return None


def _maxrss_mib() -> float:
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return value / (1024.0 * 1024.0) if sys.platform == "darwin" else value / 1024.0


def rss() -> float:
    """The current resident set (falls back to the peak where the current one is unknown)."""
    value = _status_mib("VmRSS")
    return value if value is not None else _maxrss_mib()


def peak() -> float:
    """The resident-set high-water mark since start (or since the last ``reset_peak``)."""
    value = _status_mib("VmHWM")
    return value if value is not None else _maxrss_mib()


def reset_peak() -> bool:
    """Reset the high-water mark to the current RSS; False where the kernel does not allow it."""
    try:
        with _CLEAR_REFS.open("w") as handle:
            handle.write("5")
    except OSError:
        return False
    return _status_mib("VmHWM") is not None
