"""Who writes: every call of a writer method of the ports (a method of a writer Protocol,
``reconciler.ports.WRITERS``) is in one of the modules listed here, the writing side of the
code. The list only shrinks: a new writer is a decision made here, in review, not a call
slipped in elsewhere. Read from the source (no store is opened)."""

from __future__ import annotations

import ast
from pathlib import Path

from reconciler.ports import WRITERS as WRITER_PORTS
from reconciler.ports import ChunkIndex, ChunkReader, DocumentTable, TableReader

ROOT = Path(__file__).resolve().parents[2]

#: The methods of the ports that change a store: those of the writer Protocols.
WRITER_METHODS = frozenset(
    name
    for writer in WRITER_PORTS
    for name, value in vars(writer).items()
    if callable(value) and not name.startswith("_")
)

#: module -> the writer methods it may call.
WRITING_MODULES = {
    # a plan's writes: audit intent, rows with their outbox, payloads, indexes
    "reconciler/writing/applying.py": {
        "append_audit",
        "create_payload_index",
        "set_payloads",
        "write_rows_and_outbox",
    },
    # a reconciliation's run record, its sources' attempts and identities
    "reconciler/pipeline/recording.py": {
        "append_audit",
        "finish_run",
        "record_findings",
        "record_identities",
        "record_source_attempt",
        "start_run",
        "touch_identities",
    },
    # every other command's run record (``recorded``)
    "reconciler/writing/runs.py": {"finish_run", "start_run"},
    # a killed run finished from its intents
    # (and a document a killed ingestion left incomplete, queued for re-ingestion)
    "reconciler/writing/recovery.py": {
        "append_audit",
        "finish_run",
        "request_reingest",
        "set_run_counts",
    },
    "reconciler/writing/rollback.py": {"write_rows_and_outbox"},
    # the reference ingestion (the only code that embeds) and the adoption of a collection
    # (its intents and their confirmations audited, as an apply's are)
    "reconciler/ingesting.py": {
        "append_audit",
        "delete_document_chunks",
        "ensure_collection",
        "finish_reingest",
        "record_identities",
        "record_source_attempt",
        "upsert_chunks",
        "upsert_documents",
    },
    "reconciler/app/bootstrap.py": {"record_identities", "upsert_documents"},
    # a run that failed before the engine recorded it
    "reconciler/app/operations.py": {"start_run"},
    # the reads of the sources by a job whose checks do not read them (serve's TTL, dates)
    "reconciler/app/probing.py": {"record_source_attempt"},
}


def test_the_writer_protocols_hold_the_writes_and_nothing_else() -> None:
    ports = {name for port in (ChunkIndex, DocumentTable) for name in dir(port)}
    readers = {name for port in (ChunkReader, TableReader) for name in dir(port)}
    assert len(WRITER_METHODS) == 17
    assert ports >= WRITER_METHODS
    assert not WRITER_METHODS & readers


def writer_calls() -> dict[str, set[str]]:
    """module (path) -> the writer methods it calls, outside the stores' own adapters."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module.startswith("reconciler/stores/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITER_METHODS
            ):
                found.setdefault(module, set()).add(node.func.attr)
    return found


def test_only_the_writing_modules_call_writer_methods() -> None:
    calls = writer_calls()
    beyond = {
        module: sorted(names - WRITING_MODULES.get(module, set()))
        for module, names in calls.items()
        if names - WRITING_MODULES.get(module, set())
    }
    assert beyond == {}, "a writer call outside the writing modules (see WRITING_MODULES)"
    # and the list stays exact: a module that stopped writing leaves it
    assert {m: sorted(n) for m, n in calls.items()} == {
        m: sorted(n) for m, n in WRITING_MODULES.items()
    }
