"""The ``reconciler`` click group and what every command shares: the exit codes
(``EXIT_CODES``), the global options (before or after the verb), the state they make
(``CliState``), and errors mapped once to exit codes (``errors_mapped``, ``fail``)."""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from reconciler.cli.logs import configure
from reconciler.cli.rendering import PER_KIND
from reconciler.errors import (
    AmbiguousRunId,
    ArchiveRefused,
    CollectionMissing,
    ConfigError,
    IndexWriteError,
    PlanRefused,
    ReconcilerError,
    SchemaError,
    StoreUnavailable,
)
from reconciler.model import encoder_of
from reconciler.ports.source import ConnectorError

if TYPE_CHECKING:
    from reconciler.settings import Settings

log = logging.getLogger(__name__)

EXIT_OK, EXIT_ERROR, EXIT_DRIFT, EXIT_REFUSED, EXIT_PARTIAL = 0, 1, 2, 3, 4
#: sysexits' EX_USAGE: the command line itself is wrong (bad option or value, no config).
EXIT_USAGE = 64
#: What each exit code means (``--help`` and the README print this table).
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success; no drift (check, plan)"),
    (EXIT_ERROR, "error: a store, a source, the config file, an unknown run id"),
    (
        EXIT_DRIFT,
        "drift found (check, plan); a failing slice (eval); a mapped field read from no "
        "document (vocabulary check, and ingest on a fresh source); pairs to re-key (rekey "
        "--dry-run) or ambiguous ones left (rekey)",
    ),
    (
        EXIT_REFUSED,
        "refused by the blast-radius guard, what it held back saved as a plan (apply, run, "
        "repair, declare); a saved plan applied already, expired or moved past (apply --plan); "
        "a rollback under later runs; a split store's archive collection made by someone "
        "else (split); an ingestion of documents whose ids changed before `rekey` (ingest)",
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
    "deployment write the annotated example with `reconciler config example > reconciler.toml`"
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
                fail(NO_CONFIG, EXIT_USAGE, kind="no_config")
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
            # (written a megabyte at a time, not as one text: the JSON of a declare of
            # 100,000 proposals is 209 MB, and one text of it was copied twice more on its
            # way out: the line's end added, then encoded whole)
            batch: list[str] = []
            size = 0
            for piece in json_pieces(data):
                batch.append(piece)
                size += len(piece)
                if size >= _BATCH:
                    click.echo("".join(batch), nl=False)
                    batch, size = [], 0
            click.echo("".join(batch))
        else:
            click.echo(render(data))


#: The C encoder (``json.dumps`` with ``indent`` is the pure-Python one: a declare of 100,000
#: proposals spent seconds there).
_ENCODE = encoder_of(json.JSONEncoder(default=str))


#: How many characters ``emit`` writes at a time (``json_pieces``).
_BATCH = 1 << 20


def json_text(data: Any, indent: str = "") -> str:
    """``data`` as the JSON ``--format json`` prints: objects and lists laid out over lines
    (two spaces a level), except an object in a list, which is one line (a finding, a planned
    write, a declaration): the same values as ``json.dumps(data, indent=2)``, with a line a
    record; each line made by the C encoder."""
    return "".join(json_pieces(data, indent))


def json_pieces(data: Any, indent: str = "") -> Iterator[str]:
    """``json_text(data, indent)`` in pieces, in order (a line or less each)."""
    inner = indent + "  "
    if isinstance(data, dict) and data:
        first = True
        for key, value in data.items():
            yield f"{{\n{inner}{_key(key)}: " if first else f",\n{inner}{_key(key)}: "
            first = False
            yield from json_pieces(value, inner)
    elif isinstance(data, list | tuple) and data:
        first = True
        for value in data:
            yield f"[\n{inner}" if first else f",\n{inner}"
            first = False
            if isinstance(value, dict):
                yield _ENCODE(value)
            else:
                yield from json_pieces(value, inner)
    else:
        yield _ENCODE(data)
        return
    yield f"\n{indent}}}" if isinstance(data, dict) else f"\n{indent}]"


@contextmanager
def bulk_work() -> Iterator[None]:
    """A command that builds and keeps millions of objects (a declare of 100,000 proposals):
    the collector does not run while it works (``gc.disable``), and what outlives a
    collection someone asks for is set aside (``gc.freeze`` after it), so the collector looks
    at each kept object once at most. Its passes found next to nothing to free: what such a
    command builds it keeps, and its garbage goes by reference counts (at 100,000 proposals
    the passes were 17,800 young, 1,600 middle and one full pass, 4.6 s of 84, the full one
    1.8 s; with survivors set aside, 5,200 young passes, 1.1-1.2 s of 19 at 30,000, and the
    same peak RSS without them: docs/benchmarks.md, issue 36 round 11). A cycle that dies
    while it works waits for the end of the work, when the collector is enabled again (if it
    was) and what was set aside is handed back (``gc.unfreeze``: to the oldest generation),
    with what any caller had frozen."""
    enabled = gc.isenabled()
    gc.callbacks.append(_set_aside)
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.callbacks.remove(_set_aside)
        gc.unfreeze()


def _set_aside(phase: str, _info: dict[str, int]) -> None:
    """``bulk_work``'s collector callback: after each collection, what survived set aside."""
    if phase == "stop":
        gc.freeze()


def _key(key: Any) -> str:
    """An object's key as ``json.dumps`` writes it (a number, ``None`` or a bool as text)."""
    return _ENCODE(key) if isinstance(key, str) else _ENCODE({key: 0})[1:-4]


def _configured_here() -> bool:
    """A ./reconciler.toml, or a deployment configured wholly by RECONCILER_<SECTION>__<KEY>
    variables."""
    if Path("reconciler.toml").is_file():
        return True
    return any(
        name.startswith("RECONCILER_") and "__" in name and name != "RECONCILER_TEST_PG"
        for name in os.environ
    )


def exit_for(report: Any, *, writing: bool) -> NoReturn:
    """Exit with the code a run's ``Report`` calls for: 3 refused; a writing run 4 when a source
    could not be read, else 0; a read-only run 2 when it found drift or could not read a source
    (a scoped dry run has no source finding of its own to say so), else 0."""
    if report.refused:
        sys.exit(EXIT_REFUSED)
    if writing and report.partial:
        sys.exit(EXIT_PARTIAL)
    if not writing and (report.drift or report.unread_sources):
        sys.exit(EXIT_DRIFT)
    sys.exit(EXIT_OK)


#: The ``error`` of a JSON error object, by exit code, when the caller names none.
_ERROR_KINDS = {EXIT_ERROR: "error", EXIT_DRIFT: "refused", EXIT_REFUSED: "refused"}


def fail(message: str, code: int = EXIT_ERROR, *, kind: str | None = None) -> NoReturn:
    """Print an error and exit: for a person on stderr; under ``--format json`` one object on
    stdout, ``{"error": kind, "message": ..., "exit_code": code}``."""
    if _wants_json():
        error = kind or _ERROR_KINDS.get(code, "usage" if code == EXIT_USAGE else "error")
        click.echo(json.dumps({"error": error, "message": message, "exit_code": code}))
    else:
        click.secho(f"error: {message}", fg="red", err=True)
    sys.exit(code)


def _wants_json() -> bool:
    ctx = click.get_current_context(silent=True)
    state = ctx.find_object(CliState) if ctx is not None else None
    return state is not None and state.fmt == "json"


@contextmanager
def errors_mapped() -> Iterator[None]:
    """Map the program's own failures to a clear message and their exit code."""
    try:
        yield
    except ConfigError as exc:
        fail(f"invalid configuration: {exc}", kind="invalid_configuration")
    except SchemaError as exc:
        fail(str(exc), kind="schema")
    except AmbiguousRunId as exc:
        fail(str(exc), EXIT_USAGE, kind="ambiguous_run_id")
    except CollectionMissing as exc:
        fail(str(exc), kind="collection_missing")  # not an outage: the message says what to do
    except StoreUnavailable as exc:
        fail(
            f"{exc} (check that the store is running and reachable, then retry)",
            kind="store_unavailable",
        )
    except IndexWriteError as exc:
        fail(f"{exc}; the next run converges (every write is idempotent)", kind="index_write")
    except ArchiveRefused as exc:
        fail(str(exc), EXIT_REFUSED, kind="archive_refused")
    except PlanRefused as exc:
        fail(str(exc), EXIT_REFUSED, kind="plan_refused")
    except ConnectorError as exc:
        fail(str(exc), kind="source")
    except ReconcilerError as exc:
        fail(str(exc), kind=_kind_of(exc))


def _kind_of(exc: Exception) -> str:
    """``LeaseBusy`` -> ``lease_busy``."""
    name = type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


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
        if parent is None:  # (the whole command line: a usage error reads its --format)
            self._args = list(args)
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
            fmt = _last_format(getattr(self, "_args", []))
            if fmt == "json" or (fmt is None and _wants_json()):
                message = {"error": "usage", "message": error.format_message()}
                click.echo(json.dumps({**message, "exit_code": EXIT_USAGE}))
                sys.exit(EXIT_USAGE)
            raise


def _last_format(args: list[str]) -> str | None:
    """The last ``--format`` on the command line (before or after the command: the one after
    wins), for a usage error met before the options were all read."""
    found = None
    for n, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--format" and n + 1 < len(args):
            found = args[n + 1]
        elif arg.startswith("--format="):
            found = arg.split("=", 1)[1]
    return found


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
