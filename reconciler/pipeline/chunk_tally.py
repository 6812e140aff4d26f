"""The check's per-document state, compact: what the scan folds the collection into.

Per registered row the tally holds 36 bytes in six sorted numpy arrays, and no Python object: a
64-bit key of the doc id (``hash``, SipHash in CPython), a second, independent 32-bit key (CRC-32
of its UTF-8), the expected payload's 64-bit fingerprint and the chunks counted (the chunks not
already right, and the stale ones, are counted apart for the documents that have one: most have
none, issue 38's heap). Doc id strings are not kept: a chunk is matched to its row by both keys
(a false match needs a 64-bit and a 32-bit collision at once, about 2**-96 a chunk), and two rows
that share the 64-bit key are told apart by the second. A page of chunks is matched with one
``searchsorted``; the per-chunk Python work is what the store's own page costs to read.

Beside them, per row, the chunk count the row says it has (``Document.chunk_count``) and a 64-bit
key of its ``source_hash``: a chunk whose ``content_hash`` has another key holds another text
(``stale``), and a row with fewer chunks than it says lost some (``short``). A chunk or a row
without a hash is never stale. In a split store, per row too: whether its chunks belong in the
main collection (``kept_in_main``), the chunks seen in the archive, the *misplaced* documents.

Payload variants, and the doc id, are kept only for documents with a mismatching chunk;
``ChunkAggregate`` objects only for orphans (chunks whose doc_id has no row) or when a check asks
for one document's aggregate. The point ids of mismatching chunks are kept, up to ``keep_ids`` in
all, with the values read there (``kept_ids``): the applier writes by id, not scanning again.
"""

from __future__ import annotations

import bisect
import contextlib
import zlib
from array import array
from collections.abc import Callable, Sequence
from operator import countOf, itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from reconciler.check_inputs import ChunkAggregate, Registered, variant_values
from reconciler.model import MANAGED_KEYS, ManagedPage
from reconciler.payload import Variant, doc_id_of, fingerprint, normalize
from reconciler.pipeline.kept_ids import KeptIds
from reconciler.rules.time_rule import kept_in_main

__all__ = ["ChunkTally", "Registered", "check_key"]

#: In a scan row, ``(doc_id, *managed values)``: where each part is.
_DOC = itemgetter(0)
_VERSION_AT = itemgetter(1 + MANAGED_KEYS.index("doc_version"))
_STATE_AT = itemgetter(1 + MANAGED_KEYS.index("version_state"))
_QUARANTINED_AT = itemgetter(1 + MANAGED_KEYS.index("quarantined"))

Slots = npt.NDArray[np.int64]

#: The content key of a missing hash (a row or a chunk without one): never stale.
NO_CONTENT = hash(None)


def content_key(content_hash: Any) -> int:
    """The 64-bit key of a ``source_hash`` / ``content_hash`` (``NO_CONTENT`` for none)."""
    try:
        return hash(content_hash)
    except TypeError:  # an unhashable value stored as a chunk's hash: not a hash at all
        return NO_CONTENT


def check_key(doc_id: str) -> int:
    """The second key of a doc id, independent of ``hash``: CRC-32 of its UTF-8."""
    return zlib.crc32(doc_id.encode("utf-8", "surrogatepass"))


class ChunkTally:
    """doc_id -> its chunks, folded: how many, how many already carry the row's payload, the
    other variants (see the module's docstring for the layout and the keys).

    Rows are registered first (``expect``), then chunks are added a page (``add_page``) or
    one (``add``) at a time. Reading: ``tally[doc_id]`` is the ``ChunkAggregate`` of a
    document with at least one chunk (``None``: chunks without a doc_id), ``doc_id in tally``
    whether it has one.
    """

    def __init__(self, *, keep_ids: int = 100_000, key: Callable[[str], int] = hash,
                 split: bool = False, placement: bool = False) -> None:  # fmt: skip
        #: The 64-bit key of a doc id (``hash``; a test may pass a weaker one).
        self._key = key
        #: Only where chunks are is folded (``scan(placement=True)``): no payload compared.
        self.placement = placement
        self.split, self._new_main, self._in_archive = split, array("b"), False  # (docstring)
        self._main, self._archived = np.zeros(0, np.bool_), np.zeros(0, np.uint32)
        self._misplaced: dict[int, str] = {}
        self._new_keys, self._new_checks = array("q"), array("I")
        self._new_fingerprints, self._new_contents = array("q"), array("q")
        self._new_wanted, self._sealed = array("I"), False
        self._keys: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._checks: npt.NDArray[np.uint32] = np.zeros(0, np.uint32)
        self._fingerprints: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._counts: npt.NDArray[np.uint32] = np.zeros(0, np.uint32)
        #: slot -> the chunks counted whose payload is not the row's (only documents with one).
        self._unmatched: dict[int, int] = {}
        #: Per slot: the row's content key, the chunks it says it has.
        self._contents: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._wanted: npt.NDArray[np.uint32] = np.zeros(0, np.uint32)
        #: slot -> the stale chunks seen, and its doc id, for the documents with one.
        self._stale: dict[int, int] = {}
        self._stale_docs: dict[int, str] = {}
        self._key_view: Sequence[int] = ()
        self._check_view: Sequence[int] = ()
        self._count_view: Sequence[int] = ()
        #: 64-bit keys more than one row has (told apart by the second key).
        self._shared: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._variants: dict[int, dict[Variant, int]] = {}
        #: slot -> the drifted variant of each spelling (values and their types) met, for the
        #: documents with a variant: a document's stale chunks are normalised once.
        self._spelt: dict[int, dict[tuple[Any, ...], Variant]] = {}
        #: slot -> doc id, for the documents with a variant; and the other way (``_read_slot``).
        self._drifted: dict[int, str] = {}
        self._drifted_slots: dict[str, int] = {}
        self._orphans: dict[str | None, ChunkAggregate] = {}
        #: The ids of the mismatching chunks and the values read there (``kept_ids``).
        self._ids = KeptIds(keep_ids)
        self.chunks = 0

    # -- registering rows -------------------------------------------------------------------

    def expect(
        self,
        doc_id: str,
        values: tuple[Any, ...],
        *,
        content_hash: str | None = None,
        chunk_count: int = 0,
    ) -> None:
        """Register a row's document and the payload values (``payload_values``, in
        ``MANAGED_KEYS`` order) its chunks must carry, the hash of the text they must hold
        and how many there must be (0: not known)."""
        self.expect_rows([(doc_id, *values)], contents=[content_hash], counts=[chunk_count])

    def expect_rows(
        self,
        rows: Sequence[tuple[Any, ...]],
        *,
        contents: Sequence[str | None] | None = None,
        counts: Sequence[int] | None = None,
    ) -> None:
        """Register rows given as ``(doc_id, *payload values)``, with their ``source_hash``
        and ``chunk_count`` (in the same order; absent: not known), as ``expect`` does, a
        batch at a time."""
        if self._sealed:
            raise RuntimeError("every row is registered before the first chunk is added")
        self._new_keys.extend(map(self._key, map(_DOC, rows)))
        self._new_checks.extend(_check_keys(rows))
        self._new_fingerprints.extend(_fingerprints(rows).tolist())
        known = [NO_CONTENT] * len(rows) if contents is None else _content_keys(contents).tolist()
        self._new_contents.extend(known)
        self._new_wanted.extend(counts if counts is not None else [0] * len(rows))
        if self.split:
            self._new_main.extend(map(kept_in_main, map(_STATE_AT, rows)))

    def seal(self) -> None:
        """Sort what was registered (done by the first chunk added or lookup made)."""
        if self._sealed:
            return
        self._sealed = True
        size = len(self._new_keys)
        if size:
            # Each registered array goes as soon as its sorted copy exists (never both sets).
            order = np.argsort(np.frombuffer(self._new_keys, dtype=np.int64), kind="stable")
            for name in ("keys", "checks", "fingerprints", "contents", "wanted"):
                registered = getattr(self, f"_new_{name}")  # "q": int64, "I": uint32
                setattr(self, f"_{name}", np.frombuffer(registered, registered.typecode)[order])
                setattr(self, f"_new_{name}", array(registered.typecode))
                del registered
            if self.split:
                self._main = np.frombuffer(self._new_main, dtype=np.int8)[order].astype(np.bool_)
            del order
        self._new_main = array("b")
        self._archived = np.zeros(size if self.split else 0, np.uint32)
        self._counts = np.zeros(size, np.uint32)
        self._key_view = memoryview(self._keys.data) if size else ()
        self._check_view = memoryview(self._checks.data) if size else ()
        # (the counts as Python sees them, for reading one document's: no numpy scalars)
        self._count_view = memoryview(self._counts.data) if size else ()
        same = self._keys[1:] == self._keys[:-1]
        self._shared = np.unique(self._keys[1:][same])

    @property
    def size(self) -> int:
        """How many rows were registered."""
        return len(self._keys) if self._sealed else len(self._new_keys)

    @property
    def registered(self) -> Registered:
        """The registered doc ids, as a container (membership and size)."""
        return Registered(self)

    def slot(self, doc_id: Any) -> int | None:
        """The slot of a registered document (``None``: no row)."""
        if not isinstance(doc_id, str):
            return None
        if not self._sealed:
            self.seal()
        key, keys, check = self._key(doc_id), self._key_view, check_key(doc_id)
        index = bisect.bisect_left(keys, key)
        if index < len(keys) and keys[index] == key and self._check_view[index] == check:
            return index  # (the usual row: the first with its key)
        return self._resolve(index, key, check)

    def _resolve(self, index: int, key: int, check: int) -> int | None:
        """The slot from ``index`` (the first with ``key``) whose second key is ``check``."""
        keys, size = self._key_view, len(self._key_view)
        while index < size and keys[index] == key:
            if self._check_view[index] == check:
                return index
            index += 1
        return None

    # -- adding chunks ----------------------------------------------------------------------

    def add_page(
        self, page: ManagedPage, owns: Callable[[tuple[Any, ...]], bool] | None = None
    ) -> None:
        """Fold a page of chunks: the raw values are compared first, a whole page at once;
        only a mismatching chunk is normalised. ``owns(values)`` says whether a chunk without
        a row is this run's (a sharded run leaves other shards' orphans alone)."""
        self.seal()
        rows = page.rows
        size = len(rows)
        if not size:
            return
        self.chunks += size
        self._in_archive = page.archived  # (an orphan's chunks are counted where they are)
        slots = self._page_slots(rows)
        hit = slots >= 0
        if page.contents is not None and hit.any():
            self._compare_contents(page, slots, hit)
        if self.split and hit.any():
            self._place(page, slots, hit)
        matched = hit
        if hit.any() and not self.placement:
            expected = self._fingerprints[np.where(hit, slots, 0)]
            matched = hit & (expected == _fingerprints(rows))
        if matched.all():  # the usual page: every chunk has its row and its row's payload
            found, times = np.unique(slots, return_counts=True)
            self._counts[found] += times.astype(np.uint32)
            return
        _bump(self._counts, slots[hit])
        for index in np.flatnonzero(~matched).tolist():
            slot, row = int(slots[index]), rows[index]
            if slot < 0 and owns is not None and not owns(row[1:]):
                continue
            self._mismatch(page.point_id(index), row[0], slot if slot >= 0 else None, row[1:])

    def _compare_contents(
        self, page: ManagedPage, slots: Slots, hit: npt.NDArray[np.bool_]
    ) -> None:
        """Count the chunks of the page whose text is not their row's (see the module's
        docstring)."""
        assert page.contents is not None
        keys = _content_keys(page.contents)
        expected = self._contents[np.where(hit, slots, 0)]
        stale = hit & (keys != expected) & (keys != NO_CONTENT) & (expected != NO_CONTENT)
        if not stale.any():
            return
        counted = self._stale
        for index in np.flatnonzero(stale).tolist():
            slot = int(slots[index])
            counted[slot] = counted.get(slot, 0) + 1
            self._stale_docs.setdefault(slot, page.rows[index][0])

    def _place(self, page: ManagedPage, slots: Slots, hit: npt.NDArray[np.bool_]) -> None:
        """Count a page's archived chunks; keep the documents with one in the wrong place."""
        if page.archived:
            _bump(self._archived, slots[hit])
        at = np.flatnonzero(hit)
        for index in at[self._main[slots[at]] == page.archived].tolist():
            self._misplaced.setdefault(int(slots[index]), page.rows[index][0])

    def add(
        self,
        point_id: str | int,
        doc_id: Any,
        values: tuple[Any, ...],
        content_hash: Any = None,
    ) -> None:
        """Fold one chunk (the same rule as ``add_page``, a split store's placement aside)."""
        self.chunks += 1
        slot = self.slot(doc_id)
        if slot is not None:
            self._counts[slot] += 1
            expected, key = int(self._contents[slot]), content_key(content_hash)
            if NO_CONTENT not in (expected, key) and key != expected:
                self._stale[slot] = self._stale.get(slot, 0) + 1
                self._stale_docs.setdefault(slot, doc_id)
            if _fingerprint((doc_id, *values)) == self._fingerprints[slot]:
                return
        self._mismatch(point_id, doc_id, slot, values)

    def _page_slots(self, rows: Sequence[tuple[Any, ...]]) -> Slots:
        """Each chunk's slot, ``-1`` for a doc_id without a row."""
        size, registered = len(rows), len(self._keys)
        if not registered:
            return np.full(size, -1, np.int64)
        try:
            keys = np.fromiter(map(self._key, map(_DOC, rows)), np.int64, size)
            checks = np.fromiter(map(zlib.crc32, map(str.encode, map(_DOC, rows))), np.int64, size)
        except (TypeError, ValueError):  # a doc_id that is not a string, or not UTF-8
            each = map(self.slot, map(_DOC, rows))
            return np.fromiter((-1 if s is None else s for s in each), np.int64, size)
        at = np.minimum(np.searchsorted(self._keys, keys), registered - 1)
        same_key = self._keys[at] == keys
        slots = np.where(same_key & (self._checks[at] == checks), at, -1)
        if len(self._shared):
            for index in np.flatnonzero(same_key & np.isin(keys, self._shared)).tolist():
                found = self._resolve(int(at[index]), int(keys[index]), int(checks[index]))
                slots[index] = -1 if found is None else found
        return slots

    def _mismatch(
        self, point_id: str | int, doc_id: Any, slot: int | None, values: tuple[Any, ...]
    ) -> None:
        """A chunk whose raw values differ from its row's (or that has no row): normalise.
        (A registered document's chunk is already counted.)"""
        if slot is None:
            variant = normalize(dict(zip(MANAGED_KEYS, values, strict=True)))
            doc_id = doc_id_of(doc_id)  # (a number, an object...: no doc_id)
            orphan = self._orphans.get(doc_id)
            if orphan is None:
                orphan = self._orphans[doc_id] = ChunkAggregate()
            orphan.count += 1
            orphan.archived += self._in_archive
            orphan.variants[variant] = orphan.variants.get(variant, 0) + 1
            self._ids.keep((False, doc_id), point_id, values)
            return
        # Values equal with equal types normalise alike: a spelling met before on this
        # (drifted) document is the variant it was then.
        spelling = (values, tuple(map(type, values)))
        spelt = self._spelt.get(slot)
        try:
            found = None if spelt is None else spelt.get(spelling)
        except TypeError:  # an unhashable value (a list): normalised each time
            found = None
        if found is None:
            found = normalize(dict(zip(MANAGED_KEYS, values, strict=True)))
            if _fingerprint((doc_id, *variant_values(found))) == self._fingerprints[slot]:
                return  # the same meaning, spelt differently: it matches
            # (only drifted documents' spellings: memory grows as ``_variants`` does)
            with contextlib.suppress(TypeError):  # (an unhashable value: not kept)
                self._spelt.setdefault(slot, {})[spelling] = found
        self._unmatched[slot] = self._unmatched.get(slot, 0) + 1
        counts = self._variants.get(slot)
        if counts is None:
            counts = self._variants[slot] = {}
            self._drifted[slot] = doc_id
        counts[found] = counts.get(found, 0) + 1
        self._ids.keep((True, slot), point_id, values)

    @property
    def ids_complete(self) -> bool:
        """False once more mismatching chunks were seen than ``keep_ids``: ids were dropped."""
        return self._ids.complete

    # -- reading ----------------------------------------------------------------------------

    def matches(self, doc_id: str | None, expected: Variant) -> bool:
        """Whether ``expected`` (a payload, ``normalize``d) is what the scan expected of
        ``doc_id``'s chunks."""
        slot = self._read_slot(doc_id)
        if slot is None:
            return False
        return _fingerprint((doc_id, *variant_values(expected))) == int(self._fingerprints[slot])

    def holds(self, doc_id: str | None, values: tuple[Any, ...]) -> bool:
        """``matches`` of a payload's raw values in ``MANAGED_KEYS`` order, not normalised
        (``False`` for the same meaning spelt otherwise: ask ``matches``)."""
        slot = self._read_slot(doc_id)
        return slot is not None and _fingerprint((doc_id, *values)) == int(self._fingerprints[slot])

    def mismatching_ids(self, doc_id: str | None) -> list[str | int] | None:
        """The point ids of ``doc_id``'s chunks that differed from its row (or, for a document
        without a row, all its chunks) as scanned; ``None`` when they were not all kept."""
        found = self.scanned(doc_id)
        return None if found is None else found[0]

    def scanned(self, doc_id: str | None) -> tuple[list[str | int], list[tuple[Any, ...]]] | None:
        """``mismatching_ids`` and, beside each, the managed values the scan read, in
        ``MANAGED_KEYS`` order (an absent or null key as ``ABSENT``, as ``retrieve_managed``
        gives them); ``None`` when they were not all kept."""
        slot = self._read_slot(doc_id)
        return self._ids.scanned((False, doc_id) if slot is None else (True, slot))

    def _read_slot(self, doc_id: str | None) -> int | None:
        """``slot`` for the applier's questions: a drifted document's from a dict made once
        after the scan (the slot its chunks were counted at), any other's by ``slot``."""
        if len(self._drifted_slots) != len(self._drifted):  # (more drift since: made again)
            self._drifted_slots = {doc: slot for slot, doc in self._drifted.items()}
        found = self._drifted_slots.get(doc_id) if type(doc_id) is str else None
        return self.slot(doc_id) if found is None else found

    def drifted_ids(self) -> list[str]:
        """The registered documents with a chunk whose payload is not their row's, as met."""
        return list(self._drifted.values())

    def stale_ids(self) -> list[str]:
        """The registered documents with a chunk of another text than their row's."""
        return list(self._stale_docs.values())

    def misplaced_ids(self) -> list[str]:
        """The registered documents with a chunk in the other collection than their row's."""
        return list(self._misplaced.values())

    @property
    def any_short(self) -> bool:
        """Whether a registered row has fewer chunks than it says (``is_short``)."""
        self.seal()
        return bool(np.any(self._counts < self._wanted))

    def is_short(self, doc_id: str) -> bool:
        """Whether ``doc_id``'s row says it has more chunks than the scan found."""
        slot = self.slot(doc_id)
        return slot is not None and int(self._counts[slot]) < int(self._wanted[slot])

    def shortfall(self) -> tuple[int, int]:
        """``(chunks the rows say they have, of those the scan found)``, over the rows that
        say (``chunk_count`` > 0): an index that lost points shows here."""
        self.seal()  # (a row that says 0 adds 0 to both: one temporary, not four; issue 38)
        wanted = int(self._wanted.sum(dtype=np.int64))
        return wanted, int(np.minimum(self._counts, self._wanted).sum(dtype=np.int64))

    def orphans(self) -> list[tuple[str | None, ChunkAggregate]]:
        """The chunks whose doc_id has no row (``None``: no doc_id), by doc_id."""
        return list(self._orphans.items())

    def get(self, doc_id: str | None) -> ChunkAggregate | None:
        """The ``ChunkAggregate`` of a document with at least one chunk, else ``None``."""
        slot = self.slot(doc_id)
        if slot is not None:
            count = self._count_view[slot]
            if not count:
                return None
            variants = self._variants.get(slot)
            return ChunkAggregate(
                count,
                count - self._unmatched.get(slot, 0),
                dict(variants) if variants else {},
                self._stale.get(slot, 0),
                int(self._archived[slot]) if self.split else 0,
            )
        return self._orphans.get(doc_id_of(doc_id))

    def __getitem__(self, doc_id: str | None) -> ChunkAggregate:
        aggregate = self.get(doc_id)
        if aggregate is None:
            raise KeyError(doc_id)
        return aggregate

    def __contains__(self, doc_id: object) -> bool:
        slot = self.slot(doc_id)
        if slot is not None:
            return bool(self._count_view[slot])
        return doc_id_of(doc_id) in self._orphans


def _bump(counts: npt.NDArray[np.uint32], slots: Slots) -> None:
    """Add one to ``counts`` at each of ``slots`` (a slot may repeat)."""
    found, times = np.unique(slots, return_counts=True)
    counts[found] += times.astype(np.uint32)


def _check_keys(rows: Sequence[tuple[Any, ...]]) -> list[int]:
    """``check_key`` of each row's doc id, in C unless one has a lone surrogate or is no str."""
    with contextlib.suppress(TypeError, ValueError):
        return list(map(zlib.crc32, map(str.encode, map(_DOC, rows))))
    return list(map(check_key, map(_DOC, rows)))


def _content_keys(contents: Sequence[Any]) -> npt.NDArray[np.int64]:
    """``content_key`` of each content hash of a page (in C, unless one is unhashable)."""
    with contextlib.suppress(TypeError):
        return np.fromiter(map(hash, contents), np.int64, len(contents))
    return np.fromiter(map(content_key, contents), np.int64, len(contents))


def _fingerprint(row: tuple[Any, ...]) -> int:
    """The fingerprint of a scan row ``(doc_id, *managed values)``: the doc id hashed with the
    values (a chunk matches only its own row's payload)."""
    return fingerprint(row, at=1)


def _fingerprints(rows: Sequence[tuple[Any, ...]]) -> npt.NDArray[np.int64]:
    """``_fingerprint`` of each scan row; the whole page in C when its types allow."""
    size = len(rows)
    versions, flags = map(type, map(_VERSION_AT, rows)), map(type, map(_QUARANTINED_AT, rows))
    if countOf(versions, int) == size and countOf(flags, bool) == size:  # (exact types)
        with contextlib.suppress(TypeError):  # (an unhashable value: chunk by chunk, below)
            return np.fromiter(map(hash, rows), np.int64, size)
    return np.fromiter(map(_fingerprint, rows), np.int64, size)
