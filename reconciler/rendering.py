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


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return "null" if value is None else str(value)


#: What each guard finding kind means, for the refusal line.
_TRIPPED = {
    "blast_radius": "too much would change",
    "source_empty": "a source that had documents returned none",
}


def render_report(data: dict[str, Any]) -> str:
    """check / plan / apply / run output: findings, then the exact writes, then counts."""
    mode = data["mode"]
    if data.get("run_id") is None:  # check, plan: read-only, not recorded
        out = [f"{mode} (read-only, not recorded; started {data['started_at']})"]
    else:
        out = [f"{mode} {data['run_id']}  (started {data['started_at']})"]
    findings = data["findings"]
    if findings:
        out.append(f"\nfindings ({len(findings)}):")
        for f in findings:
            where = f["doc_id"] or f["family"] or "-"
            out.append(f"  {f['severity'].upper():8} {f['check']}/{f['kind']}  {where}")
            out.append(f"           expected: {_short(f['expected'])}")
            out.append(f"           found:    {_short(f['actual'])}")
            out.append(f"           action:   {f['action']}")
    else:
        out.append("\nno findings: the three stores agree")
    plan = data.get("plan", {})
    lines = []
    for row in plan.get("rows", []):
        changes = "; ".join(
            f"{k}: {_short(b)} -> {_short(a)}" for k, (b, a) in row["fields"].items()
        )
        lines.append(f"  table    {row['doc_id']}  {changes}")
    for target in plan.get("payloads", []):
        lines.append(
            f"  payload  {target['doc_id']}  {target['points']} chunk(s) <- "
            + _short(target["payload"])
        )
    for request in plan.get("reingest", []):
        lines.append(f"  reingest {request['doc_id']}  ({request['reason']})")
    for index in plan.get("indexes", []):
        lines.append(f"  index    {index['key']} ({index['schema']})")
    if lines:
        verb = "writes that follow" if mode in ("check", "plan") else "writes"
        out.append(f"\n{verb}:")
        out += lines
    out.append("")
    out.append(
        table(
            ["check", "checked", "findings"],
            [[name, s["checked"], s["findings"]] for name, s in data["summary"].items()],
        )
    )
    writes = data["writes"]
    done = "planned" if mode in ("check", "plan") else "written"
    out.append(
        f"\n{done}: {writes['table']} row(s), {writes['payload']} payload write(s) on "
        f"{writes['points']} chunk(s), {writes['reingest']} re-ingest request(s), "
        f"{writes.get('index', 0)} index(es)"
    )
    if data.get("refused"):
        guard = data["guard"]
        out.append(
            "\nREFUSED by the blast-radius guard ("
            + "; ".join(_TRIPPED.get(kind, kind) for kind in guard.get("tripped", []))
            + "): "
            f"{guard.get('changed_families')} of {guard.get('families_total')} families, "
            f"{guard.get('changed_chunks')} of {guard.get('chunks_total')} chunks would change. "
            "Nothing was written. Review the plan, then rerun with --force if it is right."
        )
    elif data.get("forced"):
        out.append("\nguard overridden with --force (audited)")
    if data.get("status") == "partial":
        out.append(
            f"\nPARTIAL: source(s) {', '.join(data['unread_sources'])} could not be read; what "
            "they hold was not reconciled (exit 4). `reconciler status` shows the error."
        )
    if data.get("error"):
        out.append(f"\nERROR: {data['error']}")
    return "\n".join(out)


def render_rollback(data: dict[str, Any]) -> str:
    """rollback output (cascaded rollbacks first, as they ran)."""
    out = [render_rollback(item) for item in data.get("cascaded", [])]
    if data.get("dry_run"):
        out.append(
            f"would roll back run {data['rolled_back']}: {data['rows']} row(s) restored, "
            f"chunks of {data['payload_writes']} document(s) ({data['points']} chunk(s)) "
            "rewritten from them (dry run: nothing written)"
        )
    else:
        out.append(
            f"rolled back run {data['rolled_back']} as run {data['run_id']}: "
            f"{data['rows']} row(s), {data['payload_writes']} payload write(s) on "
            f"{data['points']} chunk(s) restored"
        )
    for item in data["not_undone"]:
        out.append(f"  not undone: {item['target_type']} {item['target']}")
    return "\n".join(out)


def render_audit(data: dict[str, Any]) -> str:
    """audit show output."""
    entries = data["entries"]
    if not entries:
        return "no audit entries"
    return table(
        ["seq", "at", "run", "actor", "type", "target", "reason"],
        [
            [
                e["seq"],
                e["at"],
                e["run_id"][:8],
                e["actor"],
                e["target_type"],
                e["target"],
                e["reason"],
            ]
            for e in entries
        ],
    )
