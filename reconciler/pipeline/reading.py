"""Stage 1 of a run: read the systems of record (metadata and content hashes, never bodies)
and give each document its family (``SourcesRead``). A source that cannot be read is
unreadable, never empty."""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from reconciler.check_inputs import SourceState
from reconciler.checks import SOURCE_CHECKS
from reconciler.model import (
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    VersionState,
)
from reconciler.pipeline.values import (
    Options,
    SourcesRead,
)
from reconciler.ports import DocumentReader
from reconciler.ports.source import ConnectorError, SystemOfRecord
from reconciler.rules.identity import resolve_families
from reconciler.rules.storable import screen

log = logging.getLogger(__name__)


def read_sources(
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
        if not read:
            states[source.name] = SourceState(
                source.name,
                readable=False,
                scanned=False,
                ttl=ttl,
                last_success_at=last_success,
            )
            continue
        try:
            snapshot = screen(source.scan())
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
        )
        by_key, by_hash = table.identities(source.name)
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
        for key, instant in table.identity_last_seen(source.name).items():
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
    holders: dict[str, list[str]] = defaultdict(list)
    for doc_id, doc in by_id.items():
        holders[doc.content_hash].append(doc_id)
    return SourcesRead(
        states=states,
        by_id=by_id,
        family_of=family_of,
        problems={doc_id: tuple(found) for doc_id, found in problems.items()},
        loose_problems=tuple(loose_problems),
        last_seen=last_seen,
        identities=identities,
        present=present,
        holders={digest: tuple(sorted(ids)) for digest, ids in holders.items()},
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
