"""Plain-text tables for people (``--format table``); JSON output needs no renderer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns, numbers right-aligned, with a rule under the header."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(values: Sequence[str], raw: Sequence[Any] | None = None) -> str:
        out = []
        for i, (value, width) in enumerate(zip(values, widths, strict=True)):
            numeric = (
                raw is not None and isinstance(raw[i], int | float) and not isinstance(raw[i], bool)
            )
            out.append(value.rjust(width) if numeric else value.ljust(width))
        return "  ".join(out).rstrip()

    lines = [line(list(headers)), line(["-" * w for w in widths])]
    lines += [line(c, r) for c, r in zip(cells, rows, strict=True)]
    return "\n".join(lines)


def render_ingest(data: dict[str, Any]) -> str:
    """The ingestion report."""
    rows = [
        [
            s["source"],
            s["status"],
            s["documents_seen"],
            s["ingested"],
            s["reingested"],
            s["already_registered"],
            s["chunks_written"],
            len(s["problems"]),
        ]
        for s in data["sources"]
    ]
    out = [
        f"ingest run {data['run_id']}",
        table(
            ["source", "status", "seen", "new", "re-ingested", "registered", "chunks", "problems"],
            rows,
        ),
    ]
    for s in data["sources"]:
        if s.get("error"):
            out.append(f"\n{s['source']}: UNAVAILABLE: {s['error']} (nothing registered changed)")
        if s["problems"]:
            out.append(f"\n{s['source']}: {len(s['problems'])} problem(s) in the source:")
            out.append(
                table(
                    ["kind", "where", "problem"],
                    [[p["kind"], p["path"] or p["doc_id"], p["message"]] for p in s["problems"]],
                )
            )
        for failed in s["failed"]:
            out.append(f"{s['source']}: could not ingest {failed['doc_id']}: {failed['error']}")
    return "\n".join(out)


def render_status(data: dict[str, Any]) -> str:
    """The ``status`` report."""
    index = data["index"]
    out = [
        f"document table  {data['table']}",
        f"chunk index     {index['location']} / {index['collection']}"
        + ("" if index["exists"] else " (absent)"),
        "",
        table(
            [
                "documents",
                "families",
                "chunks (table)",
                "chunks (index)",
                "quarantined",
                "re-ingest pending",
            ],
            [
                [
                    data["documents"],
                    data["families"],
                    data["chunks_registered"],
                    index["chunks"],
                    data["quarantined_documents"],
                    data["reingest_pending"],
                ]
            ],
        ),
        "",
    ]
    states = sorted(set(data["by_state"]) | set(index["chunks_by_state"]))
    out.append(
        table(
            ["state", "documents", "chunks"],
            [[s, data["by_state"].get(s, 0), index["chunks_by_state"].get(s, 0)] for s in states],
        )
        if states
        else "no documents registered yet: run `reconciler ingest`"
    )
    if data["sources"]:
        out += [
            "",
            table(
                ["source", "type", "last success", "last error", "documents"],
                [
                    [
                        s["name"],
                        s["type"] or "(not configured)",
                        s["last_success_at"] or "never",
                        s["last_error"] or "",
                        s["documents_seen"],
                    ]
                    for s in data["sources"]
                ],
            ),
        ]
    if data["last_runs"]:
        out += [
            "",
            table(
                ["run", "mode", "actor", "status", "started", "finished"],
                [
                    [
                        r["run_id"],
                        r["mode"],
                        r["actor"],
                        r["status"],
                        r["started_at"],
                        r["finished_at"],
                    ]
                    for r in data["last_runs"]
                ],
            ),
        ]
    return "\n".join(out)
