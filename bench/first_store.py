"""``python -m bench.first_store ARGS...``: the console command ``reconciler ARGS...``, which
also writes to stderr the CPU seconds (user + system, process start included) it had spent
when it first opened a store (``reconciler.app.wiring.open_table``, which every command that
touches the deployment calls first): its start-up, apart from the work. ``bench.startup``
runs ``repair --doc`` through it."""

from __future__ import annotations

import resource
import sys
from typing import Any

#: The line ``bench.startup`` reads on stderr.
MARK = "bench.first_store cpu="


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    """Run the console command with the first store opening timed."""
    cpu_at_start = _cpu()
    from reconciler.app import wiring  # noqa: PLC0415 - imported by every command that opens one
    from reconciler.cli import cli  # noqa: PLC0415

    original = wiring.open_table
    seen: list[float] = []

    def open_table(*args: Any, **kwargs: Any) -> Any:
        if not seen:
            seen.append(_cpu())
            sys.stderr.write(f"{MARK}{seen[0]:.4f} start={cpu_at_start:.4f}\n")
        return original(*args, **kwargs)

    wiring.open_table = open_table  # type: ignore[assignment]
    try:
        cli(args=argv, prog_name="reconciler")
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
