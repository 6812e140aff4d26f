"""Stage 1 of a run: read the systems of record (metadata and content hashes, never bodies)
and give each document its family (``SourcesRead``). A source that cannot be read is
unreadable, never empty."""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from reconciler.check_inputs import SourceState
from reconciler.checks import SOURCE_CHECKS
from reconciler.model import (
    Declaration,
    DeclarationKind,
    Document,
    ProblemKind,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    VersionState,
)
from reconciler.pipeline.scope_rows import ScopeRows
from reconciler.pipeline.values import (
    Options,
    SourcesRead,
)
from reconciler.ports import DeclarationReader, DocumentReader
from reconciler.ports.source import ConnectorError, SystemOfRecord, scan_paths
from reconciler.rules.declarations import families_touched, overlay
from reconciler.rules.identity import resolve_families
from reconciler.rules.storable import screen
from reconciler.writing.rekeying import pending_rekey

log = logging.getLogger(__name__)


class _Reader(DocumentReader, DeclarationReader, Protocol):
    """What stage 1 reads of the table: rows, identities, and the declarations."""


def read_sources(
    table: _Reader, sources: Sequence[SystemOfRecord], options: Options, now: datetime
) -> SourcesRead:
    """Scan every source (when a check needs them), give each document its family, and read
    the declarations beside them (``with_declarations``)."""
    read = read_systems(table, sources, options, now)
    if not options.checks & SOURCE_CHECKS:
        return read
    return with_declarations(
        table,
        read,
        [*table.declarations(active=True), *options.declarations],
        configured=frozenset(source.name for source in sources),
        batch=options.table_batch,
        scope=options.families,
    )


def _read(source: SystemOfRecord, only: Collection[str] | None) -> tuple[SourceSnapshot, bool]:
    """The source read whole (``only`` None) or at ``only``, screened, and whether it was read
    at those paths alone. Nothing at them is read whole: whether the source now holds no
    document at all (``guard/source_empty``, which refuses the run) only a whole read can say,
    and a note deleted alone in its family is no emptied vault."""
    if only is None:
        return screen(source.scan()), False
    read_at, scoped = scan_paths(source, only)
    if scoped and not read_at.documents:
        log.info("source %s: no document at the run's paths: read whole", source.name)
        read_at, scoped = source.scan(), False
    return screen(read_at), scoped


def read_systems(
    table: DocumentReader, sources: Sequence[SystemOfRecord], options: Options, now: datetime
) -> SourcesRead:
    """Scan every source (when a check needs them) and give each document its family."""
    read = bool(options.checks & SOURCE_CHECKS)
    status = table.source_status()
    states: dict[str, SourceState] = {}
    by_id: dict[str, SourceDocument] = {}
    family_of: dict[str, str] = {}
    problems: dict[str, list[SourceProblem]] = defaultdict(list)
    loose_problems: list[SourceProblem] = []
    last_seen: dict[str, datetime] = {}
    identities: dict[str, tuple[tuple[str, str, str | None, str | None], ...]] = {}
    present: dict[str, frozenset[str]] = {}
    for source in sources:
        row = status.get(source.name)
        last_success = row.last_success_at if row else None
        ttl = options.ttls.get(source.name)
        only = options.paths.get(source.name) if options.paths is not None else None
        # (a source at no path holds none of the run's documents: not read at all, as when
        # no check reads the sources; its outage is no concern of this run's)
        if not read or (only is not None and not only):
            states[source.name] = SourceState(
                source.name,
                readable=False,
                scanned=False,
                ttl=ttl,
                last_success_at=last_success,
            )
            continue
        try:
            snapshot, scoped = _read(source, only)
        except ConnectorError as exc:
            log.warning("source %s unreadable: %s", source.name, exc)
            states[source.name] = SourceState(
                source.name,
                readable=False,
                scanned=True,
                error=str(exc),
                ttl=ttl,
                last_success_at=last_success,
            )
            continue
        if not snapshot.complete and not snapshot.documents:
            # A partial scan that read nothing is an outage, not an empty source.
            states[source.name] = SourceState(
                source.name,
                readable=False,
                scanned=True,
                ttl=ttl,
                error="the scan failed before any document was read",
                last_success_at=last_success,
                complete=False,
            )
            continue
        states[source.name] = SourceState(
            source.name,
            readable=True,
            scanned=True,
            documents=len(snapshot.documents),
            ttl=ttl,
            last_success_at=now,
            complete=snapshot.complete,
            scoped=scoped,
        )
        # (a read at some paths: the identities of what it read, or last seen there)
        near = ({d.source_key for d in snapshot.documents}, only) if scoped and only else None
        by_key, by_hash = table.identities(source.name, near=near)
        assignment = resolve_families(
            snapshot.documents, known_by_key=by_key, known_by_hash=by_hash
        )
        for doc in snapshot.documents:
            by_id[doc.doc_id] = doc
            family_of[doc.doc_id] = assignment.family_of[doc.doc_id]
        identities[source.name] = tuple(
            (doc.source_key, assignment.family_of[doc.doc_id], doc.content_hash, doc.path)
            for doc in snapshot.documents
        )
        for key, instant in table.identity_last_seen(source.name, near=near).items():
            last_seen[f"{source.name}:{key}"] = instant
        unparsed: set[str] = set()
        for problem in identify(table, source.name, snapshot):
            if problem.doc_id is None:
                loose_problems.append(problem)
                continue
            problems[problem.doc_id].append(problem)
            if problem.doc_id not in by_id and problem.source_key is not None:
                unparsed.add(problem.source_key)
        present[source.name] = frozenset(unparsed)
        loose_problems += _hold_rekeys(table, source.name, snapshot, by_id, family_of, problems)
    holders: dict[str, list[str]] = defaultdict(list)
    for doc_id, doc in by_id.items():
        holders[doc.content_hash].append(doc_id)
    return SourcesRead(
        states=states,
        by_id=by_id,
        family_of=family_of,
        problems={doc_id: tuple(listed) for doc_id, listed in problems.items()},
        loose_problems=tuple(loose_problems),
        last_seen=last_seen,
        identities=identities,
        present=present,
        holders={digest: tuple(sorted(ids)) for digest, ids in holders.items()},
    )


def _hold_rekeys(
    table: DocumentReader,
    source: str,
    snapshot: SourceSnapshot,
    by_id: dict[str, SourceDocument],
    family_of: dict[str, str],
    problems: dict[str, list[SourceProblem]],
) -> list[SourceProblem]:
    """A source's documents the identity map knows under another id (issue 34): each pair
    held back (a ``rekey_pending`` problem of its old id), the ambiguous ones returned."""
    rekeys = pending_rekey(table, snapshot)
    held = [
        SourceProblem(
            source=source,
            kind=ProblemKind.REKEY_AMBIGUOUS,
            message=f"{c.reason}: {', '.join(c.doc_ids)} (left as they are)",
            path=c.path,
        )
        for c in rekeys.conflicts
    ]
    for pair in rekeys.pairs:
        # Neither missing nor new: the old id is kept as it is (a finding) until
        # ``reconciler rekey`` gives it the new one, so no document is served twice.
        by_id.pop(pair.new_id, None)
        family_of.pop(pair.new_id, None)
        problems[pair.old_id].append(
            SourceProblem(
                source=source,
                kind=ProblemKind.REKEY_PENDING,
                message=pair.new_id,
                path=pair.path,
                doc_id=pair.old_id,
                source_key=pair.old_key,
            )
        )
    return held


def with_declarations(
    table: DocumentReader,
    read: SourcesRead,
    declarations: Sequence[Declaration],
    *,
    configured: frozenset[str],
    batch: int = 1000,
    scope: frozenset[str] | None = None,
) -> SourcesRead:
    """``read`` with what the declarations add (``rules.declarations.overlay``): declared
    successors on the documents their sources leave unlinked, documents no configured source
    holds judged from their rows, the families declarations join or name, and each conflict
    with a source as a problem of the document (``family/declaration_conflict``).

    ``scope``: a scoped run's families (a ``declare`` run's are those its declarations
    touch). Their rows are read first, in one statement, and kept
    (``SourcesRead.touched_rows``): the run's stages read them from there (``ScopeRows``,
    the same statement), and only the named rows and touched families outside them are
    read here besides. ``rows`` holds what it would without them: the named rows and those of
    the families touched."""
    if not declarations:
        return read
    named = sorted(
        {d.doc_id for d in declarations}
        | {d.target for d in declarations if d.kind is DeclarationKind.SUPERSEDE}
    )
    # A scoped run's rows read first, in one statement (what ``ScopeRows`` reads): the named
    # rows and the touched families' rows it holds are not read again.
    kept = ScopeRows.read(table, scope, batch) if scope is not None else None
    in_scope = {row.doc_id: row for row in kept.rows} if kept is not None else {}
    rows: dict[str, Document] = {d: in_scope[d] for d in named if d in in_scope}
    missing = [doc_id for doc_id in named if doc_id not in in_scope]
    for start in range(0, len(missing), batch):
        rows.update(table.get_documents(missing[start : start + batch]))
    touched = sorted(families_touched(declarations, rows, read.family_of))
    if kept is not None:
        wanted = set(touched)
        rows.update((row.doc_id, row) for row in kept.rows if row.doc_family_id in wanted)
        touched = [family for family in touched if family not in kept.scope]
    for start in range(0, len(touched), batch):
        for row in table.iter_documents(batch_size=batch, families=touched[start : start + batch]):
            rows[row.doc_id] = row
    readable = frozenset(
        name for name, state in read.states.items() if state.scanned and state.readable
    )
    found = overlay(
        declarations,
        rows=rows,
        sources=read.by_id,
        family_of=read.family_of,
        configured=configured,
        read=readable,
    )
    problems = {doc_id: list(listed) for doc_id, listed in read.problems.items()}
    for conflict in found.conflicts:
        held = rows.get(conflict.doc_id)
        decl = conflict.declaration
        problems.setdefault(conflict.doc_id, []).append(
            SourceProblem(
                source=held.source if held is not None else "",
                kind=ProblemKind.DECLARATION_CONFLICT,
                message=(
                    f"declaration {decl.id} ({decl.kind} {decl.doc_id} -> {decl.target}, by "
                    f"{decl.declared_by}) is not applied: {conflict.message}"
                ),
                doc_id=conflict.doc_id,
                source_key=held.source_key if held is not None else None,
            )
        )
    return dataclasses.replace(
        read,
        by_id={**read.by_id, **found.documents},
        family_of={**read.family_of, **found.family_of},
        problems={doc_id: tuple(listed) for doc_id, listed in problems.items()},
        declared_only=found.declared_only,
        because=found.because,
        conflicts=found.conflicts,
        touched_rows=kept,
    )


def identify(table: DocumentReader, source: str, snapshot: SourceSnapshot) -> list[SourceProblem]:
    """Each problem with the identity of the document it is about, where one is known.

    A file that cannot be parsed has no id of its own: it is the document last seen at
    its path (the identity map), else the connector's default for that path. So a note
    whose identity is its frontmatter ``id`` keeps it when its frontmatter breaks. Not
    taken: an identity a parsed document holds in this scan (the note moved, and a new
    broken file took its old path), or one whose document is retired or has no row (a note
    deleted long ago does not come back through a broken file at its old path).
    """
    unnamed = [p for p in snapshot.problems if p.doc_id is None and p.path is not None]
    known = table.identities_at(source, {p.path for p in unnamed if p.path}) if unnamed else {}
    parsed = {doc.source_key for doc in snapshot.documents}
    rows = table.get_documents(f"{source}:{key}" for key in known.values())
    live = {
        key
        for key in known.values()
        if key not in parsed
        and (row := rows.get(f"{source}:{key}")) is not None
        and row.version_state is not VersionState.RETIRED
    }
    problems = []
    for problem in snapshot.problems:
        key = problem.source_key
        if problem.doc_id is None and problem.path in known:
            if known[problem.path] in live:
                key = known[problem.path]
        elif problem.doc_id is not None:
            key = problem.doc_id.removeprefix(f"{source}:")
        problems.append(
            dataclasses.replace(
                problem,
                source_key=key,
                doc_id=problem.doc_id or (f"{source}:{key}" if key is not None else None),
            )
        )
    return problems
