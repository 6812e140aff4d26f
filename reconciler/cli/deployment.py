"""Commands that set up and look at a deployment: ``init``, ``ingest``, ``status``,
``bootstrap`` (adopt an existing collection), ``split`` (into a main collection and an
archive) and ``connectors``."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import click

from reconciler.cli.rendering import progress_display

if TYPE_CHECKING:
    pass

from reconciler.cli.group import (
    EXIT_DRIFT,
    EXIT_ERROR,
    EXIT_REFUSED,
    CliState,
    cli,
    errors_mapped,
    fail,
)

log = logging.getLogger(__name__)


@cli.command()
@click.pass_obj
def init(obj: CliState) -> None:
    """Create or upgrade the document table schema and report the chunk index.

    Safe to run again: an up-to-date database is left alone, an older one is upgraded, one
    migrated by a newer build is refused.
    """
    from reconciler.app.deployment import initialise

    with errors_mapped():
        data = initialise(obj.settings)
    obj.emit(data, lambda d: "\n".join(d["messages"]))


@cli.command()
@click.option("--source", "source_names", multiple=True, help="Only this source (repeatable).")
@click.option(
    "--outbox-only",
    is_flag=True,
    help="Only consume pending re-ingest requests; do not register new documents nor "
    "re-ingest edited ones.",
)
@click.option(
    "--accept-unread",
    is_flag=True,
    help="Ingest a fresh source even when its configuration reads nothing of a mapped field.",
)
@click.pass_obj
def ingest(
    obj: CliState, source_names: tuple[str, ...], outbox_only: bool, accept_unread: bool
) -> None:
    """Reference ingestion: chunk, embed and register new documents; consume the re-ingest outbox.

    This is the only command that embeds, and nothing in the reconciler calls it. Documents
    already registered are re-embedded only when their text changed, and their state is left as
    it is (that is the reconciler's job): a source that moved is caught up by `ingest` then
    `run`. A source none of whose documents is registered yet is first read dry (`reconciler
    vocabulary check`): when its configuration reads nothing of a field it maps, nothing is
    ingested.

    \b
    Exit codes:
      0  ingested
      1  error; or a source could not be read (what was read is still ingested)
      2  refused: a fresh source's configuration reads nothing of a field it maps (the
         message names it; --accept-unread ingests anyway)
      3  refused: the source names registered documents with new ids (a configuration
         change); nothing of that source is ingested: run `reconciler rekey` first
     64  usage error
    """
    from reconciler.app.deployment import ingest_sources
    from reconciler.cli.rendering import render_ingest
    from reconciler.errors import RekeyPending, VocabularyUnread

    with errors_mapped(), progress_display(obj.progress) as progress:
        try:
            data = ingest_sources(
                obj.settings,
                names=list(source_names),
                outbox_only=outbox_only,
                progress=progress,
                accept_unread=accept_unread,
            )
        except VocabularyUnread as exc:
            fail(str(exc), EXIT_DRIFT, kind="vocabulary_unread")
        except RekeyPending as exc:
            fail(str(exc), EXIT_REFUSED, kind="rekey_pending")
    obj.emit(data, render_ingest)
    if not data["ok"]:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.option("--source", "source_names", multiple=True, help="Only this source (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show the pairs; write nothing.")
@click.pass_obj
def rekey(obj: CliState, source_names: tuple[str, ...], dry_run: bool) -> None:
    """Give registered documents the new ids their source now names them by.

    After a configuration change that changes ids (a vault's ids read from a header instead
    of the path, say), each registered document whose id the source no longer holds is paired
    with the document the source holds at its last path, one to one; a pair that cannot be
    decided (two old ids at one path, a new id already registered) is listed and left. Each
    pair is renamed in place, in one audited run under the whole corpus's lease: its row, its
    identity, the links and requests that name it, and its chunks' doc_id and chunk_id
    (payload-only writes: nothing is embedded). `reconciler rollback RUN_ID` gives the old
    ids back. Until then `ingest` refuses those new ids and `run` reports each pair
    (family/rekey_pending) instead of counting the old id missing.

    \b
    Exit codes:
      0  re-keyed (or nothing to re-key)
      1  error (a store, a source that cannot be read: nothing written)
      2  --dry-run: pairs to apply; or ambiguous pairs left as they are
     64  usage error
    """
    from reconciler.app.rekeying import rekey as rekey_sources
    from reconciler.app.rekeying import render_rekey

    with errors_mapped():
        data = rekey_sources(obj.settings, names=list(source_names), dry_run=dry_run)
    obj.emit(data, render_rekey)
    if data["conflicts"] or (dry_run and data["pairs"]):
        sys.exit(EXIT_DRIFT)


@cli.command()
@click.pass_obj
def status(obj: CliState) -> None:
    """Documents by state, chunks, families, sources and the last runs."""
    from reconciler.app.deployment import gather_status
    from reconciler.app.watch_reports import watch_section
    from reconciler.cli.rendering import render_status, table

    with errors_mapped():
        data = gather_status(obj.settings)
    obj.emit(data, lambda shown: render_status(shown) + watch_section(shown, table))


@cli.command("bootstrap")
@click.option("--dry-run", is_flag=True, help="Show the rows that would be created; write nothing.")
@click.pass_obj
def bootstrap_command(obj: CliState, dry_run: bool) -> None:
    """Adopt an existing collection: register a document row for every document id it holds.

    Reads payloads only (never vectors or text) and writes no payload: state, version, dates,
    class and family come from the payloads where valid, else the document is `unknown` in a
    family of its own; what could not be mapped is listed. The next `apply` writes the managed
    payload keys. [index] layout = default | langchain | llamaindex sets the payload layout
    (docs/adopting.md; [bootstrap] preset is its old name). Running it again creates nothing.
    """
    from reconciler.app.bootstrap import bootstrap as adopt_collection
    from reconciler.app.bootstrap import render_bootstrap

    with errors_mapped():
        data = adopt_collection(obj.settings, dry_run=dry_run)
    obj.emit(data, render_bootstrap)


@cli.command("split")
@click.option("--dry-run", is_flag=True, help="Show what would move; write nothing.")
@click.option(
    "--merge",
    is_flag=True,
    help="Move every archived chunk back into the main collection (before removing "
    "index.archive_collection).",
)
@click.pass_obj
def split_command(obj: CliState, dry_run: bool, merge: bool) -> None:
    """Move an existing deployment into a split store: [index] archive_collection.

    Each registered document's chunks go where its row's state puts them: current, unknown
    and pending versions in the main collection, superseded, retired and draft ones (and
    chunks without a row) in the archive, so a retrieval path that forgets default_filter()
    finds no superseded chunk.
    Whole points are copied (vectors as they are, never embedded), read back, then deleted
    from the collection they leave, a batch at a time, audited under the whole corpus's
    lease: a killed split is finished by the next run, and `reconciler rollback RUN_ID`
    moves its points back. Reads the table and both collections, no source; writes no row
    or payload. Afterwards every apply keeps the split (the guard weighs its moves).
    """
    from reconciler.app.splitting import render_split, split_store

    with errors_mapped(), progress_display(obj.progress) as progress:
        data = split_store(obj.settings, dry_run=dry_run, merge=merge, progress=progress)
    obj.emit(data, render_split)


# -- reconciliation -----------------------------------------------------------------------


@cli.command("connectors")
@click.pass_obj
def connectors_command(obj: CliState) -> None:
    """List the installed system-of-record connectors (built in, or entry points
    reconciler.connectors)."""
    from reconciler.cli.rendering import table
    from reconciler.sources import describe as describe_connectors

    rows = describe_connectors()
    obj.emit(
        {"connectors": rows},
        lambda d: table(
            ["type", "status", "provided by", "summary"],
            [[r["type"], r["status"], r["target"], r["summary"]] for r in d["connectors"]],
        ),
    )
