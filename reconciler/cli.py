"""The ``reconciler`` command: thin. Parse, load settings, call one function, map errors to
exit codes (0 success / no drift, 2 drift found, 1 error, 3 refused by the guard)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import click

from connectors.base import ConnectorError
from reconciler import __version__
from reconciler.bootstrap import bootstrap as adopt_collection
from reconciler.bootstrap import render_bootstrap
from reconciler.checks import CHECKS
from reconciler.daemon import export_run_metrics
from reconciler.daemon import serve as run_daemon
from reconciler.engine import Report
from reconciler.errors import (
    ConfigError,
    IndexWriteError,
    LeaseBusy,
    ReconcilerError,
    SchemaError,
    StoreUnavailable,
)
from reconciler.evaluating import evaluate, render_eval, write_baseline
from reconciler.logs import configure
from reconciler.metrics import LiveMetrics
from reconciler.model import parse_instant
from reconciler.operations import (
    audit_entries,
    audit_verify,
    engine_options,
    gather_status,
    ingest_sources,
    initialise,
    reconcile,
    report_data,
    rollback_run,
)
from reconciler.rendering import (
    PER_KIND,
    progress_display,
    render_audit,
    render_ingest,
    render_report,
    render_rollback,
    render_status,
    table,
)
from reconciler.rollback import RollbackRefused
from reconciler.settings import Settings, load_settings
from reconciler.sharding import Shard
from reconciler.sources import describe as describe_connectors

log = logging.getLogger(__name__)

EXIT_OK, EXIT_ERROR, EXIT_DRIFT, EXIT_REFUSED = 0, 1, 2, 3


@dataclass
class CliState:
    """Global options shared by every command."""

    config: str | None
    fmt: str
    _settings: Settings | None = None
    #: ``--all`` / ``--limit N`` of a report (see ``output_options``).
    show_all: bool = False
    limit: int | None = None

    @property
    def settings(self) -> Settings:
        """The validated settings (loaded once, on first use)."""
        if self._settings is None:
            self._settings = load_settings(self.config)
        return self._settings

    @property
    def per_kind(self) -> int | None:
        """Findings (and writes) of each kind a text report shows; None: all of them."""
        return None if self.show_all else PER_KIND if self.limit is None else self.limit

    @property
    def progress(self) -> bool:
        """Whether to show progress: on a terminal's stderr, for text output only."""
        return self.fmt == "table" and sys.stderr.isatty()

    def emit(self, data: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> None:
        """Print ``data`` as JSON or through its table renderer."""
        if self.fmt == "json":
            click.echo(json.dumps(data, indent=2, default=str, sort_keys=False))
        else:
            click.echo(render(data))


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print an error for a person and exit."""
    click.secho(f"error: {message}", fg="red", err=True)
    sys.exit(code)


@contextmanager
def errors_mapped() -> Iterator[None]:
    """Map the program's own failures to a clear message and exit code 1."""
    try:
        yield
    except ConfigError as exc:
        fail(f"invalid configuration: {exc}")
    except SchemaError as exc:
        fail(str(exc))
    except StoreUnavailable as exc:
        fail(f"{exc} (check that the store is running and reachable, then retry)")
    except IndexWriteError as exc:
        fail(f"{exc}; the next run converges (every write is idempotent)")
    except ConnectorError as exc:
        fail(str(exc))
    except ReconcilerError as exc:
        fail(str(exc))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    envvar="RECONCILER_CONFIG",
    help="TOML config file [env RECONCILER_CONFIG; default ./reconciler.toml if present].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output for people (table) or machines (json).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log lines (stderr) as text or one JSON object each.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="warning",
    show_default=True,
    help="Log verbosity: info gives one summary per run, debug one line per action.",
)
@click.version_option(__version__, prog_name="reconciler")
@click.pass_context
def cli(ctx: click.Context, config: str | None, fmt: str, log_format: str, log_level: str) -> None:
    """Keep the version state of a RAG corpus true.

    Compares the system of record, the document table and the chunk payloads in the vector
    index, and repairs drift with payload-only writes (never re-embeds, never touches vectors
    or text). Every value of the config file can be overridden by RECONCILER_<SECTION>__<KEY>
    environment variables, e.g. RECONCILER_TABLE__URL.
    """
    configure(level=log_level, fmt=log_format)
    ctx.obj = CliState(config=config, fmt=fmt)


@cli.command()
@click.pass_obj
def init(obj: CliState) -> None:
    """Create or upgrade the document table schema and report the chunk index.

    Safe to run again: an up-to-date database is left alone, an older one is upgraded, one
    migrated by a newer build is refused.
    """
    with errors_mapped():
        data = initialise(obj.settings)
    obj.emit(data, lambda d: "\n".join(d["messages"]))


@cli.command()
@click.option("--source", "source_names", multiple=True, help="Only this source (repeatable).")
@click.option(
    "--outbox-only",
    is_flag=True,
    help="Only consume pending re-ingest requests; do not register new documents.",
)
@click.pass_obj
def ingest(obj: CliState, source_names: tuple[str, ...], outbox_only: bool) -> None:
    """Reference ingestion: chunk, embed and register new documents; consume the re-ingest outbox.

    This is the only command that embeds, and nothing in the reconciler calls it. Documents
    already registered are left as they are (their state is the reconciler's job). Exits 1 when
    a source could not be read; what was read is still ingested.
    """
    with errors_mapped(), progress_display(obj.progress) as progress:
        data = ingest_sources(
            obj.settings, names=list(source_names), outbox_only=outbox_only, progress=progress
        )
    obj.emit(data, render_ingest)
    if not data["ok"]:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.pass_obj
def status(obj: CliState) -> None:
    """Documents by state, chunks, families, sources and the last runs."""
    with errors_mapped():
        data = gather_status(obj.settings)
    obj.emit(data, render_status)


@cli.command("bootstrap")
@click.option("--dry-run", is_flag=True, help="Show the rows that would be created; write nothing.")
@click.pass_obj
def bootstrap_command(obj: CliState, dry_run: bool) -> None:
    """Adopt an existing collection: register a document row for every document id it holds.

    Reads payloads only (never vectors or text) and writes no payload: state, version, dates,
    class and family come from the payloads where valid, else the document is `unknown` in a
    family of its own; what could not be mapped is listed. The next `apply` writes the managed
    payload keys. [bootstrap] preset = langchain | llamaindex | native sets the payload layout.
    Running it again creates nothing.
    """
    with errors_mapped():
        data = adopt_collection(obj.settings, dry_run=dry_run)
    obj.emit(data, render_bootstrap)


# -- reconciliation -----------------------------------------------------------------------


def _instant(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_instant(value)
    except ValueError:
        raise click.BadParameter(f"not an ISO-8601 instant: {value!r}") from None


def _shard(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Shard | None:
    if value is None:
        return None
    try:
        return Shard.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by the reconciliation commands."""
    func = click.option(
        "--shard",
        callback=_shard,
        metavar="i/N",
        help="Reconcile only partition i of N (families by a stable hash).",
    )(func)
    func = click.option(
        "--now",
        callback=_instant,
        metavar="ISO-8601",
        help="Evaluate as of another instant (default: now).",
    )(func)
    func = click.option(
        "--check",
        "checks",
        multiple=True,
        type=click.Choice(CHECKS),
        help="Run only this check (repeatable; default: all).",
    )(func)
    return func


def _shown(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    state = ctx.find_object(CliState)
    assert state is not None
    if param.name == "show_all":
        state.show_all = value
    else:
        state.limit = value
    if state.show_all and state.limit is not None:
        raise click.UsageError("give --all or --limit N, not both")


def output_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """How much of a report the text output shows (JSON always has everything)."""
    func = click.option(
        "--limit",
        type=click.IntRange(min=0),
        metavar="N",
        expose_value=False,
        callback=_shown,
        help=f"Show N findings (and writes) of each kind [default: {PER_KIND}].",
    )(func)
    func = click.option(
        "--all",
        "show_all",
        is_flag=True,
        expose_value=False,
        callback=_shown,
        help="Show every finding and write.",
    )(func)
    return func


def _reconcile(obj: CliState, mode: str, **kwargs: Any) -> Report:
    with errors_mapped():
        options = engine_options(obj.settings, mode=mode, **kwargs)
        try:
            with progress_display(obj.progress) as progress:
                report = reconcile(obj.settings, options, progress=progress)
        except LeaseBusy as exc:
            if mode == "run":  # a cron run that loses the race skips quietly
                click.echo(f"skipped: {exc}", err=True)
                _export(obj, None)
                sys.exit(EXIT_OK)
            raise
        except ReconcilerError:
            if mode == "run":
                _export(obj, None)
            raise
    obj.emit(report_data(report), lambda data: render_report(data, per_kind=obj.per_kind))
    if mode == "run":
        _export(obj, report)
    return report


def _export(obj: CliState, report: Report | None) -> None:
    """A cron run leaves its metrics for node_exporter or a Pushgateway (if configured)."""

    def observe(live: LiveMetrics) -> None:
        if report is not None and report.finished_at is not None:
            total = (report.finished_at - report.started_at).total_seconds()
            live.observe(timings=report.timings, total=total)

    try:
        for target in export_run_metrics(obj.settings, observe):
            log.info("metrics written to %s", target)
    except Exception as exc:  # metrics must not turn a good run into a failed one
        click.echo(f"warning: could not export metrics: {exc}", err=True)


def _exit(report: Report, *, writing: bool) -> NoReturn:
    if report.refused:
        sys.exit(EXIT_REFUSED)
    if not writing and report.drift:
        sys.exit(EXIT_DRIFT)
    sys.exit(EXIT_OK)


@cli.command()
@run_options
@output_options
@click.pass_obj
def check(
    obj: CliState, checks: tuple[str, ...], now: datetime | None, shard: Shard | None
) -> None:
    """Run the checks and print the findings. Writes nothing.

    Exit 0 when nothing was found, 2 when drift was found.
    """
    _exit(_reconcile(obj, "check", checks=checks, now=now, shard=shard), writing=False)


@cli.command()
@run_options
@output_options
@click.pass_obj
def plan(obj: CliState, checks: tuple[str, ...], now: datetime | None, shard: Shard | None) -> None:
    """Print the findings and the exact writes that would follow. Writes nothing.

    Reads like a reviewed diff: each finding, then every row, payload, re-ingest request and
    index the repair would write, with counts. Exit 0 when there is nothing to do, 2 otherwise.
    """
    _exit(_reconcile(obj, "plan", checks=checks, now=now, shard=shard), writing=False)


@cli.command()
@run_options
@click.option("--force", is_flag=True, help="Go past the blast-radius guard (audited).")
@output_options
@click.pass_obj
def apply(
    obj: CliState, checks: tuple[str, ...], now: datetime | None, shard: Shard | None, force: bool
) -> None:
    """Repair drift: row updates, payload-only writes, re-ingest requests, indexes.

    Never embeds, never touches vectors or chunk text, never deletes a point. Refused (exit 3,
    nothing written) when the run would change more than guard.max_changed_fraction of the
    families or chunks, or a source that had documents returned none; --force overrides.
    """
    report = _reconcile(obj, "apply", checks=checks, now=now, shard=shard, force=force)
    _exit(report, writing=True)


@cli.command()
@run_options
@click.option("--force", is_flag=True, help="Go past the blast-radius guard (audited).")
@output_options
@click.pass_obj
def run(
    obj: CliState, checks: tuple[str, ...], now: datetime | None, shard: Shard | None, force: bool
) -> None:
    """One reconciliation cycle for cron: check, then apply under the guard.

    Exit 0 on success, 3 when the guard refused, 1 on error.
    """
    report = _reconcile(
        obj, "run", checks=checks, now=now, shard=shard, force=force, actor="schedule"
    )
    _exit(report, writing=True)


@cli.command()
@click.option("--family", "family", help="Repair this family (doc_family_id).")
@click.option("--doc", "doc_id", help="Repair this document (doc_id).")
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing.")
@click.option("--now", callback=_instant, metavar="ISO-8601", help="Evaluate as of this instant.")
@click.option("--force", is_flag=True, help="Go past the empty-source guard (audited).")
@output_options
@click.pass_obj
def repair(
    obj: CliState,
    family: str | None,
    doc_id: str | None,
    dry_run: bool,
    now: datetime | None,
    force: bool,
) -> None:
    """On-demand repair of one family or one document (all checks, scoped).

    The blast-radius fraction does not apply to a scoped repair; the empty-source rule does.
    """
    if bool(family) == bool(doc_id):
        raise click.UsageError("give exactly one of --family or --doc")
    report = _reconcile(
        obj,
        "plan" if dry_run else "repair",
        now=now,
        force=force,
        actor="repair",
        families=[family] if family else None,
        doc_id=doc_id,
    )
    _exit(report, writing=not dry_run)


@cli.command("rollback")
@click.argument("run_id")
@click.option(
    "--cascade",
    is_flag=True,
    help="First roll back, newest first, the later runs that changed the same documents.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be restored; write nothing.")
@click.pass_obj
def rollback_command(obj: CliState, run_id: str, cascade: bool, dry_run: bool) -> None:
    """Restore the fields a run changed on each row, and the chunks from the restored rows.

    A pointer flip, as a new audited run under the run's shard lease: no re-index. A run whose
    process died (interrupted) is rolled back from its audited intents. Refused (exit 3) when a
    later run changed the same documents, unless --cascade. Re-ingest requests and payload
    indexes are not undone.
    """
    with errors_mapped():
        try:
            data = rollback_run(obj.settings, run_id, cascade=cascade, dry_run=dry_run)
        except RollbackRefused as exc:
            fail(str(exc), EXIT_REFUSED)
    obj.emit(data, render_rollback)


@cli.group()
def audit() -> None:
    """The append-only, hash-chained audit log of every write."""


@audit.command("show")
@click.option("--run", "run_id", help="Only this run's entries.")
@click.option("--doc", "doc_id", help="Only entries about this document.")
@click.option("--limit", default=1000, show_default=True, help="At most this many entries.")
@click.pass_obj
def audit_show(obj: CliState, run_id: str | None, doc_id: str | None, limit: int) -> None:
    """Show audit entries, oldest first."""
    with errors_mapped():
        entries = audit_entries(obj.settings, run_id=run_id, doc_id=doc_id, limit=limit)
    obj.emit({"entries": entries}, render_audit)


@audit.command("verify")
@click.pass_obj
def audit_verify_command(obj: CliState) -> None:
    """Recompute the hash chain; exit 1 when any entry was altered or removed."""
    with errors_mapped():
        data = audit_verify(obj.settings)
    obj.emit(
        data,
        lambda d: (
            f"audit log intact: {d['entries']} entries"
            if d["ok"]
            else "audit log BROKEN:\n" + "\n".join(f"  {p}" for p in d["problems"])
        ),
    )
    if not data["ok"]:
        sys.exit(EXIT_ERROR)


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
    from reconciler.demo import run_demo  # noqa: PLC0415 (only this command needs it)

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
    with errors_mapped():
        data = evaluate(obj.settings, golden, k=k, baseline=baseline)
        if write_to is not None:
            write_baseline(write_to, data)
    obj.emit(data, render_eval)
    if not data["ok"]:
        sys.exit(EXIT_DRIFT)


@cli.command("connectors")
@click.pass_obj
def connectors_command(obj: CliState) -> None:
    """List the installed system-of-record connectors (entry points reconciler.connectors)."""
    rows = describe_connectors()
    obj.emit(
        {"connectors": rows},
        lambda d: table(
            ["type", "status", "provided by", "summary"],
            [[r["type"], r["status"], r["target"], r["summary"]] for r in d["connectors"]],
        ),
    )


@cli.command()
@click.option("--shard", callback=_shard, metavar="i/N", help="Reconcile only partition i of N.")
@click.option("--run-now", is_flag=True, help="Also run the full job once at start.")
@click.pass_obj
def serve(obj: CliState, shard: Shard | None, run_now: bool) -> None:
    """Run the scheduler daemon: full, ttl and dates jobs on their cron schedules (UTC).

    Serves /metrics and /healthz on metrics.listen (127.0.0.1:9464 by default). One runner at
    a time per shard: a job that finds the lease held by another process skips. SIGTERM or
    SIGINT stop it after the running job has finished and been recorded.
    """
    with errors_mapped():
        run_daemon(obj.settings, shard=shard, run_now=run_now)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="reconciler")


if __name__ == "__main__":  # pragma: no cover
    main()
