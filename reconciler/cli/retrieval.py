"""Commands that measure retrieval through ``default_filter()``: ``demo`` (a fictional
handbook, before and after a repair), ``eval`` (a sliced scorecard on golden queries) and
``search`` (what retrieval returns for one query, now or at another instant)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime
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
from reconciler.cli.options import instant_option

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
    from reconciler.app.evaluating import evaluate
    from reconciler.cli.scorecard import render_eval

    with errors_mapped():
        data = evaluate(obj.settings, golden, k=k, baseline=baseline, write_to=write_to)
    obj.emit(data, render_eval)
    if not data["ok"]:
        sys.exit(EXIT_DRIFT)


@cli.command()
@click.argument("query")
@click.option(
    "--as-of",
    "as_of",
    callback=instant_option,
    metavar="ISO-8601",
    help="What is (or was) in force at this instant instead of now.",
)
@click.option(
    "--historical",
    is_flag=True,
    help="Add superseded and retired versions (and a split store's archive); without "
    "--as-of, every version ever published.",
)
@click.option(
    "-k",
    "k",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="How many chunks to return.",
)
@click.pass_obj
def search(obj: CliState, query: str, as_of: datetime | None, historical: bool, k: int) -> None:
    """Show what retrieval returns for QUERY: what an assistant would cite.

    Embeds QUERY with the configured embedder ([ingest]) and searches the collection under
    the default filter, built at the instant of the search (or --as-of): each hit with its
    document id, version state and window. Quarantined chunks never come back; --historical
    takes the opt-in historical route (over a split store's archive too). Read-only.
    """
    from reconciler.app.searching import render_search, search_corpus

    with errors_mapped():
        data = search_corpus(obj.settings, query, k=k, as_of=as_of, include_historical=historical)
    obj.emit(data, render_search)
