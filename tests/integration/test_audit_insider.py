"""An audit trail that answers an insider: someone who can write the table (every row of the
log, its head, the runs) but holds neither the audit key nor the anchor file. Unkeyed, they can
change an entry and recompute the chain unseen, and ``verify`` says so ("unkeyed"); keyed
(``RECONCILER_AUDIT_KEY``/``_FILE``), such a rewrite is found whichever entry they changed; the
anchor (``RECONCILER_AUDIT_ANCHOR``) also finds a table restored from an older copy. An old,
unkeyed log still verifies once a key is set: its keyed part starts at the next write. Real
SQLite files and the real PostgreSQL."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from acceptance_kit import Deployment, migrated_table
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from reconciler.metrics import build_registry
from reconciler.model import page_entry
from reconciler.stores.sql import SqlDocumentTable, audit
from reconciler.stores.sql.audit_protection import ANCHOR_ENV, KEY_ENV, KEY_FILE_ENV
from reconciler.stores.sql.schema import AuditDocumentRow, AuditHeadRow, AuditRow

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)


def entries(run: str, n: int) -> list[audit.AuditEntry]:
    """``n`` row entries of one run, as a reconciliation writes them."""
    first = audit.AuditEntry(run, AT, "cli", "test", "row", "h:doc-0", {"version_state": "current"},
                             {"version_state": "superseded"})  # fmt: skip
    return [replace(first, target=f"h:doc-{i}") for i in range(n)]


def rewrite(table: SqlDocumentTable, number: int) -> None:
    """What an insider without the key does: entry ``number`` (1-based) changed, and every
    hash from it on recomputed (plain SHA-256, all they can make), the head moved to match."""
    read = [chained.entry for chained in audit.ChainWalk(table.engine)]
    with Session(table.engine) as session, session.begin():
        rows = list(session.scalars(select(AuditRow).order_by(AuditRow.seq)))
        prev = rows[number - 2].entry_hash if number > 1 else audit.GENESIS
        for n, (row, entry) in enumerate(zip(rows, read, strict=True)):
            if n < number - 1 or entry is None:
                continue
            if n == number - 1:  # the change they hide
                entry = replace(entry, after={"version_state": "current"})
                row.after = entry.after
            row.prev_hash, row.entry_hash = prev, audit.entry_hash_of(prev, entry)
            prev = row.entry_hash
        session.execute(update(AuditHeadRow).values(entry_hash=prev))


def test_unkeyed_a_rewrite_goes_unseen_and_verify_says_unkeyed(
    table: SqlDocumentTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (KEY_ENV, KEY_FILE_ENV, ANCHOR_ENV):
        monkeypatch.delenv(name, raising=False)
    table.append_audit(entries("r1", 4))
    rewrite(table, 2)
    result = audit.verify(table.engine)
    assert result.ok  # the threat, as it stands without a key
    assert result.protection[0].startswith("unkeyed: no audit key given; whoever can write")
    assert result.protection[1].startswith("not anchored")


def test_keyed_a_rewrite_without_the_key_is_found_and_old_entries_still_verify(
    table: SqlDocumentTable, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ANCHOR_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    table.append_audit(entries("before-the-key", 3))  # an existing, unkeyed deployment
    key = tmp_path / "audit.key"
    key.write_text("s3cret-kept-outside-the-table\n")
    monkeypatch.setenv(KEY_FILE_ENV, str(key))
    [problem] = audit.verify(table.engine).problems  # until the first write under the key
    assert "run `reconciler audit seal` once" in problem
    table.append_audit(entries("r2", 3))
    result = audit.verify(table.engine)
    assert result.ok, result.problems
    assert result.protection[0] == (
        "keyed: every entry from entry 4 is an HMAC under the audit key (the 3 before it are "
        "unkeyed: written before the key)"
    )
    # the chain is read back whole by those who read it (audit served), keyed entries too
    upto = max(chained.seq for chained in audit.ChainWalk(table.engine))
    about = list(table.audit_entries_about(["h:doc-1"], upto=upto))
    assert [e.entry is not None for e in about] == [True, True]
    # verified without the key, the keyed entries cannot be told from altered ones
    with monkeypatch.context() as without:
        without.delenv(KEY_FILE_ENV)
        assert any(
            "keyed under a key this process lacks" in p for p in audit.verify(table.engine).problems
        )
    rewrite(table, 5)  # a keyed entry, and the rest recomputed unkeyed
    result = audit.verify(table.engine)
    assert any("entries 5, 6: unkeyed after keyed entries from 4" in p for p in result.problems)
    rewrite(table, 2)  # an entry before the key, and the whole keyed part with it
    result = audit.verify(table.engine)
    assert any("the chain does not end in a keyed entry" in p for p in result.problems), result


@settings(max_examples=examples(12), deadline=None)
@given(st.integers(0, 3), st.integers(1, 4), st.data())
def test_any_entry_rewritten_without_the_key_is_found(
    unkeyed: int, keyed: int, data: st.DataObject
) -> None:
    """Whichever entry an insider changes, and whatever they recompute after it, a keyed chain
    says so (property over how much of the log predates the key and which entry changed)."""
    number = data.draw(st.integers(1, unkeyed + keyed))
    with tempfile.TemporaryDirectory() as folder:
        table = migrated_table(Path(folder) / "reconciler.db")
        old = os.environ.pop(KEY_ENV, None)
        try:
            if unkeyed:
                table.append_audit(entries("old", unkeyed))
            os.environ[KEY_ENV] = "k"
            table.append_audit(entries("new", keyed))
            assert audit.verify(table.engine).ok
            rewrite(table, number)
            assert not audit.verify(table.engine).ok
        finally:
            os.environ.pop(KEY_ENV, None)
            if old is not None:
                os.environ[KEY_ENV] = old
            table.close()


def test_the_anchor_finds_a_rewrite_and_a_table_restored_from_an_older_copy(
    table: SqlDocumentTable, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    anchor = tmp_path / "anchor" / "audit-head.json"
    monkeypatch.setenv(ANCHOR_ENV, str(anchor))
    table.append_audit(entries("r1", 2))
    table.append_audit(entries("r2", 2))
    held = json.loads(anchor.read_text())
    assert held["entries"] == 4
    result = audit.verify(table.engine)
    assert result.ok, result.problems
    assert any(p.startswith("anchored: the head at entry 4") for p in result.protection)
    # restored from an older copy: the last entries gone, the head row put back to match
    with table.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_log WHERE run_id = 'r2'"))
        second = conn.execute(text("SELECT entry_hash FROM audit_log ORDER BY seq")).all()[-1][0]
        conn.execute(text("UPDATE audit_head SET entry_hash = :h, entries = 2"), {"h": second})
    result = audit.verify(table.engine)
    assert any("but the log holds 2: entries were removed, or the table was restored" in p
               for p in result.problems), result.problems  # fmt: skip


def test_a_head_rolled_back_is_never_anchored_and_a_keyed_anchor_cannot_be_forged(
    table: SqlDocumentTable, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    anchor = tmp_path / "audit-head.json"
    monkeypatch.setenv(ANCHOR_ENV, str(anchor))
    monkeypatch.setenv(KEY_ENV, "k")
    table.append_audit(entries("r1", 2))
    before = anchor.read_text()

    def failed_write() -> None:
        with Session(table.engine) as session, session.begin():
            audit.append(session, entries("r2", 1))
            raise RuntimeError("the write failed: its transaction rolls back")

    with pytest.raises(RuntimeError):
        failed_write()
    assert anchor.read_text() == before
    assert audit.verify(table.engine).ok
    forged = json.loads(before) | {"entries": 1, "mac": None}
    anchor.write_text(json.dumps(forged))
    assert any("does not carry the key's HMAC" in p for p in audit.verify(table.engine).problems)


def test_audit_verify_says_the_protection_and_seal_starts_the_keyed_part(
    deploy: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (KEY_ENV, KEY_FILE_ENV, ANCHOR_ENV):
        monkeypatch.delenv(name, raising=False)
    deploy.note("a", effective_from="2025-01-01")
    deploy.init_ingest()
    code, unkeyed = deploy.json("audit", "verify")
    assert (code, unkeyed["ok"]) == (0, True)
    assert unkeyed["protection"][0].startswith("unkeyed:")
    monkeypatch.setenv(KEY_ENV, "k")
    code, waiting = deploy.json("audit", "verify")
    assert code == 1
    assert "run `reconciler audit seal` once" in waiting["problems"][0]
    code, sealed = deploy.json("audit", "seal")
    assert (code, sealed["ok"]) == (0, True), sealed
    assert sealed["protection"][0].startswith(f"keyed: every entry from entry {sealed['entries']}")
    result = deploy.cli("audit", "verify")
    assert result.exit_code == 0
    assert "protection: keyed: every entry from entry" in result.output


def test_the_head_is_exported_as_a_metric(
    table: SqlDocumentTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prometheus keeps the series it scrapes outside the table: the head's history there is
    a witness an insider cannot rewrite with the table."""
    for name in (KEY_ENV, KEY_FILE_ENV, ANCHOR_ENV):
        monkeypatch.delenv(name, raising=False)
    head = table.append_audit(entries("r1", 3))
    registry, _live = build_registry(table.metrics_snapshot)
    assert registry.get_sample_value("reconciler_audit_entries") == 3.0
    assert registry.get_sample_value("reconciler_audit_head_info", {"head": head[:16]}) == 1.0


def test_an_anchor_that_cannot_be_written_is_said_and_the_write_stands(
    table: SqlDocumentTable,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in (KEY_ENV, KEY_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv(ANCHOR_ENV, str(blocker / "audit-head.json"))
    head = table.append_audit(entries("r1", 2))  # committed, whatever the anchor does
    assert head
    assert "the audit head could not be anchored" in caplog.text
    problems = audit.verify(table.engine).problems
    assert any("cannot be read" in p for p in problems), problems


def test_a_page_hidden_from_its_documents_index_or_laid_at_another_door_is_found(
    table: SqlDocumentTable,
) -> None:
    """Issue 38's page of intents is found by its documents through ``audit_documents``, an
    index beside the chain: a row of it deleted (the page hidden from ``audit served`` for that
    document) or added (laid at another's door) is named by ``verify``; the chain itself is
    untouched, so only the index check can see it."""
    intents = [
        replace(
            entry,
            target_type="payload",
            before={"points": [n], "payload": {"doc_version": n}},
            after={"payload": {"v": n}},
        )
        for n, entry in enumerate(entries("r1", 3))
    ]
    table.append_audit(entries("r0", 1))
    table.append_audit([page_entry(intents)])
    assert audit.verify(table.engine).ok
    documents = AuditDocumentRow.__table__
    with Session(table.engine) as session, session.begin():
        page = session.scalar(select(AuditRow.seq).where(AuditRow.target_type == "payload_page"))
        session.execute(documents.delete().where(documents.c.target == "h:doc-1"))
    hidden = audit.verify(table.engine)
    assert not hidden.ok
    assert hidden.problems == [
        f"entry {page}: its documents' index (audit_documents) lacks h:doc-1; altered"
    ]
    with Session(table.engine) as session, session.begin():
        session.execute(documents.insert().values(target="h:doc-1", seq=page))
        session.execute(documents.insert().values(target="h:doc-9", seq=page))
    laid = audit.verify(table.engine)
    assert laid.problems == [
        f"entry {page}: its documents' index (audit_documents) adds h:doc-9; altered"
    ]
