"""A re-keying's reads and writes: documents given the new ids their source names them by.

``pending_rekey`` reads what a source's scan pairs (``rules.rekeying``: a registered document
whose id the source no longer holds, and the unregistered one at its last path). ``ingest``
refuses to register the new ids of those pairs and ``run`` reports them
(``family/rekey_pending``) instead of counting the old ids missing, so a document is never
served under two ids; ``reconciler rekey`` applies them.

A re-keying is planned (``Rekeying.planned``: the pairs, and the points each old id names,
read before anything is written) and its plan is an ``Executable`` the one executor applies
(``executing``), writing as every writer here does, crash-ordered:

1. one ``rekey`` intent is audited: the pairs, and each old id's points with their chunk ids;
2. one table transaction renames each document (``Applier.rename_rows``: row, identity, the
   ``superseded_by`` links, pending requests and declarations that name it, one
   ``rekey_row`` entry each);
3. payload-only batches (``Applier.write_covered``) set ``doc_id`` and ``chunk_id`` on those
   points, and every other key in which a framework's layout names the document
   (``framework_ids``: LlamaIndex's ``document_id``, ``ref_doc_id`` and its serialised node's
   source; LangChain's metadata), as each point holds them when its batch is written. Point
   ids are kept: they were derived from the old chunk ids, and nothing reads them back from a
   chunk id, so nothing is embedded or re-created;
4. a confirmation closes the intent.

Every step can be repeated (a rename done is skipped; a payload set twice is set once), so a
run killed between any two of them is finished by the next holder of the lease from its
intent (``Rekeying.audited``: the same plan from step 2, executed by ``writing.recovery``). A
rollback of a re-keying executes the swapped pairs' plan the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from reconciler.model import ALL_KEYS, AuditEntry, AuditKind, PayloadWrite, SourceSnapshot
from reconciler.payload import KeyMap
from reconciler.ports import ChunkIndex, DocumentReader
from reconciler.ports.table import DocumentRename
from reconciler.rules.rekeying import RekeyPair, RekeyPlan, pair_documents, place_of
from reconciler.writing.applying import Applier

log = logging.getLogger(__name__)

#: The reason of a re-keying's audit entries.
REASON = "rekey"
#: Keys beside the managed ones in which a framework's layout names a chunk's document
#: (``payload.LAYOUTS``: LlamaIndex's flat ``document_id`` and ``ref_doc_id``, a LangChain
#: ``metadata.source`` not mapped to ``doc_id``), read where the version keys live.
FRAMEWORK_KEYS = ("source", "document_id", "ref_doc_id")
#: LlamaIndex's serialised node: its relationships name the source document.
NODE = "_node_content"
#: Points a payload batch of a re-keying holds, unless one document has more: a document's
#: points always go in one batch (one request), so none is left under two ids between two.
BATCH = 256


def pending_rekey(table: DocumentReader, snapshot: SourceSnapshot) -> RekeyPlan:
    """The pairs (and conflicts) a source's scan holds: registered documents its source now
    names with other ids (``rules.rekeying``). Reads the identities of the keys the scan
    lacks last seen at places it holds (``identity_paths``), the source's rows that hold a
    key of the scan under an id the scan does not hold (``iter_renamed``), and the rows at
    the places the scan holds under new ids. The table selects the first two, so a run, an
    ingestion or a watch's run at some paths where nothing was re-keyed reads no row: never
    every row and identity of the source, streamed to be sifted, as it did.

    The rows read are those that hold a key of the scan under another id, less those whose
    id the scan holds (under another key): ``pair_documents`` leaves such a row out (its id
    is not gone), and the places it would claim only widen the rows of new ids read
    (``registered``), which ``pair_documents`` looks at only where a row it keeps claims the
    place. So the plan is the one every row of the source, streamed and sifted, gives."""
    source = snapshot.source
    keyed = {doc.source_key: doc for doc in snapshot.documents}
    ids = {doc.doc_id for doc in snapshot.documents}
    places = {place_of(doc) for doc in snapshot.documents}
    paths = table.identity_paths(source, at=places, besides=keyed)
    by_path = table.get_documents(f"{source}:{k}" for k in sorted(paths)) if paths else {}
    gone = [
        *by_path.values(),
        *table.iter_renamed(source, keys=keyed, ids=ids),
    ]
    if not gone:
        return RekeyPlan()
    claimed = {paths[row.source_key] for row in gone if row.source_key in paths} | {
        place_of(keyed[row.source_key]) for row in gone if row.source_key in keyed
    }
    candidates = [doc.doc_id for doc in snapshot.documents if place_of(doc) in claimed]
    registered = table.get_documents(candidates) if candidates else {}
    return pair_documents(source, snapshot.documents, gone=gone, paths=paths, registered=registered)


#: One point as a re-keying's intent holds it: its id, chunk id and ``superseded_by``.
HeldPoint = tuple[str | int, str | None, str | None]


@dataclass(frozen=True)
class Rekeying:
    """A re-keying planned: its pairs and the points it rewrites (by document, as the index
    held them when it was planned), applied by ``execute`` (the module docstring's four
    steps; none when it has no pair). ``through``: the hash of its intent when a run that
    died audited it already (the plan is then finished from step 2)."""

    pairs: tuple[RekeyPair, ...]
    points: Mapping[str, tuple[HeldPoint, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    through: str | None = None

    @classmethod
    def planned(cls, table: DocumentReader, index: ChunkIndex, plan: RekeyPlan) -> Rekeying:
        """The plan of ``plan``'s pairs, with the points they rewrite read now."""
        held = chunks_of(table, index, plan) if plan.pairs else {}
        return cls(plan.pairs, _frozen(held))

    @classmethod
    def audited(cls, intent: AuditEntry, through: str) -> Rekeying:
        """The plan a ``rekey`` intent holds (audited as ``through``), to finish it."""
        pairs = tuple(RekeyPair.from_json(p) for p in intent.after["pairs"])
        return cls(pairs, _frozen(intent.before.get("points", {})), through)

    def intent(self, *, run_id: str, actor: str, at: datetime) -> AuditEntry:
        """The audited intent: the pairs (after) and the points rewritten with their chunk
        ids and successors (before), all that finishing it needs."""
        return AuditEntry(
            run_id,
            at,
            actor,
            REASON,
            AuditKind.REKEY,
            run_id,
            {"points": {doc: [list(p) for p in held] for doc, held in self.points.items()}},
            {"pairs": [pair.to_json() for pair in self.pairs]},
        )

    def execute(self, applier: Applier) -> None:
        """The intent (unless audited before), the renames, the payload batches, the
        confirmation (``executing.Executable``)."""
        if not self.pairs:
            return
        if self.through is None:
            at = applier.clock.now()
            applier.intents.intend([self.intent(run_id=applier.run_id, actor=applier.actor, at=at)])
        else:
            applier.intents.resume(self.through)
        applier.rename_rows(
            [DocumentRename(p.source, p.old_id, p.new_id, p.old_key, p.new_key) for p in self.pairs]
        )
        back = {p.new_id: p.old_id for p in self.pairs}
        for batch in whole_documents(payload_writes(self.pairs, self.points), BATCH):
            applier.write_covered(with_framework_ids(applier.index, batch, back))
        applier.confirm(pairs=len(self.pairs))
        log.info("re-keyed %d document(s), %d point(s)", len(self.pairs), applier.result.points)


def _frozen(points: Mapping[str, Sequence[Sequence[Any]]]) -> Mapping[str, tuple[HeldPoint, ...]]:
    """Points by document, as a frozen plan holds them."""
    return MappingProxyType(
        {doc: tuple((p[0], p[1], p[2]) for p in held) for doc, held in points.items()}
    )


def chunks_of(
    table: DocumentReader, index: ChunkIndex, plan: RekeyPlan
) -> dict[str, list[HeldPoint]]:
    """The points a re-keying rewrites, by document, as the index holds them now: each old
    id's, and those of the documents superseded by an old id (their ``superseded_by``), in
    whatever family they are (the rows are streamed once)."""
    old = plan.old_ids
    if not old or not index.exists():
        return {}
    linked = {row.doc_id for row in table.iter_documents() if row.superseded_by in old}
    found: dict[str, list[HeldPoint]] = {}
    for state in index.scroll(doc_ids=sorted(old | linked)):
        if state.doc_id is None:
            continue
        successor = state.payload.get("superseded_by")
        found.setdefault(state.doc_id, []).append(
            (state.point_id, state.chunk_id, successor if isinstance(successor, str) else None)
        )
    return found


def with_framework_ids(
    index: ChunkIndex, batch: Sequence[PayloadWrite], back: Mapping[str, str]
) -> list[PayloadWrite]:
    """``batch`` with, on each renamed point, the framework keys that name its old id
    (``framework_ids``), read from the points as they are now (so a batch written twice
    writes the same)."""
    renaming = {
        str(w.point_ids[0]): back[w.payload["doc_id"]]
        for w in batch
        if w.payload.get("doc_id") in back
    }
    if not renaming:
        return list(batch)
    stored = {str(p.point_id): p.payload for p in index.read_points(sorted(renaming))}
    out = []
    for write in batch:
        pid = str(write.point_ids[0])
        if pid in renaming and pid in stored:
            found = framework_ids(
                index.keys, stored[pid], old=renaming[pid], new=write.payload["doc_id"]
            )
            write = replace(write, payload={**found, **write.payload})
        out.append(write)
    return out


def framework_ids(
    keys: KeyMap, payload: Mapping[str, Any], *, old: str, new: str
) -> dict[str, Any]:
    """The keys of a stored point ``payload`` (beside the managed ones, where ``keys`` puts
    them) that name document ``old``, set to ``new``: ``FRAMEWORK_KEYS``, and a LlamaIndex
    node serialised under ``_node_content`` whose relationships name it."""
    node: Any = payload
    for part in keys.prefix[:-1].split(".") if keys.prefix else ():
        node = node.get(part) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        return {}
    ours = {keys.name(key) for key in ALL_KEYS} | set(ALL_KEYS)
    found: dict[str, Any] = {
        key: new for key in FRAMEWORK_KEYS if key not in ours and node.get(key) == old
    }
    try:
        serialised = json.loads(node[NODE]) if isinstance(node.get(NODE), str) else None
    except ValueError:
        serialised = None
    relations = serialised.get("relationships") if isinstance(serialised, dict) else None
    changed = False
    for related in relations.values() if isinstance(relations, dict) else ():
        if isinstance(related, dict) and related.get("node_id") == old:
            related["node_id"], changed = new, True
    if changed:
        found[NODE] = json.dumps(serialised, ensure_ascii=False)
    return found


def whole_documents(writes: Iterable[PayloadWrite], most: int) -> Iterable[list[PayloadWrite]]:
    """``writes`` (a document's together, as ``payload_writes`` yields them) in batches of
    about ``most`` points that never split a document."""
    batch: list[PayloadWrite] = []
    document: list[PayloadWrite] = []
    for write in writes:
        if document and write.doc_id != document[0].doc_id:
            if batch and len(batch) + len(document) > most:
                yield batch
                batch = []
            batch += document
            document = []
        document.append(write)
    if batch and len(batch) + len(document) > most:
        yield batch
        batch = []
    if batch or document:
        yield batch + document


def payload_writes(pairs: Iterable[RekeyPair], held: Mapping[str, Any]) -> Iterable[PayloadWrite]:
    """The payload-only writes of a re-keying: on each point of an old id, ``doc_id`` and
    ``chunk_id`` (a chunk id that starts with the old id takes the new one in its place;
    another is kept); on each point whose ``superseded_by`` names an old id, the new one."""
    renamed = {pair.old_id: pair.new_id for pair in pairs}
    for doc_id, points in sorted(held.items()):
        for pid, chunk, successor in points:
            payload: dict[str, Any] = {}
            if doc_id in renamed:
                payload["doc_id"] = renamed[doc_id]
                if isinstance(chunk, str) and chunk.startswith(doc_id):
                    payload["chunk_id"] = renamed[doc_id] + chunk[len(doc_id) :]
            if successor in renamed:
                payload["superseded_by"] = renamed[successor]
            if payload:
                yield PayloadWrite((pid,), payload, doc_id=renamed.get(doc_id, doc_id))
