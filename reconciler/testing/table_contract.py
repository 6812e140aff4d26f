"""What every ``DocumentTable`` promises, seen through the port only (``reconciler.ports``).

An adapter's test module imports these tests and provides a ``table`` fixture that yields an
empty, schema-ready table of the adapter (``tests/integration/test_document_table_contract.py``
does so for SQLite and PostgreSQL). Schema, driver faults and the audit chain's tamper checks
are the adapter's own (``test_table.py``, ``test_disk_full.py``, ``test_audit_chain.py``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.model import (
    OPEN_END,
    AuditEntry,
    Declaration,
    DeclarationKind,
    Document,
    Finding,
    ReingestRequest,
    RowChange,
    Severity,
    VersionState,
    page_entry,
)
from reconciler.payload import managed_values, payload_for, payload_values
from reconciler.ports import DocumentRename, DocumentTable

AT = datetime(2026, 2, 1, tzinfo=UTC)


def document(n: int, **changes: object) -> Document:
    values: dict[str, object] = {
        "doc_id": f"h:doc-{n}",
        "source": "h",
        "source_key": f"doc-{n}",
        "doc_family_id": f"h:fam-{n // 2}",
        "doc_version": n % 2 + 1,
        "version_state": VersionState.CURRENT,
        "doc_class": "policy",
    }
    values.update(changes)
    return Document(**values)  # type: ignore[arg-type]


def request(n: int) -> ReingestRequest:
    return ReingestRequest(
        doc_id=f"h:doc-{n}", source="h", source_key=f"doc-{n}", reason="in_place_edit"
    )


def test_documents_by_id_family_and_stream(table: DocumentTable) -> None:
    table.upsert_documents([document(n) for n in (3, 0, 2, 1)])
    assert set(table.get_documents(["h:doc-1", "h:doc-9"])) == {"h:doc-1"}
    ids = ["h:doc-1", "h:doc-9", "h:doc-3", "h:doc-1", *(f"x{n}" for n in range(600))]
    rows = {doc_id: row.doc_family_id for doc_id, row in table.get_documents(ids).items()}
    assert table.families_of(ids) == rows == {"h:doc-1": "h:fam-0", "h:doc-3": "h:fam-1"}
    assert table.known_families(["h:fam-1", "h:fam-9", "h:fam-1"]) == {"h:fam-1"}
    assert table.known_families([]) == set()
    many = [f"h:fam-{n}" for n in range(1200)]  # more than one query's worth
    assert table.known_families(many) == {"h:fam-0", "h:fam-1"}
    streamed = [d.doc_id for d in table.iter_documents(batch_size=2)]
    assert streamed == ["h:doc-0", "h:doc-1", "h:doc-2", "h:doc-3"]
    assert [d.doc_id for d in table.iter_documents(doc_ids=["h:doc-2"])] == ["h:doc-2"]


def test_the_rows_a_scan_names_with_other_ids_are_selected_by_the_table(
    table: DocumentTable,
) -> None:
    """``iter_renamed``: the rows of one source holding one of the keys under none of the ids
    (a re-keying's candidates), ordered by id; every key and id of a big scan in one read."""
    table.upsert_documents(
        [
            document(0),  # held as the scan names it
            document(1, doc_id="h:legacy-1"),  # adopted under an id of no "h:" form
            document(2),  # renamed: the scan names doc-2 "h:P2"
            document(3, doc_id="h:P1"),  # the id the scan holds, under another key
            document(4),  # a key the scan lacks (missing, not renamed)
            document(5, source="other", doc_id="other:doc-5"),  # another source's
        ]
    )
    scan = {"doc-0": "h:doc-0", "doc-1": "h:doc-1", "doc-2": "h:P2", "doc-3": "h:P1"}
    scan.update({f"k{n}": f"h:id-{n}" for n in range(1200)})  # more than a query's worth
    scan["doc-5"] = "h:doc-5"

    def renamed(keys: Iterable[str], ids: Iterable[str]) -> list[str]:
        return [row.doc_id for row in table.iter_renamed("h", keys=keys, ids=ids, batch_size=1)]

    assert renamed(scan, scan.values()) == ["h:doc-2", "h:legacy-1"]
    assert renamed(iter(scan), iter(scan.values())) == ["h:doc-2", "h:legacy-1"]
    assert renamed(scan, []) == ["h:P1", "h:doc-0", "h:doc-2", "h:legacy-1"]
    assert renamed([], scan.values()) == []
    rows = list(table.iter_renamed("h", keys=["doc-1"], ids=[]))
    assert rows == [table.get_documents(["h:legacy-1"])["h:legacy-1"]]


def test_the_identities_last_seen_at_some_paths_besides_some_keys(table: DocumentTable) -> None:
    """``identity_paths``: every key recorded with a path, or those at ``at`` and not in
    ``besides`` (the keys a scan lacks at the places it holds), selected by the table."""
    table.record_identities(
        "h",
        [
            ("doc-0", "h:fam-0", None, "a.md"),
            ("doc-1", "h:fam-0", None, "b.md"),
            ("old-1", "h:fam-0", None, "b.md"),  # two keys last seen at one path
            ("doc-2", "h:fam-1", None, None),  # no path recorded
        ],
    )
    table.record_identities("other", [("doc-0", "other:fam", None, "b.md")])
    everything = {"doc-0": "a.md", "doc-1": "b.md", "old-1": "b.md"}
    assert table.identity_paths("h") == everything
    assert table.identity_paths("h", at=iter(["b.md", "c.md"])) == {
        "doc-1": "b.md",
        "old-1": "b.md",
    }
    assert table.identity_paths("h", at=["b.md"], besides=iter(["doc-1", "x"])) == {"old-1": "b.md"}
    many = [f"k{n}" for n in range(1200)]  # more than a query's worth
    assert table.identity_paths("h", besides=[*many, "doc-0"]) == {
        "doc-1": "b.md",
        "old-1": "b.md",
    }
    assert table.identity_paths("h", at=[]) == {}


def test_the_payload_derived_from_a_streamed_row_is_the_written_documents(
    table: DocumentTable,
) -> None:
    """The check derives each row's expected payload from ``iter_documents``: whatever the
    dates (open, naive: taken as UTC, with microseconds), states (one not in the enum reads as
    ``unknown``), quarantine and links, it is the payload of the document as written, and a
    scoped stream keeps the order of the whole."""
    rng = random.Random(12)
    docs = []
    for n in range(120):
        start = rng.choice([None, AT, AT.replace(tzinfo=None), AT.replace(microsecond=250)])
        end = rng.choice([OPEN_END, AT + timedelta(days=n), datetime(1999, 5, 6, 7, 8, 9)])
        docs.append(
            document(
                n,
                doc_version=rng.randint(0, 4),
                version_state=rng.choice(list(VersionState)),
                superseded_by=rng.choice([None, f"h:doc-{n + 1}"]),
                effective_from=start,
                effective_to=end,
                doc_class=rng.choice([None, "policy", "faq"]),
                quarantined=rng.random() < 0.2,
                quarantine_reason=rng.choice([None, "broken"]),
            )
        )
    table.upsert_documents(docs)
    table.write_rows_and_outbox(  # a state this build does not know, as a newer one wrote it
        run_id="r0",
        actor="cli",
        changes=[RowChange("h:doc-7", "x/y", {}, {"version_state": "no-such-state"})],
        reingests=[],
        at=AT,
    )

    def as_utc(value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    written = {
        d.doc_id: dataclasses.replace(
            d,
            effective_from=as_utc(d.effective_from),
            effective_to=as_utc(d.effective_to),  # type: ignore[arg-type]
        )
        for d in docs
    }
    streamed = list(table.iter_documents(batch_size=7))
    assert sorted(d.doc_id for d in streamed) == sorted(written)
    for doc in streamed:
        expected = payload_for(written[doc.doc_id])
        if doc.doc_id == "h:doc-7":
            expected["version_state"] = "unknown"
        assert payload_values(doc) == tuple(expected.values()), doc.doc_id
    families = ["h:fam-3", "h:fam-9"]
    assert [d.doc_id for d in table.iter_documents(families=families)] == [
        d.doc_id for d in streamed if d.doc_family_id in families
    ]
    # The scan's reading of the same rows (``iter_expected``, issue 38): the same order, the
    # same values, whole or scoped.
    for scope in (None, families):
        rows = list(table.iter_documents(batch_size=7, families=scope))
        plain = list(table.iter_expected(batch_size=7, families=scope))
        assert [r[:4] for r in plain] == [
            (d.doc_id, d.source, d.source_hash, d.chunk_count) for d in rows
        ]
        assert [managed_values(*r[4:]) for r in plain] == [payload_values(d) for d in rows]


def test_rows_requests_and_audit_commit_together(table: DocumentTable) -> None:
    table.upsert_documents([document(0), document(1)])
    table.request_reingest(doc_id="h:doc-1", source="h", source_key="doc-1", reason="x")
    head, queued = table.write_rows_and_outbox(
        run_id="r1",
        actor="cli",
        changes=[
            RowChange(
                "h:doc-0",
                "dates/expired",
                {"version_state": "current"},
                {"version_state": VersionState.RETIRED},
            )
        ],
        reingests=[(request(0), "hash/changed"), (request(1), "hash/changed")],
        at=AT,
    )
    assert queued == 1  # doc-1 already had a pending request: not repeated, not audited
    assert table.get_documents(["h:doc-0"])["h:doc-0"].version_state is VersionState.RETIRED
    assert table.pending_reingest_for(["h:doc-0", "h:doc-1", "h:doc-2"]) == {
        "h:doc-0",
        "h:doc-1",
    }
    entries, hashes = table.run_entries_with_hashes("r1")
    assert [(e.target_type, e.target) for e in entries] == [
        ("row", "h:doc-0"),
        ("reingest", "h:doc-0"),
    ]
    assert hashes[-1] == head
    assert table.write_rows_and_outbox(
        run_id="r2", actor="cli", changes=[], reingests=[], at=AT
    ) == ("", 0)
    assert table.verify_audit().ok


def declaration(n: int, **changes: object) -> Declaration:
    values: dict[str, object] = {
        "id": f"d-{n:04d}",
        "kind": DeclarationKind.SUPERSEDE,
        "doc_id": f"h:doc-{n}",
        "target": f"h:doc-{n + 1}",
        "declared_by": "alice",
        "declared_at": AT + timedelta(seconds=n),
        "reason": "reviewed",
        "evidence": "titles 0.94 alike",
        "score": 0.9,
        "proposal": f"link-{n}",
    }
    values.update(changes)
    return Declaration(**values)  # type: ignore[arg-type]


def test_declarations_are_recorded_revoked_and_restored_with_their_audit_entries(
    table: DocumentTable,
) -> None:
    made = [declaration(n, run_id="r1") for n in range(3)]
    head = table.write_declarations(run_id="r1", actor="declare", at=AT, added=made)
    assert table.declarations() == made  # in the order they were made, every field kept
    assert table.declarations(ids=["d-0001", "d-9999"]) == [made[1]]
    many = [f"d-{n:04d}" for n in range(1200)]  # more than one query's worth of ids
    assert table.declarations(ids=many) == made

    later = AT + timedelta(days=1)
    table.write_declarations(run_id="r2", actor="rollback", at=later, revoked=["d-0000"])
    assert [d.id for d in table.declarations()] == ["d-0001", "d-0002"]
    [revoked] = table.declarations(active=False, ids=["d-0000"])
    assert (revoked.revoked_at, revoked.revoked_by) == (later, "r2")
    # revoking what is revoked, restoring what is active: nothing to write, no entry
    assert (
        table.write_declarations(
            run_id="r3", actor="rollback", at=later, revoked=["d-0000"], restored=["d-0001"]
        )
        == ""
    )
    table.write_declarations(run_id="r4", actor="rollback", at=later, restored=["d-0000"])
    assert table.declarations() == made

    entries = [e for run in ("r1", "r2", "r4") for e in table.run_entries_with_hashes(run)[0]]
    assert [(e.run_id, e.target_type, e.target) for e in entries] == [
        ("r1", "declaration", "d-0000"),
        ("r1", "declaration", "d-0001"),
        ("r1", "declaration", "d-0002"),
        ("r2", "declaration", "d-0000"),
        ("r4", "declaration", "d-0000"),
    ]
    assert entries[0].before is None
    assert entries[0].after == made[0].to_json()
    assert (entries[3].after["revoked_by"], entries[4].after["revoked_by"]) == ("r2", None)
    assert table.run_entries_with_hashes("r1")[1][-1] == head
    assert table.verify_audit().ok


def test_a_declaration_that_cannot_be_written_writes_nothing(table: DocumentTable) -> None:
    table.write_declarations(run_id="r1", actor="declare", at=AT, added=[declaration(0)])
    with pytest.raises(Exception):  # noqa: B017, PT011 (each driver raises its own)
        table.write_declarations(
            run_id="r2", actor="declare", at=AT, added=[declaration(1), declaration(0)]
        )
    assert [d.id for d in table.declarations()] == ["d-0000"]
    assert table.run_entries_with_hashes("r2")[0] == []
    assert table.verify_audit().ok


def test_audit_appends_extend_one_chain(table: DocumentTable) -> None:
    assert table.append_audit([]) == ""
    first = AuditEntry("r1", AT, "cli", "test", "row", "h:doc-0", {"a": 1}, {"a": 2})
    later = AuditEntry("r2", AT, "cli", "test", "payload", "h:doc-0", None, {"a": 3})
    head = table.append_audit([first])
    assert table.append_audit([later]) != head
    assert table.runs_touching_after(head, {"h:doc-0"}, exclude="r1") == ["r2"]
    assert table.runs_touching_after(head, {"h:doc-9"}, exclude="r1") == []
    shown = list(table.audit_entries(run_id="r2"))
    assert [(e["run_id"], e["target_type"]) for e in shown] == [("r2", "payload")]
    verification = table.verify_audit()
    assert verification.ok
    assert verification.entries == 2


def test_a_page_of_intents_is_found_by_each_of_its_documents(table: DocumentTable) -> None:
    """Issue 38: one batch's payload intents are one ``payload_page`` entry; each of its
    documents finds it as its own intent (served, history, rollback, show, recovery)."""
    intents = [
        AuditEntry(
            "r1",
            AT,
            "apply",
            f"why {n}",
            "payload",
            f"h:doc-{n}",
            {"points": [n, 10 + n], "payload": {"doc_version": n}},
            {"payload": {"v": n}},
        )
        for n in (0, 1, 1, 2)  # (doc-1 twice: two variants of its chunks)
    ]
    first = table.append_audit([AuditEntry("r0", AT, "cli", "t", "row", "h:doc-0", {}, {})])
    head = table.append_audit([page_entry(intents)])
    table.append_audit([AuditEntry("r1", AT, "apply", "confirm", "confirm", "r1", None, {})])
    entries, hashes = table.run_entries_with_hashes("r1")
    assert entries[:4] == intents
    assert hashes[:4] == [head] * 4
    upto = table.verify_audit().entries + 10
    about = list(table.audit_entries_about(["h:doc-1", "h:doc-9"], upto=upto))
    assert [c.entry for c in about] == intents[1:3]
    assert {c.entry_hash for c in about} == {head}
    assert list(table.audit_targets(kinds=["payload"], upto=upto)) == [
        "h:doc-0",
        "h:doc-1",
        "h:doc-2",
    ]
    assert table.runs_touching_after(first, {"h:doc-2"}, exclude="r0") == ["r1"]
    # a rollback's pages (issue 35): a run's documents in order, a page's entries, later runs
    assert table.run_documents(["r1"], limit=2) == ["h:doc-0", "h:doc-1"]
    assert table.run_documents(["r0", "r1"], after="h:doc-1") == ["h:doc-2"]
    assert table.run_entries_of("r1", kinds=["payload"], targets=["h:doc-1"]) == intents[1:3]
    assert [e.target for e in table.run_entries_of("r1", kinds=["confirm", "row"])] == ["r1"]
    assert (table.runs_touching_run("r0"), table.runs_touching_run("r1")) == (["r1"], [])
    shown = list(table.audit_entries(target="h:doc-2"))
    assert [(e["target_type"], e["target"], e["entry_hash"]) for e in shown] == [
        ("payload", "h:doc-2", head)
    ]
    assert shown[0]["before"] == {"points": [2, 12], "payload": {"doc_version": 2}}
    assert len(list(table.audit_entries(run_id="r1"))) == 5
    assert [c.entry for c in table.walk_audit()][1:5] == intents
    assert table.verify_audit().ok


def test_run_log_from_start_to_end(table: DocumentTable) -> None:
    run = table.start_run(mode="apply", actor="cli", shard="0/1", checks="dates,hash")
    assert table.runs_to_resolve(shard="0/1") == [(run, "running")]
    with pytest.raises(TypeError, match="unknown run statistics"):
        table.finish_run(run, status="succeeded", bogus=1.0)
    table.finish_run(run, status="failed", counts={"unconfirmed": 1}, rows_written=2)
    assert table.runs_to_resolve(shard="0/1") == [(run, "failed")]
    table.set_run_counts(run, {})
    assert table.runs_to_resolve(shard="0/1") == []
    entry = table.get_run(run)
    assert entry is not None
    assert (entry.status, entry.shard, entry.checks, entry.counts) == (
        "failed",
        "0/1",
        "dates,hash",
        {},
    )
    assert table.get_run("nope") is None
    back = table.start_run(mode="rollback", actor="cli")
    table.finish_run(back, status="succeeded", counts={"rolled_back": run})
    assert table.rollbacks() == {back: run}
    assert [r.run_id for r in table.last_runs(1)] == [back]


def test_findings_are_kept_per_run(table: DocumentTable) -> None:
    run = table.start_run(mode="check", actor="cli")
    finding = Finding(
        check="dates",
        kind="expired",
        severity=Severity.WARNING,
        family="h:fam-0",
        doc_id="h:doc-0",
        expected={"version_state": "retired"},
        actual={"version_state": "current"},
        action="retire",
    )
    table.record_findings(run, [finding], outstanding=[False])
    [stored] = table.findings_of(run)
    assert (stored["check"], stored["kind"], stored["doc_id"]) == ("dates", "expired", "h:doc-0")
    assert table.findings_of("other") == []


def test_many_findings_are_kept_in_order_with_their_values(table: DocumentTable) -> None:
    run = table.start_run(mode="check", actor="cli")
    findings = [
        Finding(
            check="payload",
            kind="payload_drift",
            severity=Severity.CRITICAL,
            family=None if n % 3 == 0 else f"h:fam-{n}",
            doc_id=f"h:doc-{n}",
            expected=None if n % 2 else {"doc_version": n, "nested": ["a\x00b"]},
            actual=[n, None] if n % 2 else "é",
            action=None,  # type: ignore[arg-type]
        )
        for n in range(250)
    ]
    table.record_findings(run, findings)

    stored = table.findings_of(run)
    assert [f["doc_id"] for f in stored] == [f"h:doc-{n}" for n in range(250)]
    for n, found in enumerate(stored):
        assert found["family"] == (None if n % 3 == 0 else f"h:fam-{n}")
        assert found["actual"] == ([n, None] if n % 2 else "é")
        if n % 2:
            assert found["expected"] is None
        else:
            assert found["expected"]["doc_version"] == n
            assert "\x00" not in found["expected"]["nested"][0]  # spelt out, storable
    table.record_findings(run, [])  # nothing to store: no error, nothing added
    assert len(table.findings_of(run)) == 250


__all__ = [
    "test_a_declaration_that_cannot_be_written_writes_nothing",
    "test_a_page_of_intents_is_found_by_each_of_its_documents",
    "test_a_rekey_renames_a_document_everywhere_in_one_audited_transaction",
    "test_audit_appends_extend_one_chain",
    "test_declarations_are_recorded_revoked_and_restored_with_their_audit_entries",
    "test_documents_by_id_family_and_stream",
    "test_findings_are_kept_per_run",
    "test_many_findings_are_kept_in_order_with_their_values",
    "test_rows_requests_and_audit_commit_together",
    "test_run_log_from_start_to_end",
    "test_the_identities_last_seen_at_some_paths_besides_some_keys",
    "test_the_payload_derived_from_a_streamed_row_is_the_written_documents",
    "test_the_rows_a_scan_names_with_other_ids_are_selected_by_the_table",
]


def test_a_rekey_renames_a_document_everywhere_in_one_audited_transaction(
    table: DocumentTable,
) -> None:
    """Issue 34: its row (id and source key), its identity, the links and pending requests
    and declarations that name it; repeated, nothing more; the swapped rename undoes it."""
    table.upsert_documents(
        [document(0, superseded_by="h:doc-1", version_state=VersionState.SUPERSEDED), document(1)]
    )
    table.record_identities("h", [("doc-0", "h:fam-0", "sha256:0", "a.md")])
    table.record_identities("h", [("doc-1", "h:fam-0", "sha256:1", "b.md")])
    table.record_identities("h", [("P1", "h:other", "sha256:1", "b.md")])  # seen under new ids
    table.request_reingest(doc_id="h:doc-1", source="h", source_key="doc-1", reason="x")
    table.write_declarations(
        run_id="r0", actor="declare", at=AT, added=[declaration(0, doc_id="h:doc-1")]
    )
    renames = [
        DocumentRename("h", "h:doc-1", "h:P1", "doc-1", "P1"),
        DocumentRename("h", "h:doc-0", "h:P0", "doc-0", "P0"),
    ]
    first = table.append_audit([AuditEntry("r0", AT, "cli", "t", "row", "h:doc-0", {}, {})])
    head = table.rekey_documents(run_id="rk", actor="rekey", at=AT, renames=renames)
    # a re-keying is a later run of the documents it renamed, found by their old ids
    assert table.runs_touching_run("r0") == ["rk"]
    assert table.runs_touching_after(first, {"h:doc-1"}, exclude="r0") == ["rk"]
    rows = table.get_documents(["h:doc-0", "h:doc-1", "h:P0", "h:P1"])
    assert sorted(rows) == ["h:P0", "h:P1"]
    assert rows["h:P0"].superseded_by == "h:P1"
    assert (rows["h:P0"].source_key, rows["h:P1"].source_key) == ("P0", "P1")
    by_key, _ = table.identities("h")
    assert by_key == {"P0": "h:fam-0", "P1": "h:fam-0"}  # the old one's family kept
    assert table.identity_paths("h") == {"P0": "a.md", "P1": "b.md"}
    assert table.pending_reingest_for(["h:doc-1", "h:P1"]) == {"h:P1"}
    assert [d.doc_id for d in table.declarations()] == ["h:P1"]
    entries, hashes = table.run_entries_with_hashes("rk")
    assert [(e.target_type, e.target, e.before["doc_id"]) for e in entries] == [
        ("rekey_row", "h:P1", "h:doc-1"),
        ("rekey_row", "h:P0", "h:doc-0"),
    ]
    assert hashes[-1] == head
    assert table.rekey_documents(run_id="rk", actor="rekey", at=AT, renames=renames) == ""

    back = [DocumentRename(r.source, r.new_id, r.old_id, r.new_key, r.old_key) for r in renames]
    table.rekey_documents(run_id="rb", actor="rollback", at=AT, renames=back)
    rows = table.get_documents(["h:doc-0", "h:doc-1"])
    assert rows["h:doc-0"].superseded_by == "h:doc-1"
    assert rows["h:doc-1"].source_key == "doc-1"
    assert table.identity_paths("h") == {"doc-0": "a.md", "doc-1": "b.md"}
    assert table.verify_audit().ok
