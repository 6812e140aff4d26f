"""Issue 38: families settled by the scan's own table pass, so the assess stage reads only the
others again.

A run whose checks over families are only ``payload``, ``siblings``, ``dates`` and ``ttl``
(``QUIET_CHECKS``), without sources' documents, moves, a split store or a scope, finds
nothing in a family that is *quiet* (``quiet_rows``, told from the scan's row tuples, no
``Document`` built) when the collection holds every chunk as its row says (``ChunkTally.clean``:
no payload variant, no stale, short or misplaced document). The scan counts the quiet families
and keeps the ids of the others (``UNSETTLED_KEPT`` at most, else none are settled); the
assess stage checks those in full (``assessing.family_views``) and counts the quiet ones as
checked. Findings, plan and summary are those of the full check
(``tests/unit/test_settling.py``).

Why a quiet family is one the four checks find nothing in, given a clean tally (so every
row's chunks are ``None`` or a ``ChunkAggregate`` without variants or stale chunks, and at
least as many as the row says):

- no row is quarantined: neither ``payload``'s nor ``ttl``'s hold is lifted or kept;
- no row's source is past its TTL (``ttl``);
- every window opens before it closes (``dates``' ``effective_window_invalid``);
- the time rule leaves every row as it is, told as ``time_rule._left_as_is`` tells it (no
  ``links`` without sources' documents): at most one servable version, in force or still to
  come, after every superseded version that names a successor, naming none itself, its own
  end not reached. Then ``settle`` hands back the very rows, so ``dates`` finds no change and
  ``siblings`` takes its shortcut (``siblings.quiet``: at most one row served).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from reconciler.checks import parts
from reconciler.model import (
    EXPECTED_FIELDS,
    OPEN_END,
    OPEN_START,
    VersionState,
    is_stored_form,
    stored_form,
)
from reconciler.payload import CUT_TEXTS
from reconciler.pipeline.checking import check_context
from reconciler.pipeline.values import Options, SourcesRead

#: The checks whose family parts ``quiet_rows`` answers for.
QUIET_CHECKS = frozenset({"payload", "siblings", "dates", "ttl"})

#: Families the scan keeps the ids of for the assess stage to check in full; beyond it no
#: family is settled (the assess stage streams the whole table, as without this shortcut).
UNSETTLED_KEPT = 2000

_SERVABLE = frozenset({VersionState.CURRENT, VersionState.UNKNOWN, VersionState.PENDING})
_SUPERSEDED, _PENDING, _CURRENT = (
    VersionState.SUPERSEDED,
    VersionState.PENDING,
    VersionState.CURRENT,
)
#: ``state_of`` of each state's text.
_STATES = {state.value: state for state in VersionState}
_UNKNOWN = VersionState.UNKNOWN
_AT = {name: EXPECTED_FIELDS.index(name) for name in EXPECTED_FIELDS}


class Settling(NamedTuple):
    """What ``quiet_rows`` needs of the run: its instant (also in the SQLite table's stored
    form, ``stored``) and the sources past their TTL."""

    now: datetime
    expired: frozenset[str]
    stored: str = ""

    @property
    def stored_now(self) -> str:
        """``now`` in the table's stored form (``stored_form``)."""
        return self.stored or stored_form(self.now)


def settling(
    options: Options, now: datetime, sources: SourcesRead, scope: frozenset[str] | None
) -> Settling | None:
    """The run's ``Settling`` when its families may be settled by the scan (see the module's
    docstring), else ``None``."""
    chosen = parts()
    ctx = check_context(options, now, sources)
    per_family = {
        name
        for name in options.checks
        if chosen[name].family is not None or chosen[name].truth is not None
    }
    if (
        not per_family <= QUIET_CHECKS
        or scope is not None
        or options.doc_id is not None
        or ctx.split is not None
        or sources.by_id
        or sources.problems
        or sources.last_seen
        or sources.because
    ):
        return None
    expired = frozenset(name for name in ctx.sources if ctx.ttl_expired(name))
    return Settling(now=ctx.now, expired=expired, stored=stored_form(ctx.now))


def quiet_rows(rows: Sequence[tuple[Any, ...]], settling: Settling) -> bool:
    """Whether the family of ``rows`` (tuples of ``EXPECTED_FIELDS``, one family) is quiet:
    what the module's docstring lists. ``False`` says nothing (the family is checked).

    The instants are compared as the rows hold them: ``datetime`` values, or the SQLite
    table's stored texts (``is_stored_form``: of one width, they compare as their instants
    do; issue 38: the scan never parses them). A family holding any other text, or both
    kinds, is not told quiet here."""
    now: Any  # (and the open window's ends: texts, or ``datetime`` values)
    open_start: Any
    open_end: Any
    if _stored(rows):
        now, open_start, open_end = settling.stored_now, _OPEN_START, _OPEN_END
    elif _parsed(rows):
        now, open_start, open_end = settling.now, OPEN_START, OPEN_END
    else:
        return False
    expired = settling.expired
    servable: tuple[Any, int, str] | None = None
    named: list[tuple[Any, int, str]] = []
    for row in rows:
        if row[_QUARANTINED] or row[_SOURCE] in expired:
            return False
        start, end = row[_FROM], row[_TO]
        if end is None:
            end = open_end
        if start is not None and not start < end:
            return False
        state = _STATES.get(row[_STATE], _UNKNOWN)  # (``state_of``)
        if state in _SERVABLE:
            key = (open_start if start is None else start, row[_VERSION], row[_DOC])
            if servable is not None:
                return False
            if (
                (state is _PENDING and key[0] <= now)
                or (state is _CURRENT and key[0] > now)
                or end <= now
                or row[_SUCCESSOR] is not None
            ):
                return False
            servable = key
        elif state is _SUPERSEDED and row[_SUCCESSOR] is not None:
            named.append((open_start if start is None else start, row[_VERSION], row[_DOC]))
    return servable is None or not named or max(named) < servable


def _stored(rows: Sequence[tuple[Any, ...]]) -> bool:
    """Whether every instant of ``rows`` is a stored text (``is_stored_form``; those the
    scan's table pass has just cut are remembered as such)."""
    cut, stored = CUT_TEXTS, is_stored_form
    for row in rows:
        start, end = row[_FROM], row[_TO]
        if not (start is None or start in cut or stored(start)):
            return False
        if not (end is None or end in cut or stored(end)):
            return False
    return True


def _parsed(rows: Sequence[tuple[Any, ...]]) -> bool:
    """Whether every instant of ``rows`` is a ``datetime``, or ``None`` (no text, nor any
    other value another writer of the table left)."""
    for row in rows:
        start, end = row[_FROM], row[_TO]
        if not (start is None or isinstance(start, datetime)):
            return False
        if not (end is None or isinstance(end, datetime)):
            return False
    return True


_DOC, _SOURCE, _FAMILY, _VERSION = (
    _AT["doc_id"],
    _AT["source"],
    _AT["doc_family_id"],
    _AT["doc_version"],
)
_STATE, _SUCCESSOR, _FROM, _TO = (
    _AT["version_state"],
    _AT["superseded_by"],
    _AT["effective_from"],
    _AT["effective_to"],
)
_QUARANTINED = _AT["quarantined"]
#: The open window's ends in the table's stored form.
_OPEN_START, _OPEN_END = stored_form(OPEN_START), stored_form(OPEN_END)
