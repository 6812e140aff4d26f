"""Commands over what runs wrote: ``rollback RUN_ID`` and ``audit show | verify | served |
history``."""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from reconciler.cli.group import (
    EXIT_ERROR,
    EXIT_REFUSED,
    CliState,
    cli,
    errors_mapped,
    fail,
)
from reconciler.cli.options import instant_option

log = logging.getLogger(__name__)


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
    from reconciler.app.history import rollback_run
    from reconciler.cli.rendering import render_rollback
    from reconciler.errors import RollbackRefused

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
    from reconciler.app.history import audit_entries
    from reconciler.cli.rendering import render_audit

    with errors_mapped():
        entries = audit_entries(obj.settings, run_id=run_id, doc_id=doc_id, limit=limit)
    obj.emit({"entries": entries}, render_audit)


@audit.command("verify")
@click.pass_obj
def audit_verify_command(obj: CliState) -> None:
    """Recompute the hash chain; exit 1 when any entry was altered or removed.

    Says which protection was in force: keyed (RECONCILER_AUDIT_KEY or
    RECONCILER_AUDIT_KEY_FILE), anchored (RECONCILER_AUDIT_ANCHOR), or unkeyed (whoever can
    write the table can rewrite the chain unseen; docs/auditing.md).
    """
    from reconciler.app.history import audit_verify

    with errors_mapped():
        data = audit_verify(obj.settings)
    obj.emit(data, _verified)
    if not data["ok"]:
        sys.exit(EXIT_ERROR)


@audit.command("seal")
@click.pass_obj
def audit_seal_command(obj: CliState) -> None:
    """Append one entry to the chain, keyed when an audit key is given, then verify it.

    Run it once after setting RECONCILER_AUDIT_KEY (or RECONCILER_AUDIT_KEY_FILE) on a
    deployment whose log predates the key: from its entry on, the chain is keyed, and
    `audit verify` requires it to end keyed. Exit 1 when the chain does not verify.
    """
    from reconciler.app.history import audit_seal

    with errors_mapped():
        data = audit_seal(obj.settings)
    obj.emit(data, lambda d: f"sealed at entry {d['entries']} ({d['head'][:12]}); " + _verified(d))
    if not data["ok"]:
        sys.exit(EXIT_ERROR)


def _verified(d: dict[str, Any]) -> str:
    """What ``audit verify`` (and ``seal``) found, and which protection was in force."""
    found = (
        f"audit log intact: {d['entries']} entries"
        if d["ok"]
        else "audit log BROKEN:\n" + "\n".join(f"  {p}" for p in d["problems"])
    )
    return found + "".join(f"\nprotection: {p}" for p in d["protection"])


def _scope(families: tuple[str, ...], docs: tuple[str, ...]) -> None:
    if not families and not docs:
        raise click.UsageError(
            "name what to answer for: --family F or --doc D (repeatable), or --all for the "
            "whole corpus (streamed, with a summary)"
        )


def _served_corpus(obj: CliState, at: datetime | None) -> None:
    """``audit served --all``: the documents written as they are answered, then the summary."""
    import json

    from reconciler.app.auditing import audit_served_corpus

    with errors_mapped():
        answer = audit_served_corpus(obj.settings, at=at)
        if obj.fmt == "json":
            click.echo(json.dumps(answer.head)[:-1] + ', "documents": [', nl=False)
            for n, document in enumerate(answer.documents()):
                click.echo(("," if n else "") + "\n" + json.dumps(document), nl=False)
            click.echo("\n], " + json.dumps(answer.tail())[1:])
            return
        click.echo(f"what default_filter(as_of={answer.head['at']}) admitted, every document")
        for d in answer.documents():
            chunks = d["chunks"]
            total = chunks["served"] + chunks["not_served"] + chunks["undetermined"]
            click.echo(
                f"{d['family']}  {d['doc_id']}  v{d['version']}  {d['version_state']}  "
                f"served: {d['served']}  {chunks['served']}/{total} chunk(s)"
            )
        ended = answer.tail()
        summary = ended["summary"]
        click.echo(
            f"\n{summary['documents']} document(s): "
            + ", ".join(f"{n} {what}" for what, n in summary["served"].items())
            + "; chunks: "
            + ", ".join(f"{n} {what}" for what, n in summary["chunks"].items())
        )
        click.echo("this answer rests on:\n" + "\n".join(f"  - {b}" for b in ended["basis"]))


def _at_option(ctx: click.Context, param: click.Parameter, value: str) -> datetime | None:
    """An ISO-8601 instant, or ``now`` (``None``: the clock's, when the answer is made)."""
    if value.strip().lower() == "now":
        return None
    return instant_option(ctx, param, value)


@audit.command("served")
@click.option(
    "--at",
    "at",
    required=True,
    callback=_at_option,
    metavar="ISO-8601|now",
    help="The instant asked about (naive means UTC), e.g. when an answer was generated.",
)
@click.option("--family", "families", multiple=True, help="A family to answer for (repeatable).")
@click.option("--doc", "docs", multiple=True, help="A document to answer for (repeatable).")
@click.option(
    "--all",
    "whole",
    is_flag=True,
    help="Answer for every document the log wrote, streamed a batch at a time, with a summary.",
)
@click.pass_obj
def audit_served_command(
    obj: CliState,
    at: datetime | None,
    families: tuple[str, ...],
    docs: tuple[str, ...],
    whole: bool,
) -> None:
    """What default_filter(as_of=AT) admitted at an instant, from the audit log alone.

    For every chunk of the families (or documents) named: the payload it held at AT as the
    hash-chained audit log recorded it (the chain is verified first; a broken chain, or an
    instant before the log's first entry, is an error, exit 1), and so whether the default
    filter, judging that payload's effective window at AT, admitted it. A chunk the log is
    unsure of at AT (a write under way, a change made by another tool, an ingestion that did
    not record its payload) is 'undetermined', and the output says what the answer rests on.
    The chunk index is not read. --all answers for the whole corpus: one line a document
    (one JSON object a document, inside the answer's "documents"), written as they are
    answered, then the summary; memory follows a batch of documents, not the corpus.
    """
    from reconciler.app.auditing import audit_served
    from reconciler.cli.drawing import render_served

    if whole:
        if families or docs:
            raise click.UsageError("--all answers for every document: give no --family/--doc")
        _served_corpus(obj, at)
        return
    _scope(families, docs)
    with errors_mapped():
        data = audit_served(obj.settings, at=at, families=families, docs=docs)
    obj.emit(data, render_served)


@audit.command("history")
@click.option("--family", "families", multiple=True, help="A family to draw (repeatable).")
@click.option("--doc", "docs", multiple=True, help="A document to draw (repeatable).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    metavar="FILE.svg",
    help="Also draw the timeline (one bar a version's window, coloured by state) to FILE.svg.",
)
@click.pass_obj
def audit_history_command(
    obj: CliState, families: tuple[str, ...], docs: tuple[str, ...], output: Path | None
) -> None:
    """Each version's state and effective window over time, from the audit log alone.

    A table of every period of each version of the families (or documents) named: what its
    chunks held, from when to when, and which run changed it; then when the default filter
    admitted it. -o FILE.svg draws it: a lane a version, a bar a period over its effective
    window, coloured by state, and a band where it was served. The chain is verified first
    (exit 1 when broken).
    """
    from reconciler.app.auditing import audit_history
    from reconciler.cli.drawing import history_svg, render_history

    _scope(families, docs)
    if output is not None and output.suffix.lower() != ".svg":
        raise click.BadParameter(
            f"{output}: the timeline is drawn as SVG; name a .svg file", param_hint="-o"
        )
    with errors_mapped():
        data = audit_history(obj.settings, families=families, docs=docs)
    if output is not None:
        try:
            output.write_text(history_svg(data), encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {output}: {exc}")
        log.info("timeline written to %s", output)
    obj.emit(data, render_history)
