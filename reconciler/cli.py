"""The ``reconciler`` command: thin. Parse, load settings, call one function, map errors to
exit codes (0 success / no drift, 2 drift found, 1 error, 3 refused by the guard)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from connectors.base import ConnectorError
from reconciler import __version__
from reconciler.errors import (
    ConfigError,
    IndexWriteError,
    ReconcilerError,
    SchemaError,
    StoreUnavailable,
)
from reconciler.logs import configure
from reconciler.operations import gather_status, ingest_sources, initialise
from reconciler.rendering import render_ingest, render_status
from reconciler.settings import Settings, load_settings

log = logging.getLogger(__name__)

EXIT_OK, EXIT_ERROR, EXIT_DRIFT, EXIT_REFUSED = 0, 1, 2, 3


@dataclass
class Context:
    """Global options shared by every command."""

    config: str | None
    fmt: str
    _settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        """The validated settings (loaded once, on first use)."""
        if self._settings is None:
            self._settings = load_settings(self.config)
        return self._settings

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
    ctx.obj = Context(config=config, fmt=fmt)


@cli.command()
@click.pass_obj
def init(obj: Context) -> None:
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
def ingest(obj: Context, source_names: tuple[str, ...], outbox_only: bool) -> None:
    """Reference ingestion: chunk, embed and register new documents; consume the re-ingest outbox.

    This is the only command that embeds, and nothing in the reconciler calls it. Documents
    already registered are left as they are (their state is the reconciler's job). Exits 1 when
    a source could not be read; what was read is still ingested.
    """
    with errors_mapped():
        data = ingest_sources(obj.settings, names=list(source_names), outbox_only=outbox_only)
    obj.emit(data, render_ingest)
    if not data["ok"]:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.pass_obj
def status(obj: Context) -> None:
    """Documents by state, chunks, families, sources and the last runs."""
    with errors_mapped():
        data = gather_status(obj.settings)
    obj.emit(data, render_status)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="reconciler")


if __name__ == "__main__":  # pragma: no cover
    main()
