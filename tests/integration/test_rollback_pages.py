"""A rollback planned and applied a page of documents at a time (``rollback_pages``), as a
property over random histories written into a real table (SQLite) and the in-memory index:
runs A and B changing the class of some documents, their payload intents in pages of
intents, some points written (the others: killed first), a document without a row, rows
changed by hand between and after the runs, a declaration made by A.

- What ``--dry-run`` says is what the rollback then writes, cascade included, for any page
  size (pages of 1 to 3 documents split the runs), and the dry run writes nothing; a batch
  retried names its documents' points twice, in two pages of intents.
- The page size changes nothing: the stores end as they do rolled back in one page, and the
  counts are the same (``not_undone`` listed in another order, page by page). The dry run
  and the rollback list ``not_undone`` in the same order (the store's order of documents).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from acceptance_kit import migrated_sqlite
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from rollback_kit import document

from reconciler.errors import ReconcilerError, RollbackRefused
from reconciler.model import (
    AuditEntry,
    Declaration,
    DeclarationKind,
    PayloadWrite,
    page_entry,
)
from reconciler.payload import chunk_payload, payload_for
from reconciler.stores.sql import SqlDocumentTable
from reconciler.testing.memory import InMemoryChunkIndex
from reconciler.writing.rollback import rollback

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)
#: One document: its points, whether it has a row, and per run (A, B): whether the run changed
#: it, which of its points it wrote, a change by hand after the run.
DOC = st.fixed_dictionaries(
    {
        "points": st.integers(1, 3),
        "row": st.booleans(),
        "twice": st.booleans(),
        "runs": st.lists(
            st.tuples(
                st.booleans(),
                st.lists(st.booleans(), min_size=3, max_size=3),
                st.booleans(),
            ),
            min_size=2,
            max_size=2,
        ),
    }
)


@contextmanager
def world(docs: list[dict[str, Any]], runs: int) -> Iterator[tuple[SqlDocumentTable, Any]]:
    """The history written into a table of its own and an in-memory index."""
    folder = Path(tempfile.mkdtemp(prefix="rollback-pages-"))
    shutil.copy(migrated_sqlite(), folder / "table.db")
    table = SqlDocumentTable.from_url(f"sqlite:///{folder / 'table.db'}")
    try:
        index = InMemoryChunkIndex()
        index.ensure_collection(dim=2)
        classes = {f"h:d{n}": "c0" for n in range(len(docs))}
        table.upsert_documents([document(d, "c0") for n, d in enumerate(classes) if docs[n]["row"]])
        for n, doc in enumerate(docs):
            for p in range(doc["points"]):
                payload = chunk_payload(document(f"h:d{n}", "c0"), chunk_id=f"h:d{n}#{p}")
                index.put_point(f"d{n}p{p}", vector=(0.0, 1.0), payload=payload)
        for r, run_id in enumerate(("A", "B")[:runs]):
            write_run(table, index, run_id, r, docs, classes)
        yield table, index
    finally:
        table.close()
        shutil.rmtree(folder, ignore_errors=True)


def write_run(
    table: SqlDocumentTable,
    index: InMemoryChunkIndex,
    run_id: str,
    r: int,
    docs: list[dict[str, Any]],
    classes: dict[str, str],
) -> None:
    """Run ``run_id`` as an apply writes it: rows with their entries, then its payload intents
    (pages of two documents) and the points it got to; then changes by hand."""
    table.start_run(mode="apply", actor="cli", run_id=run_id, shard="0/1")
    intents = []
    for n, doc in enumerate(docs):
        changed, wrote, _by_hand = doc["runs"][r]
        if not changed:
            continue
        doc_id, value = f"h:d{n}", f"{run_id}{n}"
        old, new = document(doc_id, classes[doc_id]), document(doc_id, value)
        if doc["row"]:
            table.upsert_documents([new])
            table.append_audit(
                [
                    AuditEntry(
                        run_id,
                        AT,
                        "cli",
                        "t",
                        "row",
                        doc_id,
                        {"doc_class": old.doc_class},
                        {"doc_class": value},
                    )
                ]
            )
        classes[doc_id] = value
        ids = [f"d{n}p{p}" for p in range(doc["points"])]
        intents += [
            AuditEntry(
                run_id,
                AT,
                "cli",
                "t",
                "payload",
                doc_id,
                {"points": ids, "payload": payload_for(old)},
                {"payload": payload_for(new)},
            )
        ] * (2 if doc.get("twice") else 1)  # (a batch retried: the same intent again)
        written = tuple(pid for pid, w in zip(ids, wrote, strict=False) if w)
        if written:
            index.set_payloads([PayloadWrite(written, payload_for(new), doc_id)])
    for start in range(0, len(intents), 2):
        table.append_audit([page_entry(intents[start : start + 2])])
    if run_id == "A":
        decl = Declaration(
            id="dec-A",
            kind=DeclarationKind.SUPERSEDE,
            doc_id="h:d0",
            target="h:d1",
            declared_by="alice",
            declared_at=AT,
            reason="reviewed",
        )
        table.write_declarations(run_id="A", actor="declare", at=AT, added=[decl])
    table.finish_run(run_id, status="succeeded")
    for n, doc in enumerate(docs):
        if doc["runs"][r][2] and doc["row"]:  # (by hand, after the run)
            row = table.get_documents([f"h:d{n}"])[f"h:d{n}"]
            table.upsert_documents([replace(row, doc_class=f"hand-{run_id}{n}")])
            classes[f"h:d{n}"] = f"hand-{run_id}{n}"


def stores(table: SqlDocumentTable, index: InMemoryChunkIndex, docs: list[Any]) -> Any:
    """The rows (but when they were written), the points' payloads and the declarations."""
    ids = [f"h:d{n}" for n in range(len(docs))]
    pids = [f"d{n}p{p}" for n, d in enumerate(docs) for p in range(d["points"])]
    return (
        {d: replace(row, updated_at=None) for d, row in table.get_documents(ids).items()},
        {str(s.point_id): s.payload for s in index.retrieve(pids)},
        [(d.id, d.revoked_at is None) for d in table.declarations(active=False)],
    )


def restored(data: dict[str, Any], *, ordered: bool = True) -> dict[str, Any]:
    """A rollback's output without its run ids or whether it was dry (``ordered=False``: its
    ``not_undone`` as a multiset)."""
    left = data["not_undone"]
    return {
        **{k: v for k, v in data.items() if k not in ("run_id", "dry_run", "cascaded")},
        "not_undone": left if ordered else sorted(json.dumps(n, sort_keys=True) for n in left),
        "cascaded": [restored(c, ordered=ordered) for c in data["cascaded"]],
    }


def rolled_back(table: Any, index: Any, *, dry: bool, page: int, cascade: bool) -> Any:
    try:
        result = rollback(
            table=table,
            index=index,
            run_id="A",
            cascade=cascade,
            dry_run=dry,
            page_documents=page,
            batch_points=2,
        )
    except ReconcilerError as exc:
        return type(exc).__name__, str(exc)
    return result.to_json()


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(  # a batch retried (its intent twice): the applier wrote a point twice, in two slices
    docs=[
        {"points": 1, "row": False, "twice": False, "runs": [(False, [False] * 3, False)] * 2},
        {
            "points": 3,
            "row": False,
            "twice": True,
            "runs": [(True, [False, False, True], False), (False, [False] * 3, False)],
        },
    ],
    runs=1,
    page=1,
    cascade=False,
)
@example(  # B's documents on one page applied, on two dry (with A's): not_undone reordered
    docs=[
        {
            "points": 1,
            "row": row,
            "twice": False,
            "runs": [(a, [False] * 3, False), (b, [False] * 3, b)],
        }
        for row, a, b in [
            (False, False, False),
            (False, True, False),
            (True, True, True),
            (False, True, False),
            (True, False, True),
        ]
    ],
    runs=2,
    page=3,
    cascade=True,
)
@given(
    docs=st.lists(DOC, min_size=2, max_size=6),
    runs=st.integers(1, 2),
    page=st.integers(1, 3),
    cascade=st.booleans(),
)
def test_a_paged_rollback_does_what_its_dry_run_said_whatever_the_page(
    docs: list[dict[str, Any]], runs: int, page: int, cascade: bool
) -> None:
    with world(docs, runs) as (table, index):
        before = stores(table, index, docs)
        dry = rolled_back(table, index, dry=True, page=page, cascade=cascade)
        assert stores(table, index, docs) == before  # the dry run wrote nothing
        done = rolled_back(table, index, dry=False, page=page, cascade=cascade)
        paged_after = stores(table, index, docs)
    if isinstance(dry, tuple):  # refused, or nothing to roll back: the rollback too
        assert done == dry
        return
    assert restored(done) == restored(dry)
    with world(docs, runs) as (table, index):
        whole = rolled_back(table, index, dry=False, page=1000, cascade=cascade)
        assert stores(table, index, docs) == paged_after
    assert restored(whole, ordered=False) == restored(done, ordered=False)


def test_a_run_redone_by_rolling_its_rollback_back_stands_again() -> None:
    """B rolled back (R1), R1 rolled back (R2: B's writes are back): B stands again, so
    rolling A back refuses naming B, and with ``cascade`` undoes B first (it did not: B
    counted as undone for good, R2 as cancelled by R1, nothing stood)."""
    docs = [{"points": 1, "row": True, "runs": [(True, [True] * 3, False)] * 2}] * 2
    with world(docs, 2) as (table, index):
        first = rollback(table=table, index=index, run_id="B")
        assert first.run_id is not None
        assert first.rows == 2
        second = rollback(table=table, index=index, run_id=first.run_id)
        assert second.rows == 2  # B's classes are back
        assert table.get_documents(["h:d0"])["h:d0"].doc_class == "B0"
        assert rolled_back(table, index, dry=True, page=1, cascade=False) == (
            "RollbackRefused",
            str(RollbackRefused("A", ["B"])),
        )
        done = rolled_back(table, index, dry=False, page=1, cascade=True)
        assert [c["rolled_back"] for c in done["cascaded"]] == ["B"]
        assert table.get_documents(["h:d0"])["h:d0"].doc_class == "c0"
