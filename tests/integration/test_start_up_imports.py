"""What a command imports before it opens its first store (issue 38: start-up): numpy, which
only the check's tally and the discovery need, is loaded when a scan begins."""

from __future__ import annotations

import subprocess
import sys

# What ``bench.first_store`` imports before the console command opens a store: the CLI, the
# wiring that opens the stores, the operations each command calls.
BEFORE_THE_FIRST_STORE = (
    "import sys; import reconciler.cli, reconciler.app.wiring, reconciler.app.operations; "
    "print(' '.join(sorted(m for m in ('numpy', 'rich', 'pygments', 'qdrant_client', "
    "'qdrant_edge', 'torch') if m in sys.modules)))"
)


def test_a_command_starts_without_numpy_or_an_index_driver() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_THE_FIRST_STORE],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert done.stdout.split() == []
