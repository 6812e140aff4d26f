"""``payload``: document table <-> chunk payloads — every chunk must say what its row says,
hold the text its row registered (``content_hash`` = the row's ``source_hash``), and be there
(as many chunks as the row says it has); in a split store, in the collection its row's state
puts it in (``rules.time_rule.kept_in_main``)."""

from __future__ import annotations

from typing import Any

from reconciler.check_inputs import (
    CheckContext,
    ChunkAggregate,
    CollectionView,
    FamilyView,
    Wide,
    expected_variant,
)
from reconciler.checks.common import quarantine_lifted
from reconciler.model import SERVABLE_STATES, Document, Finding, ReingestRequest, Severity
from reconciler.payload import Variant, payload_for
from reconciler.rules.time_rule import kept_in_main

CHECK = "payload"
ORPHAN_REASON = "orphan_chunks"
#: The quarantine of a document some of whose chunks hold another text than its row's.
STALE_REASON = "stale_chunks"
MISSING_REASON = "missing_chunks"
#: Chunks of a split store in the other collection than their row's state puts them in.
MISPLACED = "misplaced"


def _servable(values: dict[str, Any]) -> bool:
    return values.get("version_state") in SERVABLE_STATES and values.get("quarantined") is not True


def check_payload(view: FamilyView, ctx: CheckContext) -> list[Finding]:
    """Find chunks whose managed payload differs from ``payload_for(row)``."""
    findings = []
    for row in view.rows:
        aggregate = view.chunks.get(row.doc_id)
        if (
            row.quarantined
            and row.quarantine_reason == STALE_REASON
            and not (aggregate is not None and aggregate.stale)
        ):
            # (before the scan a document's chunks are not known: the family is checked
            # again with them, and the quarantine stays while a stale chunk is left)
            findings.append(
                quarantine_lifted(
                    CHECK, STALE_REASON, row, view.family, "every chunk holds the row's text"
                )
            )
        if aggregate is None:
            continue
        if aggregate.variants:
            findings.append(_drift(row, aggregate, view.family))
        if aggregate.stale:
            findings.append(_stale(row, aggregate, view.family))
        if row.chunk_count and aggregate.count < row.chunk_count:
            findings.append(_missing(row, aggregate, view.family))
        if ctx.split is not None:
            misplaced = check_placement(row, aggregate, view.family, ctx.split)
            if misplaced is not None:
                findings.append(misplaced)
    return findings


def check_placement(
    row: Document, aggregate: ChunkAggregate, family: str, split: tuple[str, str]
) -> Finding | None:
    """Chunks of a split store in the collection their row's state does not put them in: a
    servable version's in the archive (a retrieval on the main collection misses it:
    critical), or another version's in the main collection (only a retrieval path that forgets
    ``default_filter()`` would return it: a warning)."""
    state = payload_for(row)["version_state"]
    main, archive = split
    kept = kept_in_main(state)
    wrong = aggregate.archived if kept else aggregate.count - aggregate.archived
    if not wrong:
        return None
    where, found = (main, archive) if kept else (archive, main)
    return Finding(
        check=CHECK,
        kind=MISPLACED,
        severity=Severity.CRITICAL if kept else Severity.WARNING,
        family=family,
        doc_id=row.doc_id,
        expected={"collection": where, "version_state": state},
        actual={"collection": found, "chunks": wrong, "of": aggregate.count},
        action=f"move {wrong} chunk(s) to {where} (vectors and payload copied as they are)",
    )


def _reingest(row: Document, reason: str) -> ReingestRequest:
    return ReingestRequest(
        doc_id=row.doc_id, source=row.source, source_key=row.source_key, reason=reason
    )


def _stale(row: Document, aggregate: ChunkAggregate, family: str) -> Finding:
    """Chunks of an older text than the row's (a re-ingest that stopped before the old chunks
    went, a pipeline that re-chunked a stale export): only re-embedding fixes them."""
    return Finding(
        check=CHECK,
        kind=STALE_REASON,
        severity=Severity.CRITICAL,
        family=family,
        doc_id=row.doc_id,
        expected={"content_hash": row.source_hash},
        actual={"stale_chunks": aggregate.stale, "of": aggregate.count},
        action=(
            "quarantine the document's chunks and request a re-ingest (next: `reconciler "
            "ingest` or your ingestion pipeline, then `reconciler apply`)"
        ),
        quarantine=(STALE_REASON, True),
        reingest=_reingest(row, STALE_REASON),
    )


def _missing(row: Document, aggregate: ChunkAggregate, family: str) -> Finding:
    """Fewer chunks than the ingestion wrote: an ingest that stopped mid-document, or points
    lost by the index. What is left is still this version's text, so nothing is hidden."""
    return Finding(
        check=CHECK,
        kind=MISSING_REASON,
        severity=Severity.CRITICAL if aggregate.count == 0 else Severity.WARNING,
        family=family,
        doc_id=row.doc_id,
        expected={"chunks": row.chunk_count},
        actual={"chunks": aggregate.count},
        action=(
            "request a re-ingest (next: `reconciler ingest` or your ingestion pipeline, then "
            "`reconciler apply`)"
        ),
        reingest=_reingest(row, MISSING_REASON),
    )


def check_points(expected: int, found: int) -> list[Finding]:
    """The collection counted against the table: of the ``expected`` chunks the rows say they
    have, the collection holds ``found`` (fewer: a shard or collection that lost points)."""
    missing = expected - found
    if missing <= 0:
        return []
    return [
        Finding(
            check=CHECK,
            kind="points_missing",
            severity=Severity.CRITICAL,
            family=None,
            doc_id=None,
            expected={"chunks": expected},
            actual={"chunks": found, "missing": missing},
            action=(
                "the chunk index holds fewer points than the table registers: if it lost them "
                "(a damaged shard, a restore from an old snapshot), restore it; the documents "
                "that lack chunks are asked to be re-ingested"
            ),
        )
    ]


def _drift(row: Document, aggregate: ChunkAggregate, family: str) -> Finding:
    expected = dict(expected_variant(row))
    row_servable = _servable(expected)
    worst: dict[str, Any] | None = None
    keys: set[str] = set()
    dangerous = False
    for variant in aggregate.variants:
        found = dict(variant)
        differing = {k for k in expected if expected[k] != found.get(k)}
        keys |= differing
        if _servable(found) and not row_servable:
            dangerous = True
            worst = found
        elif worst is None:
            worst = found
    assert worst is not None
    shown = sorted(keys)
    return Finding(
        check=CHECK,
        kind="payload_drift",
        severity=Severity.CRITICAL if dangerous else Severity.WARNING,
        family=family,
        doc_id=row.doc_id,
        expected={k: expected[k] for k in shown},
        actual={
            **{k: worst.get(k) for k in shown},
            "chunks": aggregate.drifted,
            "of": aggregate.count,
        },
        action=f"set_payload on {aggregate.drifted} chunk(s) from the document row",
    )


def check_orphans(doc_id: str | None, aggregate: ChunkAggregate) -> Finding | None:
    """Chunks whose document has no row: quarantined (never deleted)."""
    loose = {variant: n for variant, n in aggregate.variants.items() if not _quarantined(variant)}
    if not loose:
        return None
    family = next((dict(v).get("doc_family_id") for v in loose), None)
    return Finding(
        check=CHECK,
        kind="orphan_chunks",
        severity=Severity.CRITICAL if any(_servable(dict(v)) for v in loose) else Severity.WARNING,
        family=family if isinstance(family, str) else None,
        doc_id=doc_id,
        expected="a document row for these chunks",
        actual={"chunks": sum(loose.values())},
        action=f"quarantine {sum(loose.values())} orphan chunk(s)",
        payload_only={"quarantined": True, "quarantine_reason": ORPHAN_REASON},
    )


def check_orphan_placement(
    doc_id: str, aggregate: ChunkAggregate, split: tuple[str, str]
) -> Finding | None:
    """Chunks of a document without a row in a split store's main collection: no row says
    they may be served (they are quarantined), so they belong in the archive."""
    main, archive = split
    wrong = aggregate.count - aggregate.archived
    if not wrong:
        return None
    family = next((dict(v).get("doc_family_id") for v in aggregate.variants), None)
    return Finding(
        check=CHECK,
        kind=MISPLACED,
        severity=Severity.WARNING,
        family=family if isinstance(family, str) else None,
        doc_id=doc_id,
        expected={"collection": archive, "version_state": "(no document row)"},
        actual={"collection": main, "chunks": wrong, "of": aggregate.count},
        action=f"move {wrong} chunk(s) to {archive} (vectors and payload copied as they are)",
    )


def _quarantined(variant: Variant) -> bool:
    return dict(variant).get("quarantined") is True


def collection_payload(view: CollectionView) -> Wide:
    """Over the whole collection: points the rows say exist and it lacks (a run of the whole
    shard), and chunks whose doc_id has no row (the tally keeps them apart: no pass over every
    document), quarantined, and in a split store moved out of the main collection."""
    findings = check_points(view.chunks_expected, view.chunks_found) if view.whole else []
    for orphan_id, aggregate in sorted(view.orphans, key=lambda kv: str(kv[0])):
        finding = check_orphans(orphan_id, aggregate)
        if finding is not None and view.in_scope(finding):
            findings.append(finding)
        if view.split is not None and orphan_id is not None:
            placed = check_orphan_placement(orphan_id, aggregate, view.split)
            if placed is not None and view.in_scope(placed):
                findings.append(placed)
    return Wide(tuple(findings), checked=view.chunks_scanned)
