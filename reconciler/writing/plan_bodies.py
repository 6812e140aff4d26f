"""A saved plan's body: a ``Plan`` as JSON per document (each row's managed fields before and
after, the payload its chunks get, its re-ingest request, a split store's move, and the
fingerprint of its chunks), and back (``reconciler.writing.approving`` saves and applies it)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from reconciler.model import Document, ReingestRequest, VersionState, fields_from_json, jsonable
from reconciler.planning import ROW_FIELDS, MoveTarget, PayloadTarget, Plan, RowUpdate
from reconciler.ports import ChunkIndex


def held_plan(plan: Plan, held: Collection[str]) -> Plan:
    """The part of ``plan`` that writes the documents ``held``."""
    return Plan(
        row_updates=tuple(u for u in plan.row_updates if u.doc_id in held),
        payload_targets=tuple(t for t in plan.payload_targets if t.doc_id in held),
        reingests=tuple(r for r in plan.reingests if r.doc_id in held),
        moves=tuple(m for m in plan.moves if m.doc_id in held),
    )


def row_values(row: Document) -> dict[str, Any]:
    """A row's managed fields as JSON (what a plan holds of it before and after)."""
    return {f: jsonable(getattr(row, f)) for f in ROW_FIELDS}


def chunk_fingerprints(
    index: ChunkIndex, doc_ids: Collection[str], *, batch: int = 1000
) -> dict[str, str]:
    """Each document's chunks, fingerprinted: their ids and managed payloads (sha256); a
    document without chunks is absent."""
    found: dict[str, list[tuple[str, Any]]] = {}
    ids = sorted(doc_ids)
    if not ids or not index.exists():
        return {}
    for start in range(0, len(ids), max(batch, 1)):
        for chunk in index.scroll(batch_size=batch, doc_ids=ids[start : start + batch]):
            if chunk.doc_id is not None:
                found.setdefault(chunk.doc_id, []).append(
                    (str(chunk.point_id), jsonable(dict(chunk.payload)))
                )
    return {doc: digest(sorted(chunks, key=lambda c: c[0])) for doc, chunks in found.items()}


def digest(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def plan_body(plan: Plan, chunks: Mapping[str, str]) -> dict[str, Any]:
    """``plan`` as JSON, per document (``chunks``: their fingerprints, ``chunk_fingerprints``)."""
    docs: dict[str, dict[str, Any]] = {}

    def doc(doc_id: str, family: str | None) -> dict[str, Any]:
        return docs.setdefault(doc_id, {"family": family, "chunks": chunks.get(doc_id)})

    for update in plan.row_updates:
        entry = doc(update.doc_id, update.family)
        entry["before"] = row_values(update.before)
        entry["after"] = row_values(update.after)
        entry["reasons"] = list(update.reasons)
    for target in plan.payload_targets:
        if target.doc_id is None:
            continue  # (chunks without a doc_id: the next run finds them again)
        doc(target.doc_id, target.family)["payload"] = {
            "payload": jsonable(dict(target.payload)),
            "points": target.points,
            "reasons": list(target.reasons),
            "partial": target.partial,
        }
    for request in plan.reingests:
        doc(request.doc_id, None)["reingest"] = {
            "source": request.source,
            "source_key": request.source_key,
            "reason": request.reason,
        }
    for move in plan.moves:
        doc(move.doc_id, move.family)["move"] = {
            "to_archive": move.to_archive,
            "points": move.points,
            "reasons": list(move.reasons),
        }
    return {"version": 1, "documents": {k: docs[k] for k in sorted(docs)}}


def row_of(current: Document, values: Mapping[str, Any]) -> Document:
    fields = fields_from_json(values)
    if fields.get("version_state") is not None:
        fields["version_state"] = VersionState(fields["version_state"])
    return dataclasses.replace(current, **fields)


def plan_from_body(
    body: Mapping[str, Any], rows: Mapping[str, Document], docs: Iterable[str] | None = None
) -> Plan:
    """The ``Plan`` a saved body holds, its rows' ``before`` read from ``rows`` (the rows as
    they are now); only the documents ``docs`` when given."""
    updates: list[RowUpdate] = []
    targets: list[PayloadTarget] = []
    reingests: list[ReingestRequest] = []
    moves: list[MoveTarget] = []
    documents = body["documents"]
    for doc_id in documents if docs is None else docs:
        entry = documents[doc_id]
        family = entry.get("family") or ""
        if "after" in entry and doc_id in rows:
            before = rows[doc_id]
            after = row_of(before, entry["after"])
            updates.append(RowUpdate(doc_id, family, before, after, tuple(entry["reasons"])))
        if "payload" in entry:
            write = entry["payload"]
            targets.append(
                PayloadTarget(
                    doc_id,
                    entry.get("family"),
                    write["payload"],
                    int(write["points"]),
                    tuple(write["reasons"]),
                    partial=bool(write["partial"]),
                )
            )
        if "reingest" in entry:
            asked = entry["reingest"]
            reingests.append(
                ReingestRequest(doc_id, asked["source"], asked["source_key"], asked["reason"])
            )
        if "move" in entry:
            move = entry["move"]
            moves.append(
                MoveTarget(
                    doc_id,
                    family,
                    bool(move["to_archive"]),
                    int(move["points"]),
                    tuple(move["reasons"]),
                )
            )
    return Plan(tuple(updates), tuple(targets), tuple(reingests), (), tuple(moves))
