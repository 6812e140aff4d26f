"""``python -m bench.rollback_plan``: the memory and CPU time of the rollback of a run that
wrote many points, planned (``rollback --dry-run``) and applied, at two sizes: the traced
peak must be about the same at both (memory flat, issue 35).

It builds a SQLite document table and an in-memory chunk index (``testing.memory``: the
planning reads points by id, which no engine makes cheaper) holding ``--points`` points, ten
a document, then records one run as ``apply`` writes it: every document's class changed (a
``row`` entry each) and every point's payload written from the new row (its payload intents
in pages, one entry a batch of ``BATCH`` points, as ``IntentLog`` writes them). Then, under
``tracemalloc``, each mode on stores of its own:

- ``whole``: the run read whole and folded into one plan (``rollback.read_history`` and
  ``rollback_plan.plan_rollback``: how every rollback was planned before issue 35's paging);
- ``dry``: ``rollback(dry_run=True)``, a page of documents at a time (``rollback_pages``);
- ``apply``: ``rollback()``, planned and written a page at a time.

It prints the traced peak, what is still held after, and the CPU time (a loaded machine
stretches wall time, not CPU time).

    .venv/bin/python -m bench.rollback_plan                         # 20,000 and 100,000 points
    .venv/bin/python -m bench.rollback_plan --points 20000 --modes dry apply --json plan.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

from reconciler.model import (
    OPEN_END,
    AuditEntry,
    AuditKind,
    ChunkRecord,
    Document,
    RowChange,
    RunMode,
    VersionState,
    page_entry,
)
from reconciler.payload import chunk_id_for, payload_for, point_id_for
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.rollback import read_history, rollback
from reconciler.writing.rollback_plan import plan_rollback
from reconciler.writing.runs import recorded

AT = datetime(2026, 12, 1, tzinfo=UTC)
#: Points a page of payload intents (the applier's ``batch_points``).
BATCH = 256
#: What is measured (see the module docstring).
MODES = ("whole", "dry", "apply")


def document(n: int, doc_class: str) -> Document:
    """Document ``n`` of the corpus, of class ``doc_class``."""
    return Document(
        doc_id=f"h:d{n}",
        source="h",
        source_key=f"d{n}",
        doc_family_id=f"d{n}",
        doc_version=1,
        version_state=VersionState.CURRENT,
        effective_to=OPEN_END,
        doc_class=doc_class,
    )


def build(
    root: Path, points: int, per_doc: int
) -> tuple[SqlDocumentTable, InMemoryChunkIndex, str]:
    """The stores after one run rewrote every document's row and points; its run id."""
    table = SqlDocumentTable.from_url(f"sqlite:///{root / 'table.db'}")
    table.ensure_schema(create=True)
    index = InMemoryChunkIndex()
    index.ensure_collection(dim=2)
    docs = max(points // per_doc, 1)
    table.upsert_documents([document(n, "a") for n in range(docs)])
    index.upsert_chunks(
        ChunkRecord(point_id_for(cid), cid, "text", (0.1, 0.2), payload_for(document(n, "b")))
        for n in range(docs)
        for cid in (chunk_id_for(f"h:d{n}", c) for c in range(per_doc))
    )
    with recorded(table, mode=RunMode.APPLY, actor="bench", shard="0/1") as run:
        changes = [
            RowChange(f"h:d{n}", "t", {"doc_class": "a"}, {"doc_class": "b"}) for n in range(docs)
        ]
        table.write_rows_and_outbox(
            run_id=run.run_id, actor="bench", changes=changes, reingests=[], at=AT
        )
        page: list[AuditEntry] = []
        for n in range(docs):
            ids = [point_id_for(chunk_id_for(f"h:d{n}", c)) for c in range(per_doc)]
            before, after = payload_for(document(n, "a")), payload_for(document(n, "b"))
            page.append(
                AuditEntry(
                    run.run_id,
                    AT,
                    "bench",
                    "t",
                    AuditKind.PAYLOAD,
                    f"h:d{n}",
                    {"points": ids, "payload": before},
                    {"payload": after},
                )
            )
            if len(page) * per_doc >= BATCH:
                table.append_audit([page_entry(page)])
                page = []
        if page:
            table.append_audit([page_entry(page)])
    return table, index, run.run_id


def measure(points: int, per_doc: int, mode: str) -> dict[str, float | int | str]:
    """Plan (or apply) the rollback of a run that wrote ``points`` points; what it took."""
    root = Path(tempfile.mkdtemp(prefix="bench-rollback-"))
    try:
        table, index, run_id = build(root, points, per_doc)
        started = time.process_time()
        tracemalloc.start()
        if mode == "whole":
            plan = plan_rollback(read_history(table, index, run_id))
            planned = sum(len(g.point_ids) for g in plan.payloads)
        else:
            planned = rollback(
                table=table, index=index, run_id=run_id, dry_run=mode == "dry"
            ).points
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        cpu = time.process_time() - started
        table.close()
        return {
            "mode": mode,
            "points": points,
            "planned_points": planned,
            "peak_mib": round(peak / 2**20, 1),
            "held_mib": round(held / 2**20, 1),
            "cpu_s": round(cpu, 2),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--per-doc", type=int, default=10)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = []
    for mode in args.modes:
        for points in args.points:
            result = measure(points, args.per_doc, mode)
            results.append(result)
            print(
                f"{mode:>5} {result['points']:>9,} points: traced peak {result['peak_mib']} MiB, "
                f"{result['held_mib']} MiB held after, {result['cpu_s']} s CPU "
                f"({result['planned_points']:,} points planned or written)",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
