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
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from reconciler.model import EXPECTED_FIELDS, MANAGED_KEYS, Document, VersionState
from reconciler.payload import managed_values
from reconciler.pipeline.values import Options, Scan, Totals
from reconciler.ports import ChunkReader, DocumentReader, split_of

if TYPE_CHECKING:
    from reconciler.pipeline.chunk_tally import ChunkTally

log = logging.getLogger(__name__)

FAMILY_OF = attrgetter("doc_family_id")
#: In a row of ``expected_rows``: where its family is; in its managed values, the state.
_FAMILY = EXPECTED_FIELDS.index("doc_family_id")
_STATE = MANAGED_KEYS.index("version_state")


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
) -> Scan:
    """Fingerprint every row's expected payload, then fold the collection per document.

    The table is streamed once here, family by family, the collection once, a page at a
    time. Memory holds 36 bytes a document (``ChunkTally``), plus the doc id and payload
    variants of each document with a differing or stale chunk.
    """
    # (imported here: numpy, which the tally keeps its arrays in, is loaded when a scan
    # begins, not when a command that may never scan starts)
    from reconciler.pipeline.chunk_tally import ChunkTally  # noqa: PLC0415

    tally = ChunkTally(keep_ids=options.keep_ids, split=split_of(index) is not None)
    families = 0
    rows_by_source: dict[str, int] = defaultdict(int)
    in_scope: list[str] = []
    owns = options.shard.owns
    retired = str(VersionState.RETIRED)
    batch: list[tuple[Any, ...]] = []
    contents: list[str | None] = []
    counts: list[int] = []
    add_row, add_content, add_count = batch.append, contents.append, counts.append
    family: str | None = None
    for doc_id, source, content, count, *fields in expected_rows(table, options, scope):
        if fields[0] != family:  # (family by family)
            family = fields[0]
            families += 1
        values = managed_values(*fields)
        add_row((doc_id, *values))
        add_content(content)
        add_count(count)
        if values[_STATE] != retired:  # what the source should still hold
            rows_by_source[source] += 1
        if scope is not None:
            in_scope.append(doc_id)
        if len(batch) >= TABLE_FOLD:
            tally.expect_rows(batch, contents=contents, counts=counts)
            batch.clear()
            contents.clear()
            counts.clear()
    tally.expect_rows(batch, contents=contents, counts=counts)
    for kept in (batch, contents, counts):  # the last rows, let go before the scan's pages
        kept.clear()
    tally.seal()

    scanned = 0
    if scope is None or in_scope:
        family_at = MANAGED_KEYS.index("doc_family_id")

        def owned(values: tuple[Any, ...]) -> bool:
            family = values[family_at]
            return owns(family if isinstance(family, str) else None)

        every, shown = options.scroll_batch, 0
        for page in index.scan_managed(
            batch_size=options.scroll_batch, doc_ids=in_scope if scope is not None else None
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
    return Scan(
        scope=scope,
        expected=tally.registered,
        chunks=tally,
        totals=Totals(
            families=families,
            rows_by_source=dict(rows_by_source),
            chunks=scanned,
            chunks_expected=wanted,
            chunks_found=found,
        ),
        short=_short(table, options, scope, tally) if found < wanted else (),
    )


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
