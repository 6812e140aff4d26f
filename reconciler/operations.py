"""Library functions behind the CLI commands: each takes settings and returns plain data."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from reconciler.embedding import make_embedder
from reconciler.errors import ConfigError
from reconciler.ingesting import Ingestor
from reconciler.settings import Settings
from reconciler.stores.sql import SqlDocumentTable
from reconciler.wiring import build_sources, open_index, open_table, stores


def _index_location(settings: Settings) -> str:
    return settings.index.path or settings.index.url or "?"


def initialise(settings: Settings) -> dict[str, Any]:
    """Create or upgrade the document table; report the chunk index."""
    probe = SqlDocumentTable.from_url(settings.table.resolved_url())
    try:
        before = probe.schema_status().current
    finally:
        probe.close()
    table = open_table(settings, create=True)
    try:
        after = table.schema_status()
    finally:
        table.close()
    if before is None:
        action = "created"
    elif before != after.current:
        action = f"upgraded from {before}"
    else:
        action = "up to date"
    index = open_index(settings)
    try:
        exists = index.exists()
        points = index.count() if exists else 0
    finally:
        index.close()
    messages = [
        f"document table {settings.table.display_url()}: schema {after.current} ({action})",
        f"chunk index {_index_location(settings)} collection {settings.index.collection!r}: "
        + (f"{points} point(s)" if exists else "absent (created by the first `reconciler ingest`)"),
    ]
    return {
        "table": {"url": settings.table.display_url(), "revision": after.current, "action": action},
        "index": {
            "location": _index_location(settings),
            "collection": settings.index.collection,
            "exists": exists,
            "points": points,
        },
        "messages": messages,
    }


def ingest_sources(
    settings: Settings, *, names: list[str] | None = None, outbox_only: bool = False
) -> dict[str, Any]:
    """Run the reference ingestion over the configured sources."""
    unknown = sorted(set(names or []) - {s.name for s in settings.sources})
    if unknown:
        raise ConfigError([("sources", f"no source named {n!r}") for n in unknown])
    sources = build_sources(settings, names)
    embedder = make_embedder(
        settings.ingest.embedder, dim=settings.ingest.dim, model=settings.ingest.model
    )
    with stores(settings) as opened:
        ingestor = Ingestor(
            table=opened.table,
            index=opened.index,
            embedder=embedder,
            max_chunk_chars=settings.ingest.max_chunk_chars,
        )
        report = ingestor.run(sources, outbox_only=outbox_only)
    return {
        "run_id": report.run_id,
        "ok": report.ok,
        "totals": report.totals(),
        "sources": [
            {
                **{k: v for k, v in asdict(s).items() if k not in ("problems", "failed")},
                "problems": [
                    {
                        "kind": str(p.kind),
                        "path": p.path,
                        "doc_id": p.doc_id,
                        "message": p.message,
                    }
                    for p in s.problems
                ],
                "failed": [{"doc_id": d, "error": e} for d, e in s.failed],
            }
            for s in report.sources
        ],
    }


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def gather_status(settings: Settings) -> dict[str, Any]:
    """Documents by state, chunks, families, sources and the last runs."""
    with stores(settings) as opened:
        stats = opened.table.stats()
        sources = opened.table.source_status()
        runs = opened.table.last_runs(5)
        index = opened.index
        exists = index.exists()
        chunks = index.count() if exists else 0
        chunk_states = index.facet(key="version_state") if exists else {}
    configured = {s.name: s for s in settings.sources}
    return {
        "table": settings.table.display_url(),
        "index": {
            "location": _index_location(settings),
            "collection": settings.index.collection,
            "exists": exists,
            "chunks": chunks,
            "chunks_by_state": {str(k): v for k, v in sorted(chunk_states.items(), key=str)},
        },
        **stats,
        "sources": [
            {
                "name": name,
                "type": configured[name].type if name in configured else None,
                "configured": name in configured,
                "last_success_at": _iso(row.last_success_at) if row else None,
                "last_attempt_at": _iso(row.last_attempt_at) if row else None,
                "last_error": row.last_error if row else None,
                "documents_seen": row.documents_seen if row else None,
            }
            for name in sorted(set(configured) | set(sources))
            for row in [sources.get(name)]
        ],
        "last_runs": [
            {
                "run_id": r.run_id,
                "mode": r.mode,
                "actor": r.actor,
                "status": r.status,
                "started_at": _iso(r.started_at),
                "finished_at": _iso(r.finished_at),
            }
            for r in runs
        ],
    }
