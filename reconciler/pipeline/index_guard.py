"""The guard's rule on the chunk index itself: one that lost more than the allowed fraction of
the chunks the table registers is a failure of the store, not drift (``shrunken_index``)."""

from __future__ import annotations

from reconciler.model import Finding, Severity
from reconciler.pipeline.values import Options, Totals


def shrunken_index(options: Options, totals: Totals) -> list[Finding]:
    """An index that lost more than the allowed fraction of the chunks the table registers is
    a failure of the store, not drift: no write goes on top of it. A scoped repair
    (``--doc``, ``--family``) measures only its documents, never the index: like the
    fraction rule, this rule does not hold it back (it asks a re-ingest of what it names)."""
    if options.families is not None or options.doc_id is not None:
        return []
    missing = totals.chunks_expected - totals.chunks_found
    limit = options.guard.max_changed_fraction
    if missing <= options.guard.floor or missing / max(totals.chunks_expected, 1) <= limit:
        return []
    return [
        Finding(
            check="guard",
            kind="index_shrunk",
            severity=Severity.CRITICAL,
            family=None,
            doc_id=None,
            expected={"chunks": f">= {1 - limit:.0%} of {totals.chunks_expected}"},
            actual={
                "chunks": totals.chunks_found,
                "fraction": round(totals.chunks_found / max(totals.chunks_expected, 1), 4),
            },
            action=(
                "refuse the run: the chunk index lost points the table registers (restore "
                "it, or re-ingest, then run again; --force writes anyway)"
            ),
        )
    ]
