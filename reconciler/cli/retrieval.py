"""Commands that measure retrieval through ``default_filter()``: ``demo`` (a fictional
handbook, before and after a repair) and ``eval`` (a sliced scorecard on golden queries)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    pass

from reconciler.cli.group import (
    EXIT_DRIFT,
    CliState,
    cli,
    errors_mapped,
    fail,
)

log = logging.getLogger(__name__)


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reconciler-demo"),
    show_default=True,
    help="A new or empty folder for the demo deployment.",
)
@click.pass_obj
def demo(obj: CliState, directory: Path) -> None:
    """Tell the story on a fictional handbook, with real runs and real numbers.

    Builds an embedded deployment (SQLite, Qdrant local mode, a vault) in DIR, ingests a
    handbook whose replaced notes sit beside their successors, measures retrieval through
    default_filter() before and after `plan` + `apply`, and leaves a config to go on with.
    Finishes in seconds; nothing outside DIR is touched.
    """
    from reconciler.app.demo import run_demo

    with errors_mapped():
        try:
            data = run_demo(
                directory.resolve(), say=(lambda _line: None) if obj.fmt == "json" else click.echo
            )
        except FileExistsError as exc:
            fail(str(exc))
    if obj.fmt == "json":
        click.echo(json.dumps(data, indent=2, default=str))


@cli.command("eval")
@click.argument("golden", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--k",
    "k",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Score the top k documents (best chunk per document).",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Committed per-slice Latest@k; any drop below it is a regression.",
)
@click.option(
    "--write-baseline",
    "write_to",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write this run's per-slice Latest@k to FILE (to commit as the baseline).",
)
@click.pass_obj
def eval_command(
    obj: CliState, golden: Path, k: int, baseline: Path | None, write_to: Path | None
) -> None:
    """Score retrieval on a golden-query file, per slice, through default_filter().

    Per slice: cases, pass, fail, Latest@k and stale-cited (a hard zero); a slice with no
    cases is "uncovered". Exit 0 when all is well, 2 when a slice cites a document it must not
    or regresses against --baseline (for CI), 1 on error (e.g. a malformed golden file).
    """
    from reconciler.app.evaluating import evaluate, render_eval

    with errors_mapped():
        data = evaluate(obj.settings, golden, k=k, baseline=baseline, write_to=write_to)
    obj.emit(data, render_eval)
    if not data["ok"]:
        sys.exit(EXIT_DRIFT)
