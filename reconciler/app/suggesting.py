"""``reconciler suggest``: the library function behind it. Streams the document table, reads
each document's path and body from its source (once, and drops the body after its profile),
streams the chunk index's vectors once (``Scope.vectors``: each document's reduced to one small
vector, ``reconciler.discovery.vectors``), and hands the profiles to ``reconciler.discovery``.
Writes nothing: no row, no payload, no audit entry, no run, no lease (a person reviews the
proposals first); a local-mode folder or an Edge shard that does not exist is not created.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from reconciler.app.wiring import build_sources, open_index, open_table
from reconciler.discovery import DEFAULT_MIN_SCORE, Profile, Proposals, discover, profile
from reconciler.discovery.vectors import MIN_DOCUMENTS, ChunkVectors
from reconciler.errors import ConfigError, StoreFault, StoreUnavailable
from reconciler.model import Document
from reconciler.ports.source import ConnectorError, SystemOfRecord
from reconciler.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scope:
    """Which documents ``suggest`` looks at."""

    source: str | None = None
    doc_class: str | None = None
    #: Read bodies from the sources (near-duplicate bodies and "replaces X" need them).
    bodies: bool = True
    #: Read the chunk vectors already in the index (never re-embedded) and compare them.
    vectors: bool = False


def suggest(
    settings: Settings,
    *,
    scope: Scope = Scope(),
    min_score: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> Proposals:
    """The proposals among the table's documents in ``scope`` scoring at least ``min_score``
    (default ``DEFAULT_MIN_SCORE``)."""
    # (the rows `bootstrap` adopted carry `[bootstrap] source`, which no [[sources]] names)
    known = sorted({s.name for s in settings.sources} | {settings.bootstrap.source})
    if scope.source is not None and scope.source not in known:
        raise ConfigError(
            [
                (
                    "--source",
                    f"no source named {scope.source!r}: the config's sources and the "
                    f"adopted rows' are {', '.join(map(repr, known))}",
                )
            ],
            origin=settings.origin,
        )
    started = time.perf_counter()
    notes: list[str] = []
    readers = _readers(settings, scope, notes)
    table = open_table(settings)
    try:
        classes: set[str | None] = set()
        profiles = list(
            _profiles(table.iter_documents(source=scope.source), scope, readers, progress, classes)
        )
    finally:
        table.close()
    if scope.doc_class is not None and not profiles:
        named = sorted(repr(c) for c in classes if c is not None)
        notes.append(
            f"no document has doc_class {scope.doc_class!r} (classes are matched exactly; "
            f"the table's: {', '.join(named) or 'none'})"
        )
    log.info(
        "suggest: %d documents profiled (table, sources' paths and bodies) in %.1fs",
        len(profiles),
        time.perf_counter() - started,
    )
    if scope.vectors:
        profiles = with_vectors(settings, profiles, notes)
    found = discover(
        profiles, min_score=DEFAULT_MIN_SCORE if min_score is None else min_score, notes=notes
    )
    log.info(
        "suggest: %d documents, %d pairs scored, %d links and %d families proposed in %.1fs",
        found.documents,
        found.pairs_scored,
        len(found.links),
        len(found.families),
        time.perf_counter() - started,
    )
    return found


def with_vectors(settings: Settings, profiles: list[Profile], notes: list[str]) -> list[Profile]:
    """The profiles with their documents' chunk vectors, streamed from the index once and
    reduced (``ChunkVectors``); unchanged, with a note saying why, when the index cannot be
    read or holds no vectors of these documents worth comparing."""
    started = time.perf_counter()
    reduced = ChunkVectors(p.doc_id for p in profiles)
    skipped = 0
    try:
        if _no_collection_here(settings):
            raise _NotRead(f"no local Qdrant storage at {settings.index.path}")
        index = open_index(settings)
        try:
            if not index.exists():
                raise _NotRead(f"collection {settings.index.collection!r} does not exist")
            for page in index.scan_vectors(batch_size=settings.index.scroll_batch):
                reduced.add(page.doc_ids, page.vectors)
                skipped += page.skipped
        finally:
            index.close()
    except (_NotRead, StoreUnavailable, StoreFault, ConfigError) as exc:
        notes.append(f"chunk vectors not read ({_one_line(exc)}): compared without them")
        return profiles
    vectors = reduced.reduce()
    log.info(
        "suggest: %d chunk vectors (dim %s) of %d documents read in %.1fs; %d of other "
        "documents, %d without a document id or one dense vector, %d of another size",
        reduced.chunks,
        reduced.dim,
        len(vectors),
        time.perf_counter() - started,
        reduced.outside,
        skipped,
        reduced.mismatched,
    )
    if len(vectors) < MIN_DOCUMENTS:
        notes.append(
            f"chunk vectors not compared: {len(vectors)} of the {len(profiles)} documents have "
            f"chunks with vectors in the index (at least {MIN_DOCUMENTS} are needed)"
        )
        return profiles
    return [replace(p, vector=vectors[p.doc_id]) if p.doc_id in vectors else p for p in profiles]


class _NotRead(Exception):
    pass


def _no_collection_here(settings: Settings) -> bool:
    """Whether ``index.path`` names a local-mode folder that does not exist (opening it would
    create it: ``suggest`` creates nothing)."""
    cfg = settings.index
    return cfg.engine == "qdrant" and cfg.path is not None and not Path(cfg.path).exists()


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or exc.__class__.__name__


@dataclass
class _Reader:
    """One source's paths (by doc id) and its body reader."""

    source: SystemOfRecord
    paths: dict[str, tuple[str, str | None]]


def _readers(settings: Settings, scope: Scope, notes: list[str]) -> dict[str, _Reader]:
    """Each source scanned once for its documents' paths (metadata only)."""
    readers = {}
    names = [scope.source] if scope.source else None
    for source in build_sources(settings, names):
        try:
            snapshot = source.scan()
        except ConnectorError as exc:
            notes.append(
                f"source {source.name!r} could not be read ({exc}): names from the table only"
            )
            continue
        readers[source.name] = _Reader(
            source,
            {d.doc_id: (d.source_key, d.path) for d in snapshot.documents},
        )
    return readers


def _profiles(
    documents: Iterator[Document],
    scope: Scope,
    readers: dict[str, _Reader],
    progress: Callable[[int], None] | None,
    classes: set[str | None],
) -> Iterator[Profile]:
    """The profiles of ``documents`` in ``scope``; ``classes`` collects the classes seen."""
    unreadable = unlisted = 0
    for n, doc in enumerate(documents, 1):
        classes.add(doc.doc_class)
        if scope.doc_class is not None and doc.doc_class != scope.doc_class:
            continue
        reader = readers.get(doc.source)
        key, path = reader.paths.get(doc.doc_id, (None, None)) if reader else (None, None)
        # (a document its source's scan did not list is not asked for: a vault scans itself
        # again for every key it does not know, which for N missing notes is N more scans)
        unlisted += reader is not None and key is None
        body = None
        if reader is not None and scope.bodies and key is not None:
            try:
                body = reader.source.read_body(key)
            except ConnectorError:
                unreadable += 1
        yield profile(
            doc_id=doc.doc_id,
            source=doc.source,
            family=doc.doc_family_id,
            doc_class=doc.doc_class,
            title=doc.title,
            path=path,
            effective_from=doc.effective_from,
            body=body,
            superseded_by=doc.superseded_by,
        )
        if progress is not None and n % 1000 == 0:
            progress(n)
    if unreadable:
        log.warning(
            "suggest: %d bodies could not be read; those documents by name only", unreadable
        )
    if unlisted:
        log.warning(
            "suggest: %d documents of the table are not in their source's scan (deleted or "
            "refused there); those documents by name only",
            unlisted,
        )
