"""Commands that get a new deployment's configuration right before anything is served:
``config example`` (the annotated example, shipped in the package) and ``vocabulary check``
(a dry read of the configured sources)."""

from __future__ import annotations

import sys
from typing import Any

import click

from reconciler.cli.group import EXIT_DRIFT, EXIT_OK, CliState, cli, errors_mapped
from reconciler.cli.rendering import table


@cli.group("config")
def config_group() -> None:
    """The configuration file."""


@config_group.command("example")
def config_example() -> None:
    """Print the annotated example configuration (every key explained), to start from:
    `reconciler config example > reconciler.toml`. Needs no config file.

    \b
    Exit codes:
      0  printed
     64  usage error
    """
    from importlib.resources import files

    text = files("reconciler.settings").joinpath("reconciler.example.toml").read_text("utf-8")
    click.echo(text, nl=False)


@cli.group()
def vocabulary() -> None:
    """What the configuration reads of each source's documents."""


@vocabulary.command("check")
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    metavar="N",
    help="Show what each reader extracted from N documents spread over each source.",
)
@click.option("--source", "source_names", multiple=True, help="Only this source (repeatable).")
@click.pass_obj
def vocabulary_check(obj: CliState, sample: int, source_names: tuple[str, ...]) -> None:
    """Read every source as a run would and write nothing: for a sample of documents, what
    each reader extracted per field; for each field the configuration maps (`fields`, and
    the groups of `body_patterns`), the documents where it was found, ambiguous (readers
    that disagree, several values for one), invalid (a status no mapping names, a date no
    format reads) or missing; and the states the documents' rows would take.

    \b
    Exit codes:
      0  every mapped field is read from some document, and at most half would be unknown
      1  error: the config file, a source that cannot be read
      2  a mapped field is read from no document (a link field only when documents write
         its key), a document writes a mapped key no reader took from it, or more than
         half of the documents would be `unknown` (and served)
     64  usage error
    """
    from reconciler.app.surveying import survey_sources

    with errors_mapped():
        surveys = survey_sources(obj.settings, names=list(source_names), sample=sample)
    data = {
        "ok": not any(s.unread or s.mostly_unknown or s.keys_not_read for s in surveys),
        "sources": [s.report for s in surveys],
    }
    obj.emit(data, render_survey)
    sys.exit(EXIT_OK if data["ok"] else EXIT_DRIFT)


#: The problems the survey reports in their own sections.
_SAID_ELSEWHERE = {"unused_mapping", "id_not_read", "key_not_read"}


def render_survey(data: dict[str, Any]) -> str:
    """The dry read, per source."""
    out: list[str] = []
    for report in data["sources"]:
        out.append(f"source {report['source']}: {report['documents']} document(s)")
        if "fields" in report:
            out.append(f"readers: {', '.join(report['readers'])}")
            out.append(
                table(
                    ["field", "keys", "found", "ambiguous", "invalid", "missing"],
                    [
                        [
                            f["field"],
                            ", ".join(f["keys"]),
                            f["found"],
                            f["ambiguous"],
                            f["invalid"],
                            f["missing"],
                        ]
                        for f in report["fields"]
                    ],
                )
            )
        states = ", ".join(f"{k} {v}" for k, v in report["states"].items() if v)
        out.append(f"states the rows would take: {states or 'none'}")
        for sampled in report.get("sample", []):
            out.append(f"\n{sampled['path']} -> {sampled['doc_id']} ({sampled['state']})")
            for name, held in sampled["read"].items():
                out.append(
                    f"  {name}: " + "; ".join(f"{reader}: {v!r}" for reader, v in held.items())
                )
        for unread in report["unread_keys"]:
            out.append(f"\n{unread['field']}: {unread['message']}")
        for missed in report["id_not_read"]:
            out.append(f"\n{missed['path']}: {missed['message']}")
        others = report.get("problems_first") or []
        if others:
            shown = sum(v for k, v in report["problems"].items() if k not in _SAID_ELSEWHERE)
            out.append(
                f"\n{shown} PROBLEM(S) IN THE SOURCE (a note not taken is not ingested; "
                'see docs/connectors/vault.md, "What a bad note costs"):'
            )
            out.extend(f"  {p['path']}: {p['kind']}: {p['message']}" for p in others)
            if shown > len(others):
                out.append(f"  ... and {shown - len(others)} more (--format json: `problems`)")
        if report["unread"]:
            out.append(f"\nREAD FROM NO DOCUMENT: {', '.join(report['unread'])}")
        not_read = report.get("key_not_read") or {}
        if not_read.get("documents"):
            out.append(
                f"\nNOT READ IN {not_read['documents']} DOCUMENT(S): they write a mapped key "
                "that no reader took from them (read as if they said nothing of it, and "
                "served as unknown):"
            )
            out.extend(f"  {n['path']}: {n['message']}" for n in not_read["first"])
        if report["mostly_unknown"]:
            out.append(
                "\nMOSTLY UNKNOWN: more than half of the documents would be unknown, and "
                "unknown is served: map their status (fields.status, status_map)"
            )
        out.append("")
    if not data["sources"]:
        out.append(
            "no source is configured ([[sources]]): nothing was read. The rows `bootstrap` "
            "adopted have none; configure their system of record (docs/adopting.md)"
        )
        return "\n".join(out)
    out.append("ok" if data["ok"] else "the configuration needs mending (exit 2)")
    return "\n".join(out)
