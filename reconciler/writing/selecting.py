"""Which points a plan's payload targets need written, found the cheapest way the scan
allows, and handed to the applier in batches of whole documents (``Applier`` audits each
batch as intents, then sends it: ``applying``).

A document whose row stays as it is needs only its chunks that differed from the row, and the
scan kept their ids with the values it read there (``Located``); they are written by id, with
no second read (docs/engine.md, "Why no re-read"). A document whose row
changes needs every chunk that does not carry the new payload: its points are selected
through the ``doc_id`` payload filter (an index lookup on a server). Only when the scan could
not keep every id (more than ``Options.keep_ids`` mismatching chunks) are documents without a
doc_id found by scrolling the collection again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reconciler.payload import doc_id_of
from reconciler.planning import PayloadTarget
from reconciler.ports import ChunkIndex
from reconciler.writing.differs import Differs, Located, Scanned, WriteGroup

#: A values tuple not judged yet (``Selector._write_by_id``).
_UNSEEN: Any = object()


class Selector:
    """Finds the points of a plan's payload targets that still differ and hands them to
    ``flush`` (one audited batch a call) in batches of about ``batch_points`` points."""

    def __init__(
        self,
        index: ChunkIndex,
        *,
        flush: Callable[[list[WriteGroup]], None],
        batch_points: int,
        scroll_batch: int,
        max_pending: int,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.index = index
        self.flush = flush
        self.batch_points = batch_points
        self.scroll_batch = scroll_batch
        self.max_pending = max_pending
        self.progress = progress

    def write(self, targets: Sequence[PayloadTarget], *, located: Located | None) -> None:
        """Write each target's differing points: by the ids the scan kept where they are all
        that can differ, else through the doc_id filter (else, for chunks without a doc_id (or
        with one that is no text: ``doc_id_of``) whose ids were not kept, one more scroll)."""
        by_id: list[tuple[Differs, Scanned]] = []
        by_filter: list[PayloadTarget] = []
        by_scroll: list[PayloadTarget] = []
        for target in targets:
            compare = Differs(target)  # (the target normalised once, here)
            scanned = self._kept_ids(compare, located)
            if scanned is not None:
                by_id.append((compare, scanned))
            elif target.doc_id is not None:
                by_filter.append(target)
            else:
                by_scroll.append(target)
        self._write_by_id(by_id)
        step = max(self.scroll_batch, 1)
        for start in range(0, len(by_filter), step):
            part = by_filter[start : start + step]
            self._write_scrolled(part, [t.doc_id for t in part if t.doc_id])
        if by_scroll:
            self._write_scrolled(by_scroll, None)

    @staticmethod
    def _kept_ids(compare: Differs, located: Located | None) -> Scanned | None:
        """The ids that are all the target can need written, with the values the scan read
        there, if the scan kept them."""
        if located is None:
            return None
        target = compare.target
        scanned = located.scanned(target.doc_id)
        if scanned is None:
            return None
        if target.partial or located.holds(target.doc_id, compare.values):
            # The row stays: chunks that matched it carry the payload already. (A partial
            # target is an orphan's: no row, so every chunk of it was kept.)
            return scanned
        expected = compare.expected  # (spelt otherwise than the scan's row? then normalised)
        if expected is not None and located.matches(target.doc_id, expected):
            return scanned
        return None  # the row changes: chunks that matched the old row need it too

    def _write_by_id(self, targets: list[tuple[Differs, Scanned]]) -> None:
        """Write the kept ids, document by document, judged on the values the scan read
        there (no re-read: docs/engine.md, "Why no re-read"), in batches of whole documents
        of about ``batch_points`` points."""
        pending: list[WriteGroup] = []
        size = done = 0
        for compare, (ids, scanned) in targets:
            groups = _groups(compare, ids, scanned)
            pending += groups
            for group in groups:
                size += len(group.point_ids)
            if size >= self.batch_points:
                done += size
                self.flush(pending)
                if self.progress is not None:
                    self.progress(done)
                pending, size = [], 0
        if pending:
            self.flush(pending)

    def _write_scrolled(self, targets: list[PayloadTarget], doc_ids: list[str] | None) -> None:
        """Scroll the targets' points (``doc_ids``: through the doc_id filter; ``None``: the
        whole collection) and write each document's differing points, grouped per document.

        Points come in id order, not document order, so groups are held until a document's
        expected count is reached (then they are *ready*); ready groups go out in batches of
        ``batch_points``. Held points are capped at ``max_pending`` to bound memory.
        """
        by_doc = {t.doc_id: t for t in targets}
        compare_by_doc = {t.doc_id: Differs(t) for t in targets}
        remaining = {t.doc_id: t.points for t in targets}
        held: dict[str | None, dict[Any, WriteGroup]] = {}
        held_size = 0
        ready: list[WriteGroup] = []
        ready_size = 0
        scanned = 0
        for chunk in self.index.scroll(batch_size=self.scroll_batch, doc_ids=doc_ids):
            scanned += 1
            if self.progress is not None and scanned % self.scroll_batch == 0:
                self.progress(scanned)
            doc_id = doc_id_of(chunk.doc_id)
            target = by_doc.get(doc_id)
            if target is None:
                continue
            differs = compare_by_doc[doc_id](chunk.payload)
            if differs is None:
                continue
            before, key, keys = differs
            groups = held.setdefault(doc_id, {})
            group = groups.get(key)
            if group is None:
                group = groups[key] = WriteGroup(target=target, before=before)
            group.add(chunk.point_id, keys)
            held_size += 1
            remaining[doc_id] -= 1
            if remaining[doc_id] <= 0:  # all of this document's points are here
                done = list(held.pop(doc_id).values())
                size = sum(len(g.point_ids) for g in done)
                held_size -= size
                ready += done
                ready_size += size
            if ready_size >= self.batch_points:
                self.flush(ready)
                ready, ready_size = [], 0
            if held_size >= self.max_pending:
                self.flush([g for groups in held.values() for g in groups.values()])
                held, held_size = {}, 0
        rest = ready + [g for groups in held.values() for g in groups.values()]
        for start in range(0, len(rest), max(self.batch_points, 1)):
            self.flush(rest[start : start + self.batch_points])


def _groups(
    compare: Differs, ids: list[str | int], scanned: list[tuple[Any, ...]]
) -> list[WriteGroup]:
    """A document's kept ids grouped by what the scan read there, each values tuple judged
    once (``Differs.group``; ``None``: nothing to write). The scan kept one tuple for the
    chunks that spell their values alike, so a group is found by that tuple's identity."""
    if len(set(map(id, scanned))) == 1 and len(ids) == len(scanned):
        # (the usual document: every chunk read alike: its ids taken whole, no loop in Python)
        group = compare.group(scanned[0], alone=True)
        if group is None:
            return []
        group.point_ids.extend(ids)
        return [group]
    groups: dict[int, WriteGroup | None] = {}
    for pid, values in zip(ids, scanned, strict=True):
        group = groups.get(id(values), _UNSEEN)
        if group is _UNSEEN:
            group = groups[id(values)] = compare.group(values)
        if group is not None:  # (None: an orphan's chunk holding what is written)
            group.point_ids.append(pid)
    return [g for g in groups.values() if g is not None and g.point_ids]
