"""``reconciler suggest``: discovery for an inherited corpus. Proposes the supersession links
and families nobody declared, each with a score and its evidence in words, for a person to
review; writes nothing but the proposals file it is asked for."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import click

from reconciler.cli.group import (
    EXIT_USAGE,
    CliState,
    Verb,
    bulk_work,
    cli,
    errors_mapped,
    exit_for,
    fail,
)
from reconciler.cli.options import output_options

log = logging.getLogger(__name__)


class _SuggestVerb(Verb):
    """``suggest`` also takes ``--format yaml`` (the proposals as a file a person edits)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.name == "fmt":
                param.type = click.Choice(["table", "json", "yaml"])


@cli.command("suggest", cls=_SuggestVerb)
@click.option("--source", help="Only the documents of this source.")
@click.option("--class", "doc_class", help="Only the documents of this doc_class.")
@click.option(
    "--min-score",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Propose pairs scoring at least this (0 to 1) [default: 0.7].",
)
@click.option(
    "--no-bodies",
    is_flag=True,
    help="Compare names and dates only; read no body from the sources.",
)
@click.option(
    "--vectors/--no-vectors",
    default=False,
    show_default=True,
    help="Also compare the documents by the chunk vectors already in the index (read once, "
    "never re-embedded): more links below the default score, a few more wrong ones at it "
    "(docs/adopting.md). Without a readable collection, suggest says so and goes on.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the proposals to FILE (YAML, or JSON with --format json or a .json name) "
    "to review: mark each decision accept or reject.",
)
@click.pass_obj
def suggest_command(
    obj: CliState,
    source: str | None,
    doc_class: str | None,
    min_score: float | None,
    no_bodies: bool,
    vectors: bool,
    output: Path | None,
) -> None:
    """Propose the supersession links and families nobody declared, with their evidence.

    Compares the documents the table holds by their titles and paths (version markers such
    as -2025, -v2, _old, archive/, (superseded) taken out), their dates, their bodies
    (near-duplicates, and a body saying it replaces another) read from the sources, and with
    --vectors the vectors of their chunks already in the index (each document's averaged and
    measured from the corpus's mean; never re-embedded). Each proposal has a score, the evidence in words, which one is the newer (or "no direction")
    and a decision, undecided until a person marks it accept or reject. Writes nothing to the
    table, the index or the audit log.
    """
    with errors_mapped():
        from reconciler.app.suggesting import Scope, suggest  # ExtraMissing without datasketch

        found = suggest(
            obj.settings,
            scope=Scope(source=source, doc_class=doc_class, bodies=not no_bodies, vectors=vectors),
            min_score=min_score,
        )
    data = found.as_dict()
    if output is not None:
        as_json = obj.fmt == "json" or output.suffix.lower() == ".json"
        try:
            output.write_text(_json(data) if as_json else _yaml(data), encoding="utf-8")
        except OSError as exc:
            fail(f"could not write {output}: {exc}")
        if obj.fmt == "table":
            click.echo(_summary(data) + f"\nwritten to {output}")
        return
    if obj.fmt == "json":
        click.echo(_json(data))
    elif obj.fmt == "yaml":
        click.echo(_yaml(data), nl=False)
    else:
        click.echo(render_proposals(data))


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def _yaml(data: dict[str, Any]) -> str:
    import yaml

    head = (
        "# Proposals of `reconciler suggest`: mark each decision accept or reject.\n"
        '# A link whose direction is "no direction" names a pair only: set older and newer\n'
        "# (and direction: older -> newer) before accepting it.\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _summary(data: dict[str, Any]) -> str:
    kinds = [p["kind"] for p in data["proposals"]]
    return (
        f"{data['documents']} documents, {data['pairs_scored']} pairs scored at "
        f"min score {data['min_score']}: {kinds.count('link')} links, "
        f"{kinds.count('family')} families proposed"
    )


def render_proposals(data: dict[str, Any]) -> str:
    """The proposals for a person: one block per proposal, best first."""
    lines = [_summary(data)]
    lines += [f"note: {note}" for note in data["notes"]]
    for p in data["proposals"]:
        if p["kind"] == "link":
            arrow = "->" if p["direction"] != "no direction" else "<-?->"
            lines.append(f"\n{p['id']}  {p['score']:.2f}  {p['older']} {arrow} {p['newer']}")
        else:
            lines.append(f"\n{p['id']}  {p['score']:.2f}  family: {', '.join(p['members'])}")
        lines.append(f"    {p['evidence']}")
    return "\n".join(lines)


@cli.command("declare")
@click.argument("args", nargs=-1, metavar="[PROPOSALS_FILE | DOC...]")
@click.option("--supersede", "old", metavar="OLD", help="Declare document OLD superseded ...")
@click.option("--by", "new", metavar="NEW", help="... by document NEW (with --supersede).")
@click.option(
    "--family",
    metavar="F",
    help="Declare the documents DOC... (the arguments) versions of the family F.",
)
@click.option("--who", metavar="NAME", help="Who decided [default: the login name].")
@click.option("--reason", metavar="TEXT", help="Why (recorded with each declaration).")
@click.option(
    "--dry-run", is_flag=True, help="Show the writes the declarations lead to; record nothing."
)
@click.option("--force", is_flag=True, help="Go past the blast-radius guard (audited).")
@click.option(
    "--list",
    "listing",
    is_flag=True,
    help="List the declarations recorded (with --all, the revoked ones too) and exit.",
)
@output_options
@click.pass_obj
@bulk_work()
def declare_command(
    obj: CliState,
    args: tuple[str, ...],
    old: str | None,
    new: str | None,
    family: str | None,
    who: str | None,
    reason: str | None,
    dry_run: bool,
    force: bool,
    listing: bool,
) -> None:
    """Record a person's decisions: which document replaced which, which are one family.

    \b
    reconciler declare proposals.yaml          the accepted lines of a reviewed `suggest` file
    reconciler declare --supersede OLD --by NEW
    reconciler declare --family F DOC DOC...
    reconciler declare --list                  what is recorded (--all: revoked ones too)

    Declarations are a source of family and supersession every run reads beside the systems
    of record, for the documents no source speaks for (an adopted collection, say). Where a
    document's own source declares otherwise, the source wins and the declaration is reported
    (family/declaration_conflict). Declaring is a recorded run (mode "declare"): the families
    it touches are reconciled with the new declarations under the blast-radius guard (weighed
    against the whole corpus), every write is audited, and `reconciler rollback RUN_ID` undoes
    it and revokes its declarations. --dry-run shows the writes and records nothing.

    \b
    Exit codes:
      0  declared; with --dry-run, nothing would change; --list listed
      1  a decision cannot be recorded (each one listed; nothing written), or an error
      2  --dry-run: the declarations lead to the writes shown (nothing recorded)
      3  refused by the blast-radius guard, nothing written (--force after review)
      4  declared, but a source could not be read (run status "partial")
     64  usage error
    """
    from reconciler.app.declaring import (
        Decision,
        declare,
        from_file,
        list_declarations,
    )
    from reconciler.app.operations import report_data
    from reconciler.cli.rendering import render_report
    from reconciler.model import DeclarationKind

    given = [name for name, on in (("--supersede", old), ("--family", family)) if on]
    if listing:
        if args or given or new:
            raise click.UsageError("--list takes no decisions")
        with errors_mapped():
            found = list_declarations(obj.settings, active=not obj.show_all)
        obj.emit({"declarations": [d.to_json() for d in found]}, _render_declarations)
        return
    if bool(old) != bool(new):
        raise click.UsageError("--supersede OLD and --by NEW go together")
    if len(given) > 1:
        raise click.UsageError("give one of a proposals file, --supersede or --family")
    skipped: list[str] = []
    if old and new:
        if args:
            raise click.UsageError("--supersede OLD --by NEW takes no other argument")
        decisions = [Decision(DeclarationKind.SUPERSEDE, old, new)]
    elif family:
        if not args:
            raise click.UsageError("--family F needs the documents: --family F DOC [DOC...]")
        decisions = [Decision(DeclarationKind.FAMILY, doc, family) for doc in args]
    elif len(args) == 1:
        with errors_mapped():
            decisions, skipped = from_file(Path(args[0]))
    else:
        fail(
            "give a reviewed proposals file (`reconciler suggest -o proposals.yaml`, then mark "
            "each decision accept or reject), --supersede OLD --by NEW, or --family F DOC...",
            EXIT_USAGE,
        )
    with errors_mapped():
        declared = declare(
            obj.settings,
            decisions,
            declared_by=who,
            reason=reason,
            dry_run=dry_run,
            force=force,
            skipped=skipped,
        )
    if declared.report is None:  # nothing new: no run was made
        obj.emit({"run_id": None, **declared.to_json()}, _render_declared)
        return
    data = {**report_data(declared.report), **declared.to_json()}

    def render(data: dict[str, Any]) -> str:
        return render_report(data, per_kind=obj.per_kind) + "\n" + _render_declared(data)

    obj.emit(data, render)
    exit_for(declared.report, writing=not dry_run)


def _render_declared(data: dict[str, Any]) -> str:
    """What ``declare`` recorded (or, dry, would record)."""
    made = data["declarations"]
    if "mode" not in data:
        head = "nothing new to declare: no run was made"
    elif data["dry_run"]:
        head = f"{len(made)} declaration(s) would be recorded (dry run: nothing written)"
    elif data.get("refused"):
        head = "no declaration recorded: the run was refused"
    else:
        head = f"{len(made)} declaration(s) recorded in run {data['run_id']}"
    lines = [head]
    lines += [f"  {_one(d)}" for d in made]
    lines += [f"  left out: {why}" for why in data["skipped"]]
    return "\n".join(lines)


def _render_declarations(data: dict[str, Any]) -> str:
    """``declare --list``."""
    found = data["declarations"]
    if not found:
        return "no declarations recorded"
    lines = [f"{len(found)} declaration(s), oldest first:"]
    for d in found:
        lines.append(f"  {_one(d)}")
        why = "; ".join(f"{k}: {d[k]}" for k in ("reason", "evidence", "revoked_by") if d.get(k))
        lines.append(
            f"      {d['declared_by']} at {d['declared_at']}, run {d['run_id']}"
            + (f"; {why}" if why else "")
        )
    return "\n".join(lines)


def _one(d: dict[str, Any]) -> str:
    verb = "superseded by" if d["kind"] == "supersede" else "in family"
    return f"{d['id']}  {d['doc_id']} {verb} {d['target']}"
