"""Options several commands share: a run's (``--check``, ``--now``, ``--shard``) and a
report's (``--all``, ``--limit N``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from reconciler.checks import CHECKS
from reconciler.cli.rendering import PER_KIND
from reconciler.model import parse_instant
from reconciler.rules.sharding import Shard

if TYPE_CHECKING:
    pass

from reconciler.cli.group import (
    CliState,
)

log = logging.getLogger(__name__)


def instant_option(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_instant(value)
    except ValueError:
        raise click.BadParameter(f"not an ISO-8601 instant: {value!r}") from None


def shard_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Shard | None:
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
        callback=shard_option,
        metavar="i/N",
        help="Reconcile only partition i of N (families by a stable hash).",
    )(func)
    func = click.option(
        "--now",
        callback=instant_option,
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
