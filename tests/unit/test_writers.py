"""Who writes: every call of a writer method of the ports (a method of a writer Protocol,
``reconciler.ports.WRITERS``) is in ``reconciler/writing/``, in one of the modules listed
here. The stages, the ingestion, the commands and the composition root ask the writing side
to write; they never call a writer method themselves. A new writer is a decision made here,
in review, not a call slipped in elsewhere. Read from the source (no store is opened)."""

from __future__ import annotations

import ast
from pathlib import Path

from reconciler.ports import WRITERS as WRITER_PORTS
from reconciler.ports import ChunkIndex, ChunkReader, DocumentTable, TableReader

ROOT = Path(__file__).resolve().parents[2]
WRITING = "reconciler/writing/"

#: The methods of the ports that change a store: those of the writer Protocols.
WRITER_METHODS = frozenset(
    name
    for writer in WRITER_PORTS
    for name, value in vars(writer).items()
    if callable(value) and not name.startswith("_")
)

#: module -> the writer methods it may call: modules of ``reconciler/writing/`` only.
WRITING_MODULES = {
    # a plan's writes: audit intent, rows with their outbox, payloads, indexes (and a forced
    # run's override, audited first)
    # (and a re-keying's renames, in one table transaction: ``Applier.rename_rows``)
    "reconciler/writing/applying.py": {
        "append_audit",
        "create_payload_index",
        "rekey_documents",
        "set_payloads",
        "write_rows_and_outbox",
    },
    # ``audit seal``: one entry, keyed when a key is given
    "reconciler/writing/sealing.py": {"append_audit"},
    # every command's run record (``recorded``), a reconciliation's with its findings
    "reconciler/writing/runs.py": {"finish_run", "record_findings", "start_run"},
    # the sources' reads: attempts, and the identities of what they held
    "reconciler/writing/source_reads.py": {
        "record_identities",
        "record_source_attempt",
        "touch_identities",
    },
    # a killed run finished from its intents
    # (and a document a killed ingestion left incomplete, queued for re-ingestion)
    "reconciler/writing/recovery.py": {
        "append_audit",
        "delete_points",
        "finish_run",
        "request_reingest",
        "set_run_counts",
    },
    # a rollback's restored rows (``RunUndo.execute``)
    "reconciler/writing/rollback_plan.py": {"write_rows_and_outbox"},
    # saved plans: a refused run's held part (and a forced run's whole plan) saved, claimed
    # once by the run that applies it, marked applied, stale or expired
    "reconciler/writing/approving.py": {"claim_plan", "save_plan", "set_plan_status"},
    # a declare run's declarations, and their revocation by a rollback (``undo_declarations``)
    "reconciler/writing/declaring.py": {"write_declarations"},
    # a split store's moves: whole points copied into one collection (created with the
    # other's layout), audited before, read back, then deleted from the other
    "reconciler/writing/moving.py": {
        "append_audit",
        "copy_points",
        "delete_stored",
        "ensure_layout",
    },
    # the reference ingestion's writes (its intents and their confirmations audited, as an
    # apply's are) and the adoption of a collection
    "reconciler/writing/ingestion.py": {
        "append_audit",
        "delete_document_chunks",
        "ensure_collection",
        "finish_reingest",
        "record_identities",
        "upsert_chunks",
        "upsert_documents",
    },
}


def test_the_writer_protocols_hold_the_writes_and_nothing_else() -> None:
    ports = {name for port in (ChunkIndex, DocumentTable) for name in dir(port)}
    readers = {name for port in (ChunkReader, TableReader) for name in dir(port)}
    assert len(WRITER_METHODS) == 26  # (delete_stored: a move's delete of the points it read)
    assert ports >= WRITER_METHODS
    assert not WRITER_METHODS & readers


def writer_calls() -> dict[str, set[str]]:
    """module (path) -> the writer methods it calls, outside the stores' own adapters and the
    testing kit (the fake and the contract suites, which call the adapters' writers)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module.startswith(("reconciler/stores/", "reconciler/testing/")):
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


def test_the_writers_are_the_writing_package() -> None:
    assert all(module.startswith(WRITING) for module in WRITING_MODULES)
    outside = sorted(module for module in writer_calls() if not module.startswith(WRITING))
    assert outside == [], "a writer method called outside reconciler/writing/"
