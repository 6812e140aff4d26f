"""The CLI is thin: a command parses its options, calls one library function of
``reconciler.app`` (``operations``, ``deployment``, or a command module of its own:
``bootstrap``, ``demo``, ``evaluating``, ``searching``, ``daemon``, ``suggesting``,
``declaring``, ``splitting``, ``rekeying``, ``approving``), renders what it returns and maps errors to exit codes. So the
modules of ``reconciler/cli/`` import, of the project, only what is listed here: no store, no
wiring or lease, no stage of the engine, no writer. Read from the source (every import, those made inside a function or for type
checking too)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What a CLI module may import of ``reconciler`` and ``connectors`` (a module or a package
#: and everything in it), with why.
ALLOWED = {
    "reconciler.cli": "the group, the shared options, the other command modules and what draws "
    "a command's output (rendering, drawing, scorecard) or sets the log format (logs)",
    "reconciler.app.operations": "one library function a command",
    "reconciler.app.deployment": "`init`, `ingest`, `status`",
    "reconciler.app.history": "`rollback`, `audit show`, `audit verify`",
    "reconciler.app.auditing": "`audit served`, `audit history`",
    "reconciler.app.bootstrap": "`bootstrap`",
    "reconciler.app.splitting": "`split`",
    "reconciler.app.demo": "`demo`",
    "reconciler.app.evaluating": "`eval`",
    "reconciler.app.searching": "`search`",
    "reconciler.app.suggesting": "`suggest`",
    "reconciler.app.declaring": "`declare`",
    "reconciler.app.rekeying": "`rekey`",
    "reconciler.app.approving": "`apply --plan ID`, `plans`",
    "reconciler.app.surveying": "`vocabulary check`",
    "reconciler.app.daemon": "`serve`, and the metrics a cron `run` leaves",
    "reconciler.app.watch_reports": "drawing the watched sources `status` shows",
    "reconciler.errors": "mapping errors to exit codes",
    "reconciler.ports.source": "mapping a connector's errors to exit codes",
    "reconciler.settings": "loading the configuration the global options name",
    "reconciler.rules.sharding": "parsing --shard",
    "reconciler.model": "parsing --now",
    "reconciler.checks": "the names --check offers (the registry: no check module imported)",
    "reconciler.pipeline.values": "the Report a reconciliation returns (its type)",
    "reconciler.metrics": "the live metrics a cron run observes (their type)",
    # `connectors` lists the entry points: no store, no configuration needed; through
    # operations it would import the stores and the engine for nothing.
    "reconciler.sources": "`connectors`",
}


def project_imports(source: str) -> set[str]:
    """The modules of ``reconciler`` and ``connectors`` that ``source`` imports."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {
                f"{node.module}.{alias.name}" if node.module == "reconciler" else node.module
                for alias in node.names
            }
    return {m for m in found if m.split(".")[0] in ("reconciler", "connectors")}


def allowed(module: str) -> bool:
    return module == "reconciler.__version__" or any(
        module == name or module.startswith(name + ".") for name in ALLOWED
    )


def test_the_finder_sees_every_kind_of_import() -> None:
    source = (
        "import reconciler.stores.qdrant.index\n"
        "from reconciler.writing.rollback import RollbackRefused\n"
        "def f():\n    from reconciler.app.wiring import stores\n"
        "from reconciler import __version__\n"
        "from . import group\n"
    )
    assert project_imports(source) == {
        "reconciler.stores.qdrant.index",
        "reconciler.writing.rollback",
        "reconciler.app.wiring",
        "reconciler.__version__",
    }
    assert not allowed("reconciler.app.wiring")
    assert not allowed("reconciler.stores.sql.lease")
    assert allowed("reconciler.cli.group")


def test_the_cli_imports_only_the_library_and_what_it_maps_or_renders() -> None:
    beyond = {}
    for path in sorted((ROOT / "reconciler" / "cli").glob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        extra = sorted(
            m for m in project_imports(path.read_text(encoding="utf-8")) if not allowed(m)
        )
        if extra:
            beyond[module] = extra
    assert beyond == {}, "call a library function of reconciler.app instead"
