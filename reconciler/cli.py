"""The ``reconciler`` command: thin. Parse, load settings, call one function, map errors to
exit codes (see ``EXIT_CODES``).

Start-up matters (every cron run and every ``--help`` pays it): this module imports only click
and light modules of its own; each command imports the operations it needs when it runs.
``tests/e2e/test_cli.py`` holds that line, ``python -m bench.startup`` measures it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from reconciler.errors import (
    AmbiguousRunId,
    CollectionMissing,
    ConfigError,
    IndexWriteError,
    LeaseBusy,
    ReconcilerError,
    SchemaError,
    StoreUnavailable,
)
from reconciler.logs import configure
from reconciler.model import CHECK_NAMES, parse_instant
from reconciler.ports.source import ConnectorError
from reconciler.rendering import PER_KIND, progress_display
from reconciler.sharding import Shard

if TYPE_CHECKING:
    from reconciler.metrics import LiveMetrics
    from reconciler.pipeline.values import Report
    from reconciler.settings import Settings

log = logging.getLogger(__name__)

EXIT_OK, EXIT_ERROR, EXIT_DRIFT, EXIT_REFUSED, EXIT_PARTIAL = 0, 1, 2, 3, 4
#: sysexits' EX_USAGE: the command line itself is wrong (bad option or value, no config).
EXIT_USAGE = 64
#: What each exit code means (``--help`` and the README print this table).
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success; no drift (check, plan)"),
    (EXIT_ERROR, "error: a store, a source, the config file, an unknown run id"),
    (EXIT_DRIFT, "drift found (check, plan); a failing slice (eval)"),
    (
        EXIT_REFUSED,
        "refused by the blast-radius guard, nothing written (apply, run, repair); "
        "a rollback under later runs",
    ),
    (
        EXIT_PARTIAL,
        "completed, but a source could not be read (run, apply, repair): its documents were "
        'not reconciled; run status "partial"',
    ),
    (EXIT_USAGE, "usage error: a bad option or value, an ambiguous run id, no config file"),
)

#: Where a newcomer without a config file is sent.
NO_CONFIG = (
    "no config file: give --config FILE, set RECONCILER_CONFIG or run from a folder holding "
    "reconciler.toml; to try it out run `reconciler demo` (it writes one), for your own "
    "deployment copy config/reconciler.example.toml"
)


@dataclass
class CliState:
    """Global options shared by every command (given before or after the verb)."""

    config: str | None
    fmt: str
    log_format: str = "text"
    log_level: str = "warning"
    _settings: Settings | None = None
    #: ``--all`` / ``--limit N`` of a report (see ``output_options``).
    show_all: bool = False
    limit: int | None = None

    @property
    def settings(self) -> Settings:
        """The validated settings (loaded once, on first use); refuses when there is no config
        file at all (a command run in an empty folder must not create a deployment there)."""
        if self._settings is None:
            if self.config is None and not _configured_here():
                fail(NO_CONFIG, EXIT_USAGE)
            from reconciler.settings import load_settings

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


def _configured_here() -> bool:
    """A ./reconciler.toml, or a deployment configured wholly by RECONCILER_<SECTION>__<KEY>
    variables."""
    if Path("reconciler.toml").is_file():
        return True
    return any(
        name.startswith("RECONCILER_") and "__" in name and name != "RECONCILER_TEST_PG"
        for name in os.environ
    )


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print an error for a person and exit."""
    click.secho(f"error: {message}", fg="red", err=True)
    sys.exit(code)


@contextmanager
def errors_mapped() -> Iterator[None]:
    """Map the program's own failures to a clear message and their exit code."""
    try:
        yield
    except ConfigError as exc:
        fail(f"invalid configuration: {exc}")
    except SchemaError as exc:
        fail(str(exc))
    except AmbiguousRunId as exc:
        fail(str(exc), EXIT_USAGE)
    except CollectionMissing as exc:
        fail(str(exc))  # not an outage: the message says what to do
    except StoreUnavailable as exc:
        fail(f"{exc} (check that the store is running and reachable, then retry)")
    except IndexWriteError as exc:
        fail(f"{exc}; the next run converges (every write is idempotent)")
    except ConnectorError as exc:
        fail(str(exc))
    except ReconcilerError as exc:
        fail(str(exc))


# -- options accepted before and after the verb ------------------------------------------------


def _global_options(*, after_verb: bool) -> list[click.Option]:
    """--config, --format, --log-format, --log-level: on the group (with defaults) and on every
    command (default None: only what is given there overrides what was given before)."""

    def default(value: str) -> str | None:
        return None if after_verb else value

    return [
        click.Option(
            ["--config", "config"],
            type=click.Path(dir_okay=False),
            envvar=None if after_verb else "RECONCILER_CONFIG",
            help="TOML config file [env RECONCILER_CONFIG; default ./reconciler.toml if present].",
        ),
        click.Option(
            ["--format", "fmt"],
            type=click.Choice(["table", "json"]),
            default=default("table"),
            show_default=not after_verb,
            help="Output for people (table) or machines (json).",
        ),
        click.Option(
            ["--log-format", "log_format"],
            type=click.Choice(["text", "json"]),
            default=default("text"),
            show_default=not after_verb,
            help="Log lines (stderr) as text or one JSON object each.",
        ),
        click.Option(
            ["--log-level", "log_level"],
            type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
            default=default("warning"),
            show_default=not after_verb,
            help="Log verbosity: info gives one summary per run, debug one line per action.",
        ),
    ]


_GLOBAL_NAMES = ("config", "fmt", "log_format", "log_level")


def _apply_global_options(ctx: click.Context) -> None:
    """Fold the global options given after the verb into the shared state."""
    given = {name: ctx.params.pop(name, None) for name in _GLOBAL_NAMES}
    state = ctx.find_object(CliState)
    if state is None:
        return
    changed = False
    for name, value in given.items():
        if value is not None:
            setattr(state, name, value)
            changed = changed or name in ("log_format", "log_level")
    if given["config"] is not None:
        state._settings = None
    if changed:
        configure(level=state.log_level, fmt=state.log_format)


def _as_usage(error: click.UsageError) -> None:
    """Usage errors exit 64 (click's 2 is "drift found" here)."""
    error.exit_code = EXIT_USAGE  # type: ignore[misc]  # click reads it from the instance


class Verb(click.Command):
    """A command that also accepts the global options after its name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_global_options(after_verb=True))

    def invoke(self, ctx: click.Context) -> Any:
        _apply_global_options(ctx)
        return super().invoke(ctx)


class Verbs(click.Group):
    """The command group: subcommands are ``Verb``s; usage errors exit 64."""

    command_class = Verb
    group_class = type  # subgroups are Verbs too (click: ``type`` means "this class")

    def __init__(self, *args: Any, root: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not root:
            self.params.extend(_global_options(after_verb=True))

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as error:
            _as_usage(error)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        if ctx.parent is not None:
            _apply_global_options(ctx)
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            _as_usage(error)
            raise


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from reconciler import __version__  # reads the installed metadata

    click.echo(f"reconciler, version {__version__}")
    ctx.exit()


def _epilog() -> str:
    import textwrap

    codes = "\n".join(
        textwrap.fill(meaning, width=76, initial_indent=f"  {code:>3}  ", subsequent_indent=" " * 7)
        for code, meaning in EXIT_CODES
    )
    return (
        "Options --config, --format, --log-format and --log-level may also follow the command "
        "(`reconciler status --format json`).\n\n"
        f"\b\nExit codes (the same for cron and scripts):\n{codes}\n\n"
        "\b\nShell completion (bash; for zsh or fish write zsh_source or fish_source):\n"
        '  eval "$(_RECONCILER_COMPLETE=bash_source reconciler)"'
    )


@click.group(
    cls=Verbs,
    root=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=_epilog(),
    params=_global_options(after_verb=False),
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show the version and exit.",
)
@click.pass_context
def cli(ctx: click.Context, config: str | None, fmt: str, log_format: str, log_level: str) -> None:
    """Keep the version state of a RAG corpus true.

    Compares the system of record, the document table and the chunk payloads in the vector
    index, and repairs drift with payload-only writes (never re-embeds, never touches vectors
    or text). Every value of the config file can be overridden by RECONCILER_<SECTION>__<KEY>
    environment variables, e.g. RECONCILER_TABLE__URL. New here? `reconciler demo` builds a
    working deployment in seconds.
    """
    configure(level=log_level, fmt=log_format)
    ctx.obj = CliState(config=config, fmt=fmt, log_format=log_format, log_level=log_level)


@cli.command()
@click.pass_obj
def init(obj: CliState) -> None:
    """Create or upgrade the document table schema and report the chunk index.

    Safe to run again: an up-to-date database is left alone, an older one is upgraded, one
    migrated by a newer build is refused.
    """
    from reconciler.operations import initialise

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
    from reconciler.operations import ingest_sources
    from reconciler.rendering import render_ingest

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
    from reconciler.operations import gather_status
    from reconciler.rendering import render_status

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
    from reconciler.bootstrap import bootstrap as adopt_collection
    from reconciler.bootstrap import render_bootstrap

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
        type=click.Choice(CHECK_NAMES),
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
    from reconciler.operations import engine_options, reconcile, report_data
    from reconciler.rendering import render_report

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

    from reconciler.daemon import export_run_metrics

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
    if writing and report.partial:
        sys.exit(EXIT_PARTIAL)
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
    Exit 4 when it completed but a source could not be read (run status "partial").
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

    Exit 0 on success, 3 when the guard refused, 4 when it completed but a source could not
    be read (run status "partial": that source's documents were not reconciled), 1 on error.
    Recorded with actor "cli" (the daemon's scheduled runs are "schedule").
    """
    report = _reconcile(obj, "run", checks=checks, now=now, shard=shard, force=force)
    _exit(report, writing=True)


@cli.command()
@click.option(
    "--family",
    "families",
    multiple=True,
    help="Repair this family (doc_family_id); repeat it to repair several in one run.",
)
@click.option("--doc", "doc_id", help="Repair this document (doc_id).")
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing.")
@click.option("--now", callback=_instant, metavar="ISO-8601", help="Evaluate as of this instant.")
@click.option("--force", is_flag=True, help="Go past the empty-source guard (audited).")
@output_options
@click.pass_obj
def repair(
    obj: CliState,
    families: tuple[str, ...],
    doc_id: str | None,
    dry_run: bool,
    now: datetime | None,
    force: bool,
) -> None:
    """On-demand repair of families or of one document (all checks, scoped).

    Only the scoped documents' points are read (through the doc_id filter), never the whole
    collection. The blast-radius fraction does not apply to a scoped repair; the empty-source
    rule does.
    """
    if bool(families) == bool(doc_id):
        raise click.UsageError("give exactly one of --family or --doc (--family may be repeated)")
    report = _reconcile(
        obj,
        "plan" if dry_run else "repair",
        now=now,
        force=force,
        actor="repair",
        families=list(families) or None,
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
    indexes are not undone. RUN_ID may be any unique prefix of the id (`audit show` and
    `status` list runs); start with --dry-run.
    """
    from reconciler.operations import rollback_run
    from reconciler.rendering import render_rollback
    from reconciler.writing.rollback import RollbackRefused

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
@click.option(
    "--run", "run_id", metavar="RUN_ID", help="Only this run's entries (any unique id prefix)."
)
@click.option("--doc", "doc_id", help="Only entries about this document.")
@click.option("--limit", default=1000, show_default=True, help="At most this many entries.")
@click.pass_obj
def audit_show(obj: CliState, run_id: str | None, doc_id: str | None, limit: int) -> None:
    """Show audit entries, oldest first."""
    from reconciler.operations import audit_entries
    from reconciler.rendering import render_audit

    with errors_mapped():
        entries = audit_entries(obj.settings, run_id=run_id, doc_id=doc_id, limit=limit)
    obj.emit({"entries": entries}, render_audit)


@audit.command("verify")
@click.pass_obj
def audit_verify_command(obj: CliState) -> None:
    """Recompute the hash chain; exit 1 when any entry was altered or removed."""
    from reconciler.operations import audit_verify

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
    from reconciler.demo import run_demo

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
    from reconciler.evaluating import evaluate, render_eval, write_baseline

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
    from reconciler.rendering import table
    from reconciler.sources import describe as describe_connectors

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
    from reconciler.daemon import serve as run_daemon

    with errors_mapped():
        run_daemon(obj.settings, shard=shard, run_now=run_now)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="reconciler")


if __name__ == "__main__":  # pragma: no cover
    main()
