"""What people read (``--format table``): plain-text tables, the run report and, on a
terminal, live progress. JSON output needs no renderer.

``rich`` draws the progress; it is imported only when a display starts, so importing this
module (and the CLI) stays cheap. The tables stay plain string work: rich's tables took
0.7 s for the 1,000 rows of ``audit show`` where this takes 3 ms.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from reconciler.cli.rendering_plans import plan_lines, refusal_outcome

#: Findings (and writes) of each kind a report shows unless told otherwise (--limit N, --all).
PER_KIND = 5


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


class ProgressHook(Protocol):
    """What the engine and the ingestion call as they go: ``(what, count)``, or
    ``(what, count, total)`` when the total is known."""

    def __call__(self, what: str, count: int, total: int | None = None) -> None: ...


#: How each event reads on the progress line.
PROGRESS_LABELS = {
    "documents": "documents read",
    "chunks": "chunks embedded",
    "scanned": "chunks checked",
    "applied": "chunks scanned for writes",
}


def _quiet(what: str, count: int, total: int | None = None) -> None:
    """The progress hook off a terminal: nothing to show."""


@contextmanager
def progress_display(enabled: bool) -> Iterator[ProgressHook]:
    """Live progress on stderr while the block runs, one line per kind of event, gone at the
    end; a hook that does nothing when not ``enabled`` (JSON output, stderr not a terminal).

    Log records written meanwhile go through the display, above its lines.
    """
    if not enabled:
        yield _quiet
        return
    from rich.console import Console  # (lazy: see the module docstring)
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )

    stderr = sys.stderr
    display = Progress(
        SpinnerColumn(),
        TextColumn("{task.fields[count]:>15} {task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(file=stderr),
        transient=True,
        redirect_stdout=False,  # the report goes to stdout, maybe a file, after the display
    )
    tasks: dict[str, TaskID] = {}

    def show(what: str, count: int, total: int | None = None) -> None:
        counted = f"{count:,}" + (f"/{total:,}" if total is not None else "")
        if what in tasks:
            display.update(tasks[what], completed=count, total=total, count=counted)
        else:
            label = PROGRESS_LABELS.get(what, what)
            tasks[what] = display.add_task(label, completed=count, total=total, count=counted)

    with display:
        handlers = _redirect_logs(stderr, sys.stderr)
        try:
            yield show
        finally:
            for handler in handlers:
                handler.setStream(stderr)


def _redirect_logs(real: Any, proxy: Any) -> list[logging.StreamHandler[Any]]:
    """Point the root logger's handlers that write to ``real`` at ``proxy`` (rich's stand-in
    for stderr while a display is live); return those moved."""
    moved = []
    if proxy is not real:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is real:
                handler.setStream(proxy)
                moved.append(handler)
    return moved


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
        + ("" if index["exists"] else " (absent)")
        + (f" + archive {index['archive']['collection']}" if "archive" in index else ""),
        "",
        table(
            [
                "documents",
                "families",
                "chunks (table)",
                "chunks (index)",
                "quarantined",
                "re-ingest pending",
                "declarations",
            ],
            [
                [
                    data["documents"],
                    data["families"],
                    data["chunks_registered"],
                    index["chunks"],
                    data["quarantined_documents"],
                    data["reingest_pending"],
                    data.get("declarations", 0),
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
    out += plan_lines(data.get("plans", []))
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


def _more(hidden: int, what: str) -> str:
    """The line that ends a cut list."""
    return f"  … and {hidden} more {what} (use --all or --limit N)"


#: Findings of one check/kind, in the order the run found them.
Group = tuple[tuple[str, str], list[Mapping[str, Any]]]


def _by_kind(findings: Sequence[Mapping[str, Any]], checks: Sequence[str]) -> list[Group]:
    """Findings grouped by check/kind: checks in run order, then kinds by name."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for finding in findings:
        groups.setdefault((finding["check"], finding["kind"]), []).append(finding)
    order = {name: i for i, name in enumerate(checks)}
    return sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0]))


def _summary(data: Mapping[str, Any], groups: Sequence[Group]) -> list[str]:
    """One row per check (checked, findings by severity), then one per kind found."""
    severities = ("critical", "warning", "info")
    counts = {name: dict.fromkeys(severities, 0) for name in data["summary"]}
    for finding in data["findings"]:
        by_severity = counts.setdefault(finding["check"], dict.fromkeys(severities, 0))
        by_severity[finding["severity"]] = by_severity.get(finding["severity"], 0) + 1
    out = [
        table(
            ["check", "checked", "findings", *severities],
            [
                [
                    name,
                    data["summary"].get(name, {}).get("checked"),
                    sum(by_severity.values()),
                    *(by_severity[s] for s in severities),
                ]
                for name, by_severity in counts.items()
            ],
        )
    ]
    if groups:
        out += [
            "",
            table(
                ["kind", "severity", "findings"],
                [
                    [
                        f"{check}/{kind}",
                        "/".join(sorted({f["severity"] for f in group})),
                        len(group),
                    ]
                    for (check, kind), group in groups
                ],
            ),
        ]
    return out


def _row_write(row: Mapping[str, Any]) -> str:
    changes = "; ".join(f"{k}: {_short(b)} -> {_short(a)}" for k, (b, a) in row["fields"].items())
    return f"  table    {row['doc_id']}  {changes}"


def _payload_write(target: Mapping[str, Any]) -> str:
    return f"  payload  {target['doc_id']}  {target['points']} chunk(s) <- " + _short(
        target["payload"]
    )


def _reingest_write(request: Mapping[str, Any]) -> str:
    return f"  reingest {request['doc_id']}  ({request['reason']})"


def _index_write(index: Mapping[str, Any]) -> str:
    return f"  index    {index['key']} ({index['schema']})"


def _move_write(move: Mapping[str, Any]) -> str:
    return f"  move     {move['doc_id']}  {move['points']} chunk(s) {move['from']} -> {move['to']}"


#: The kinds of write in a plan's JSON: key, what they are called, one line for each.
_WRITES = (
    ("rows", "table writes", _row_write),
    ("payloads", "payload writes", _payload_write),
    ("reingest", "re-ingest requests", _reingest_write),
    ("indexes", "indexes", _index_write),
    ("moves", "moves", _move_write),
)


#: What each guard finding kind means, for the refusal line.
_TRIPPED = {
    "blast_radius": "too much would change",
    "source_empty": "a source that had documents returned none",
    "index_shrunk": "the chunk index lost points the table registers",
}


def _refusal(guard: Mapping[str, Any], *, wrote: bool = False) -> str:
    """The refusal line: which rule tripped, which direction was over, what would move, what
    was written all the same and which documents were held back."""
    over = guard.get("over", [])
    kinds = guard.get("tripped", [])
    tripped = [_TRIPPED.get(kind, kind) for kind in kinds if kind != "blast_radius"]
    families, chunks = guard.get("families_total"), guard.get("chunks_total")
    served_families = guard.get("served_families") or families
    served_chunks = guard.get("served_chunks") or chunks
    changed = (
        f"{guard.get('hidden_families')} of {served_families} served families, "
        f"{guard.get('hidden_chunks')} of {served_chunks} served chunks would be hidden, {guard.get('revealed_families')} families, "
        f"{guard.get('revealed_chunks')} chunks revealed (max_changed_fraction "
        f"{guard.get('max_changed_fraction', 0):.0%}; {guard.get('relabelled_families')} "
        "families relabelled while served, not counted)"
    )
    restored = (
        f"{guard.get('restoring_families')} of {families} families, "
        f"{guard.get('restoring_chunks')} of {chunks} chunks would be served again, their "
        "quarantine's cause gone (max_restored_fraction "
        f"{guard.get('max_restored_fraction', 1):.0%})"
    )
    parts = [changed]
    if "changed" in over or ("blast_radius" in kinds and not over):
        tripped.append("too much of what is served would change")
    if "moved" in over:
        tripped.append("too many chunks would move between the collections")
        parts.append(
            f"{guard.get('moving_families')} of {families} families, "
            f"{guard.get('moving_chunks')} of {chunks} chunks would move (max_moved_fraction "
            f"{guard.get('max_moved_fraction', 1):.0%}; `reconciler split --dry-run` shows them)"
        )
    if "restored" in over:
        tripped.append("too many quarantines would be lifted")
        parts = [restored, changed] if "changed" not in over else [changed, restored]
    elif guard.get("restoring_families"):
        parts.append(restored.replace(" (max_restored", ", not counted (max_restored"))
    return (
        f"\nREFUSED by the blast-radius guard ({'; '.join(tripped)}): {'; '.join(parts)}. "
        + refusal_outcome(guard, wrote=wrote)
    )


def render_report(data: dict[str, Any], *, per_kind: int | None = PER_KIND) -> str:
    """check / plan / apply / run output: findings, then the exact writes, then the summary.

    ``per_kind`` findings of each check/kind are shown, and as many writes of each kind (table,
    payload, reingest, index), each cut list ending in how many more; ``None`` shows all; the
    counts in the summary are always whole."""
    mode = data["mode"]
    if data.get("run_id") is None:  # check, plan: read-only, not recorded
        out = [f"{mode} (read-only, not recorded; started {data['started_at']})"]
    else:
        out = [f"{mode} {data['run_id']}  (started {data['started_at']})"]
    findings = data["findings"]
    groups = _by_kind(findings, list(data["summary"]))
    if findings:
        out.append(f"\nfindings ({len(findings)}):")
        for (check, kind), group in groups:
            shown = group if per_kind is None else group[:per_kind]
            for f in shown:
                where = f["doc_id"] or f["family"] or "-"
                out.append(f"  {f['severity'].upper():8} {check}/{kind}  {where}")
                out.append(f"           expected: {_short(f['expected'])}")
                out.append(f"           found:    {_short(f['actual'])}")
                out.append(f"           action:   {f['action']}")
            if len(group) > len(shown):
                out.append(_more(len(group) - len(shown), f"{check}/{kind}"))
    elif unread := ", ".join(data.get("unread_sources") or []):  # a scoped dry run: exit 2
        out.append(f"\nno findings, but source(s) {unread} could not be read: not checked")
    else:
        out.append("\nno findings: the three stores agree")
    lines = []
    plan = data.get("plan", {})
    for key, kind, line in _WRITES:
        planned = plan.get(key, [])
        listed = planned if per_kind is None else planned[:per_kind]
        lines += [line(item) for item in listed]
        if len(planned) > len(listed):
            lines.append(_more(len(planned) - len(listed), kind))
    if lines:
        verb = "writes that follow" if mode in ("check", "plan") else "writes"
        out.append(f"\n{verb}:")
        out += lines
    out.append("")
    out += _summary(data, groups)
    writes = data["writes"]
    done = "planned" if mode in ("check", "plan") else "written"
    out.append(
        f"\n{done}: {writes['table']} row(s), {writes['payload']} payload write(s) on "
        f"{writes['points']} chunk(s), {writes['reingest']} re-ingest request(s), "
        f"{writes.get('index', 0)} index(es)"
        + (f", {writes['moves']} chunk(s) moved between collections" if "moves" in writes else "")
    )
    if data.get("refused"):
        out.append(_refusal(data["guard"], wrote=any(data["writes"].values())))
    elif data.get("forced"):
        out.append("\nguard overridden with --force (audited)")
    if data.get("status") == "partial":
        out.append(
            f"\nPARTIAL: source(s) {', '.join(data['unread_sources'])} could not be read; what "
            "they hold was not reconciled (exit 4). `reconciler status` shows the error."
        )
        out += [f"  {name}: {why}" for name, why in data.get("unread_reasons", {}).items()]
    if data.get("error"):
        out.append(f"\nERROR: {data['error']}")
    return "\n".join(out)


def render_rollback(data: dict[str, Any]) -> str:
    """rollback output (cascaded rollbacks first, as they ran)."""
    out = [render_rollback(item) for item in data.get("cascaded", [])]
    if data.get("dry_run"):
        out.append(
            f"would roll back run {data['rolled_back']}: {data['rows']} row(s), "
            f"{data['payload_writes']} payload write(s) on {data['points']} chunk(s) restored "
            "(dry run: nothing written)"
        )
    else:
        out.append(
            f"rolled back run {data['rolled_back']} as run {data['run_id']}: "
            f"{data['rows']} row(s), {data['payload_writes']} payload write(s) on "
            f"{data['points']} chunk(s) restored"
        )
    if "moves" in data:
        out.append(f"  {data['moves']} chunk(s) moved back between the collections")
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
