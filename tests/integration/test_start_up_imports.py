"""What a command imports before it opens its first store (issue 38: start-up): numpy, which
only the check's tally and the discovery need, is loaded when a scan begins; SQLAlchemy when
the document table is opened (the settings check its URL with their own parse, held to
SQLAlchemy's in ``test_table_url.py``); watchdog by ``watch`` and ``status`` only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# What ``bench.first_store`` imports before the console command opens a store: the CLI, the
# wiring that opens the stores, the operations each command calls.
BEFORE_THE_FIRST_STORE = (
    "import sys; import reconciler.cli, reconciler.app.wiring, reconciler.app.operations; "
    "print(' '.join(sorted(m for m in ('numpy', 'rich', 'pygments', 'qdrant_client', "
    "'qdrant_edge', 'torch', 'sqlalchemy', 'watchdog') if m in sys.modules)))"
)
# Loading a configuration (every command's first step), the example file with every section.
LOADING_SETTINGS = (
    "import sys; from pathlib import Path; from reconciler.settings import load_settings; "
    "load_settings(Path(sys.argv[1]), environ={}); "
    "print(' '.join(sorted(m for m in ('sqlalchemy', 'numpy') if m in sys.modules)))"
)


def test_a_command_starts_without_numpy_sqlalchemy_or_an_index_driver() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_THE_FIRST_STORE],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert done.stdout.split() == []


def test_loading_the_settings_imports_no_sqlalchemy() -> None:
    example = Path(__file__).resolve().parents[2] / "reconciler/settings/reconciler.example.toml"

    done = subprocess.run(
        [sys.executable, "-c", LOADING_SETTINGS, str(example)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert done.stdout.split() == []
