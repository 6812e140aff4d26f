"""``init``, ``ingest`` and ``status``: the library functions that make a deployment's stores
ready, fill them from the sources (the reference ingestion) and describe them."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reconciler.app.approving import open_plans
from reconciler.app.holding import HeldLease, lease_name
from reconciler.app.wiring import (
    build_sources,
    index_location,
    open_index,
    open_table,
    schema_revision,
    stores,
)
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import ConfigError, LeaseBusy
from reconciler.ports import ChunkIndex, split_of
from reconciler.settings import Settings
from reconciler.writing.recovery import resolve_interrupted

if TYPE_CHECKING:
    from reconciler.ingesting import IngestProgress
    from reconciler.model import SourceSnapshot


def initialise(settings: Settings) -> dict[str, Any]:
    """Create or upgrade the document table; report the chunk index."""
    before = schema_revision(settings)
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
        archive = _archive_status(index)
    finally:
        index.close()
    messages = [
        f"document table {settings.table.display_url()}: schema {after.current} ({action})",
        f"chunk index {index_location(settings)} collection {settings.index.collection!r}: "
        + (f"{points} point(s)" if exists else "absent (created by the first `reconciler ingest`)"),
    ]
    if archive:
        held = archive["archive"]
        messages.append(
            f"split store: archive collection {held['collection']!r} holds {held['chunks']} of "
            "those point(s) (superseded, retired and draft versions'; created by the first move)"
        )
    return {
        "table": {"url": settings.table.display_url(), "revision": after.current, "action": action},
        "index": {
            "location": index_location(settings),
            "collection": settings.index.collection,
            "exists": exists,
            "points": points,
            **archive,
        },
        "messages": messages,
    }


def ingest_sources(
    settings: Settings,
    *,
    names: list[str] | None = None,
    outbox_only: bool = False,
    progress: IngestProgress | None = None,
    accept_unread: bool = False,
) -> dict[str, Any]:
    """Run the reference ingestion over the configured sources (``progress``: see
    ``IngestProgress``), under the whole corpus's lease (it may write any family): a run or
    an apply of the whole corpus and another ingestion wait for it, and it first resolves what
    a killed ingestion or run left (``resolve_interrupted``). Raises ``LeaseBusy`` when
    another runner holds that lease. On a fresh deployment (a source none of whose documents
    is registered) the source is first read dry, and ``VocabularyUnread`` is raised, with
    nothing written, when its configuration reads nothing of a field it maps (unless
    ``accept_unread``)."""
    unknown = sorted(set(names or []) - {s.name for s in settings.sources})
    if unknown:
        raise ConfigError([("sources", f"no source named {n!r}") for n in unknown])
    # Only ingestion embeds: numpy and the embedders load here, not with every command.
    from reconciler.embedding import make_embedder  # noqa: PLC0415
    from reconciler.ingesting import WHOLE, Ingestor  # noqa: PLC0415

    sources = build_sources(settings, names)
    embedder = make_embedder(
        settings.ingest.embedder, dim=settings.ingest.dim, model=settings.ingest.model
    )
    with stores(settings) as opened:
        lease = opened.leases(lease_name(WHOLE))
        with HeldLease(lease) as held:
            if not held.acquired:
                raise LeaseBusy(
                    f"another runner holds the lease of shard {WHOLE} or a shard's (a run of "
                    "any shard, an apply, a rollback or another ingestion)"
                    f"{held.busy}; the ingestion was not started (nothing was read or "
                    "written): run it again when that one has ended"
                )
            resolve_interrupted(table=opened.table, index=opened.index, shard=WHOLE)
            scanned: dict[str, SourceSnapshot] = {}
            if not (accept_unread or outbox_only):
                # (the vocabulary survey, and pydantic with it, only for an ingestion; what it
                # read is what the ingestion reads)
                from reconciler.app.surveying import refuse_unread  # noqa: PLC0415

                scanned = refuse_unread(sources, opened.table, settings)
            ingestor = Ingestor(
                table=opened.table,
                index=opened.index,
                embedder=embedder,
                max_chunk_chars=settings.ingest.max_chunk_chars,
                progress=progress,
                unknown_siblings=settings.policy.unknown_siblings,
                layout=settings.index.layout,
            )
            report = ingestor.run(sources, outbox_only=outbox_only, scanned=scanned)
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


def gather_status(settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """Documents by state, chunks, families, sources, the watched sources' marks, the saved
    plans open (``app.approving.open_plans``: each pending one names ``apply --plan ID``) and
    the last runs."""
    # (here: the followers load watchdog, and the marks SQLAlchemy; no other command needs them)
    from reconciler.app.watch_reports import watch_rows  # noqa: PLC0415
    from reconciler.stores.sql.watermarks import SqlWatchMarks  # noqa: PLC0415

    with stores(settings) as opened:
        stats = opened.table.stats()
        sources = opened.table.source_status()
        runs = opened.table.last_runs(5)
        index = opened.index
        exists = index.exists()
        chunks = index.count() if exists else 0
        chunk_states = index.facet(key="version_state") if exists else {}
        archive = _archive_status(opened.index)
        watched = watch_rows(settings, SqlWatchMarks.of(opened.table).marks(), clock.now())
        plans = open_plans(opened.table, clock.now())
    configured = {s.name: s for s in settings.sources}
    return {
        "table": settings.table.display_url(),
        "index": {
            "location": index_location(settings),
            "collection": settings.index.collection,
            "exists": exists,
            "chunks": chunks,
            "chunks_by_state": {str(k): v for k, v in sorted(chunk_states.items(), key=str)},
            **archive,
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
        "watch": watched,
        "plans": plans,
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


def _archive_status(index: ChunkIndex) -> dict[str, Any]:
    """A split store's archive, for ``status`` (``chunks`` above count both collections)."""
    split = split_of(index)
    if split is None:
        return {}
    held = split.archive.count() if split.archive.exists() else 0
    return {"archive": {"collection": split.collections[1], "chunks": held}}
