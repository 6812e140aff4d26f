"""Stage 2 of a run: the table and the collection, streamed once each and folded per document
(``Scan``). The checks run after it, on the families with their chunks (``pipeline.assessing``).

Streaming throughout: the table is read once, family by family (expected payload
fingerprints, the text and chunk count each row says its chunks have), the collection once
(the lean ``scan_managed``; a split store's main collection, then its archive). Memory holds
compact per-document state (``ChunkTally``), never a whole table or collection.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from reconciler.errors import StoreFault
from reconciler.model import (
    EXPECTED_FIELDS,
    MANAGED_KEYS,
    OPEN_END,
    OPEN_START,
    Document,
    VersionState,
)
from reconciler.payload import Variant, instant_text, managed_values
from reconciler.pipeline.settling import UNSETTLED_KEPT, Settling, quiet_rows
from reconciler.pipeline.values import Options, Scan, Totals
from reconciler.ports import ChunkReader, DocumentReader, split_of
from reconciler.rules.time_rule import SERVABLE_NAMES, payload_instant, payload_served

if TYPE_CHECKING:
    from reconciler.pipeline.chunk_tally import ChunkTally

log = logging.getLogger(__name__)

FAMILY_OF = attrgetter("doc_family_id")
#: In a row of ``expected_rows``: where its family is; in its managed values, the state.
_FAMILY = EXPECTED_FIELDS.index("doc_family_id")
_STATE = MANAGED_KEYS.index("version_state")
_START = MANAGED_KEYS.index("effective_from")
_END = MANAGED_KEYS.index("effective_to")
_QUARANTINED = MANAGED_KEYS.index("quarantined")


def table_rows(
    table: DocumentReader, options: Options, families: Iterable[str] | None = None
) -> Iterator[Document]:
    """The rows of the run's shard (of ``families`` when given), family by family."""
    rows = table.iter_documents(
        batch_size=options.table_batch,
        families=list(families) if families is not None else None,
    )
    if options.shard.whole:
        return rows
    owns = options.shard.owns
    return (row for row in rows if owns(row.doc_family_id))


def expected_rows(
    table: DocumentReader, options: Options, families: Iterable[str] | None = None
) -> Iterator[tuple[Any, ...]]:
    """``table_rows`` as the scan reads them: tuples of ``EXPECTED_FIELDS`` (issue 38: no
    ``Document`` built a row)."""
    rows = table.iter_expected(
        batch_size=options.table_batch,
        families=list(families) if families is not None else None,
    )
    if options.shard.whole:
        return rows
    owns = options.shard.owns
    return (row for row in rows if owns(row[_FAMILY]))


def scan(
    table: DocumentReader,
    index: ChunkReader,
    options: Options,
    scope: frozenset[str] | None,
    *,
    progress: Callable[[str, int], None] | None = None,
    settling: Settling | None = None,
    placement: bool = False,
) -> Scan:
    """Fingerprint every row's expected payload, then fold the collection per document.

    The table is streamed once here, family by family, the collection once, a page at a
    time. Memory holds 36 bytes a document (``ChunkTally``), plus the doc id and payload
    variants of each document with a differing or stale chunk. With ``settling``, each family
    is judged from its rows as they pass (``pipeline.settling``): the quiet ones are counted,
    the others' ids kept (``UNSETTLED_KEPT`` at most) for the assess stage. With
    ``placement``, only where each chunk is and whose is read and folded (``ChunkTally``'s
    placement): what ``reconciler split`` moves, not what the checks judge.
    """
    # (imported here: numpy, which the tally keeps its arrays in, is loaded when a scan
    # begins, not when a command that may never scan starts)
    from reconciler.pipeline.chunk_tally import ChunkTally  # noqa: PLC0415

    if placement and settling is not None:
        raise ValueError("a placement scan judges no family: it is never settled")
    split = split_of(index) is not None
    tally = ChunkTally(keep_ids=options.keep_ids, split=split, placement=placement)
    passed = _register(table, options, scope, tally, settling)
    in_scope, owns = passed.in_scope, options.shard.owns

    scanned = 0
    if scope is None or in_scope:
        family_at = MANAGED_KEYS.index("doc_family_id")

        def owned(values: tuple[Any, ...]) -> bool:
            family = values[family_at]
            return owns(family if isinstance(family, str) else None)

        every, shown = options.scroll_batch, 0
        # (the keyword only when set: an adapter written before it still checks)
        only_where = {"placement": True} if placement else {}
        for page in index.scan_managed(
            batch_size=options.scroll_batch,
            doc_ids=in_scope if scope is not None else None,
            **only_where,
        ):
            # A chunk written from payload_for carries exactly the row's values, so one
            # hash of the raw tuple settles it, a page at a time; only a mismatch pays for
            # normalising (dates parsed).
            tally.add_page(page, owned)
            scanned += len(page)
            del page  # let it go before the next page is read (the peak holds one page)
            if progress is not None and scanned - shown >= every:
                progress("scanned", scanned)
                shown = scanned
    wanted, found = tally.shortfall()
    # (settled only when every registered document's chunks are as its row says)
    unsettled = passed.unsettled
    settles = unsettled is not None and not (
        tally.drifted_ids() or tally.stale_ids() or tally.misplaced_ids() or tally.any_short
    )
    return Scan(
        scope=scope,
        expected=tally.registered,
        chunks=tally,
        totals=Totals(
            families=passed.families,
            rows_by_source=passed.rows_by_source,
            chunks=scanned,
            chunks_expected=wanted,
            chunks_found=found,
        ),
        short=_short(table, options, scope, tally) if found < wanted else (),
        settled=passed.quiet if settles else 0,
        unsettled=tuple(unsettled) if settles and unsettled is not None else None,
    )


class _Passed(NamedTuple):
    """The scan's pass over the table: what it counted, and the families it settled."""

    families: int
    rows_by_source: dict[str, int]
    in_scope: list[str]
    quiet: int
    unsettled: list[str] | None


def _register(
    table: DocumentReader,
    options: Options,
    scope: frozenset[str] | None,
    tally: ChunkTally,
    settling: Settling | None,
) -> _Passed:
    """Register every row of the scope in ``tally`` (sealed), family by family; with
    ``settling``, judge each family as it passes (``scan``)."""
    families = 0
    rows_by_source: dict[str, int] = defaultdict(int)
    in_scope: list[str] = []
    retired = str(VersionState.RETIRED)
    batch: list[tuple[Any, ...]] = []
    contents: list[str | None] = []
    counts: list[int] = []
    add_row, add_content, add_count = batch.append, contents.append, counts.append
    family: str | None = None
    # (the family's rows while it passes, judged when the next one begins; ``unsettled``:
    # ``None`` when no family is settled)
    members: list[tuple[Any, ...]] = []
    unsettled: list[str] | None = None if settling is None else []
    quiet = 0
    for row in expected_rows(table, options, scope):
        # (a row: doc_id, source, source_hash, chunk_count, then managed_values' fields;
        # read by index, not unpacked into a list a row)
        if row[_FAMILY] != family:  # (family by family)
            if members and unsettled is not None:
                quiet, unsettled = _judged(members, settling, quiet, unsettled)
            members.clear()
            family = row[_FAMILY]
            families += 1
        if unsettled is not None:
            members.append(row)
        try:
            values = managed_values(*row[_FAMILY:])
        except (TypeError, ValueError) as error:  # (a value another writer of the table left)
            raise StoreFault(
                f"the document table's row {row[0]!r} cannot be read ({error}): correct its "
                "values (an instant where one belongs, a whole number of version), then run again"
            ) from error
        add_row((row[0], *values))
        add_content(row[2])
        add_count(row[3])
        if values[_STATE] != retired:  # what the source should still hold
            rows_by_source[row[1]] += 1
        if scope is not None:
            in_scope.append(row[0])
        if len(batch) >= TABLE_FOLD:
            tally.expect_rows(batch, contents=contents, counts=counts)
            batch.clear()
            contents.clear()
            counts.clear()
    if members and unsettled is not None:
        quiet, unsettled = _judged(members, settling, quiet, unsettled)
    tally.expect_rows(batch, contents=contents, counts=counts)
    for kept in (batch, contents, counts, members):  # (the last rows: let go before the pages)
        kept.clear()
    tally.seal()

    return _Passed(families, dict(rows_by_source), in_scope, quiet, unsettled)


def served_totals(
    table: DocumentReader,
    options: Options,
    scope: frozenset[str] | None,
    now: datetime,
    chunks: ChunkTally | None = None,
    asked: frozenset[str] = frozenset(),
) -> tuple[int, int | None, frozenset[str]]:
    """The families of the scope with a row served now or later, and the chunks served now or
    later: what the guard weighs a change of the served set against. With the scan's
    ``chunks``, those rows' chunks as the index holds them and the chunks without a row that
    their payload serves (what the plan's hidden chunks are counted among); without, the
    chunk count each row says (``None`` when one does not say); and which of the ``asked``
    families are served now or later. One more pass over the scope's rows, which the guard
    asks for only when a change is past its floor (the scan's own pass stays as lean as it
    was)."""
    served = _Served(now)
    serving: set[str] = set()
    family: str | None = None
    for row in expected_rows(table, options, scope):
        if row[_FAMILY] != family:
            family = row[_FAMILY]
            served.family()
        try:
            values = managed_values(*row[_FAMILY:])
        except (TypeError, ValueError):  # (the scan stopped on such a row before: not here)
            continue
        if chunks is None:
            counted = served.row(values, row[3])
        else:
            held = chunks.get(row[0])
            counted = served.row(values, held.count if held is not None else 0)
        if counted and family in asked:
            serving.add(family)
    if chunks is not None and served.chunks is not None:
        for _doc_id, orphan in chunks.orphans():
            for variant, count in orphan.variants.items():
                if _payload_served_later(variant, now):
                    served.chunks += count
    return served.families, served.chunks, frozenset(serving)


def _payload_served_later(variant: Variant, now: datetime) -> bool:
    """Whether a chunk with this payload (a canonical one) is served at some instant from
    ``now`` on, as ``default_filter()`` reads it (an absent start: never)."""
    payload = dict(variant)
    start = payload_instant(payload.get("effective_from"), OPEN_END)
    return payload_served(payload, max(start, now))


class _Served:
    """Counts the families with a row served now or later, and those rows' chunks, as the
    table passes (what the guard weighs a change of the served set against)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.families = 0
        self.chunks: int | None = 0
        self._counted = True  # (the current family is counted already)
        self._open_end = instant_text(OPEN_END)

    def family(self) -> None:
        self._counted = False

    def row(self, values: tuple[Any, ...], chunk_count: int | None) -> bool:
        """Count a row of the current family (``family`` first); whether it is served."""
        if values[_STATE] not in SERVABLE_NAMES or values[_QUARANTINED] is True:
            return False
        end = values[_END]
        if end != self._open_end:
            closes = payload_instant(end, OPEN_START)
            if closes <= self.now or payload_instant(values[_START], OPEN_START) >= closes:
                return False  # (a window closed before now, or empty: never served again)
        if not self._counted:
            self.families += 1
            self._counted = True
        if self.chunks is not None:
            self.chunks = None if chunk_count is None else self.chunks + chunk_count
        return True


def _judged(
    members: list[tuple[Any, ...]], settling: Settling | None, quiet: int, unsettled: list[str]
) -> tuple[int, list[str] | None]:
    """``quiet`` and ``unsettled`` with the family of ``members`` judged (``quiet_rows``);
    ``unsettled`` becomes ``None`` once it would hold more than ``UNSETTLED_KEPT``."""
    assert settling is not None
    if quiet_rows(members, settling):
        return quiet + 1, unsettled
    if len(unsettled) >= UNSETTLED_KEPT:
        return quiet, None
    unsettled.append(members[0][_FAMILY])
    return quiet, unsettled


def _short(
    table: DocumentReader, options: Options, scope: frozenset[str] | None, tally: ChunkTally
) -> tuple[str, ...]:
    """The rows with fewer chunks than they say (one more stream of the table, only when
    some are: the tally does not keep doc ids), the first ``SHORT_KEPT`` of them."""
    short: list[str] = []
    for row in table_rows(table, options, scope):
        if row.chunk_count and tally.is_short(row.doc_id):
            short.append(row.doc_id)
            if len(short) >= SHORT_KEPT:
                log.warning(
                    "more than %d documents lack chunks: the first %d are reported, the "
                    "rest after they are re-ingested",
                    SHORT_KEPT,
                    SHORT_KEPT,
                )
                break
    return tuple(short)


#: Rows folded into the tally at a time (one fingerprinting of a batch).
TABLE_FOLD = 1024

#: Documents lacking chunks that one run reports (and asks to re-ingest) at most: an index
#: that lost most of its points is one ``points_missing`` finding, and the guard's.
SHORT_KEPT = 10_000
