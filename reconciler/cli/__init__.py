"""The ``reconciler`` command: thin. Parse, load settings, call one function, map errors to
exit codes (see ``EXIT_CODES``). One module a group of commands: ``reconcile`` (check, plan,
apply, run, repair), ``deployment`` (init, ingest, status, bootstrap, connectors),
``history`` (rollback, audit), ``retrieval`` (demo, eval), ``discovery`` (suggest),
``onboarding`` (config example, vocabulary check), ``serve``; what they share is in
``group`` and ``options``.

Start-up matters (every cron run and every ``--help`` pays it): the package imports only click
and light modules of its own; each command imports the operations it needs when it runs.
``tests/e2e/test_cli.py`` holds that line, ``python -m bench.startup`` measures it.
"""

from reconciler.cli import (
    deployment,
    discovery,
    history,
    onboarding,
    reconcile,
    retrieval,
    serve,
)
from reconciler.cli.group import (
    EXIT_CODES,
    EXIT_DRIFT,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliState,
    cli,
)

__all__ = [
    "EXIT_CODES",
    "EXIT_DRIFT",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "CliState",
    "cli",
    "deployment",
    "discovery",
    "history",
    "main",
    "onboarding",
    "reconcile",
    "retrieval",
    "serve",
]


def main() -> None:
    """Console-script entry point (``reconciler``, ``python -m reconciler.cli``). A ``serve``
    that has stopped ends the process without the interpreter's teardown
    (``serve.end_process``): it is to end within ``stop_grace``."""
    try:
        cli(prog_name="reconciler")
    except SystemExit as done:
        if serve.STOPPED.is_set():
            serve.end_process(done.code)
        raise
