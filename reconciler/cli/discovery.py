"""``reconciler suggest``: discovery for an inherited corpus. Proposes the supersession links
and families nobody declared, each with a score and its evidence in words, for a person to
review; writes nothing but the proposals file it is asked for."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import click

from reconciler.cli.group import CliState, Verb, cli, errors_mapped, fail

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
    from reconciler.app.suggesting import Scope, suggest

    with errors_mapped():
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
