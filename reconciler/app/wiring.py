"""Turns settings into live stores and connectors: the one place that opens them, and the one
place that hands out the single-runner leases kept in the document database (a
``LeaseFactory``, the port of ``reconciler.ports.lease``): the library functions of
``operations`` take leases by name and never see the database engine behind them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import ArchiveRefused, ConfigError
from reconciler.ports import ChunkIndex
from reconciler.ports.lease import Lease, LeaseFactory
from reconciler.ports.source import SystemOfRecord
from reconciler.settings import Settings
from reconciler.sources import build_source

if TYPE_CHECKING:
    from reconciler.stores.qdrant.index import QdrantChunkIndex
    from reconciler.stores.sql import SqlDocumentTable, TableBounds

log = logging.getLogger(__name__)


def table_bounds(settings: Settings) -> TableBounds:
    """How long one call to the document table may take (``Settings.store_bounds``)."""
    from reconciler.stores.sql import TableBounds  # noqa: PLC0415 - SQLAlchemy, when opened

    bounds = settings.store_bounds
    return TableBounds(connect=bounds.connect, statement=bounds.statement, lock=bounds.lock)


def _table(settings: Settings) -> SqlDocumentTable:
    # SQLAlchemy is imported when the table is first opened, not by every command (issue 38)
    from reconciler.stores.sql import SqlDocumentTable  # noqa: PLC0415

    return SqlDocumentTable.from_url(settings.table.resolved_url(), bounds=table_bounds(settings))


def open_table(settings: Settings, *, create: bool = False) -> SqlDocumentTable:
    """Open the document table (every call bounded) and check (or, with ``create``,
    initialise) its schema."""
    table = _table(settings)
    try:
        table.ensure_schema(create=create)
    except BaseException:
        table.close()
        raise
    return table


def open_initialised_table(settings: Settings) -> SqlDocumentTable | None:
    """The document table if it is initialised, else None, creating nothing (a SQLite file
    that does not exist is not created by looking for it)."""
    table = _table(settings)
    database = table.engine.url.database
    try:
        if (
            table.dialect == "sqlite"
            and database not in (None, "", ":memory:")
            and not Path(database).exists()  # connecting would create the file
        ):
            return None
        if table.schema_status().current is None:
            return None
    finally:
        table.close()
    return open_table(settings)


def leases_of(table: SqlDocumentTable) -> LeaseFactory:
    """The leases kept in ``table``'s database: an advisory lock on PostgreSQL, a lease row
    elsewhere (``reconciler.stores.sql.lease.make_lease``)."""
    from reconciler.stores.sql.lease import make_lease  # noqa: PLC0415 - with the table

    def lease(name: str, *, clock: Clock = SYSTEM_CLOCK) -> Lease:
        return make_lease(table.engine, name, clock=clock, connect_args=table.connect_args)

    return lease


def schema_revision(settings: Settings) -> str | None:
    """The document table's schema revision as it stands (``None``: not initialised), read
    without checking or creating anything."""
    probe = _table(settings)
    try:
        return probe.schema_status().current
    finally:
        probe.close()


def index_location(settings: Settings) -> str:
    """Where the chunk index is, for messages: its path or URL."""
    return settings.index.path or settings.index.url or "?"


def local_folder_missing(settings: Settings) -> bool:
    """Whether ``index.path`` names a qdrant-client local-mode folder that does not exist: no
    collection can be there, and opening the client would create the folder (a command that
    needs the collection says it is missing first, and creates nothing)."""
    cfg = settings.index
    return cfg.engine == "qdrant" and cfg.path is not None and not Path(cfg.path).exists()


def open_index(settings: Settings, *, refuse_foreign_archive: bool = False) -> ChunkIndex:
    """Open the chunk index of ``index.engine``: qdrant-client (local mode or a server) or a
    Qdrant Edge shard at ``index.path``/``index.collection``; with ``index.archive_collection``,
    a split store over that collection and its archive (``stores.split``).

    An archive collection that exists and cannot hold the main collection's points (someone
    else made it first: ``SplitChunkIndex.archive_conflict``) is never written: with
    ``refuse_foreign_archive`` (``split``) that is ``ArchiveRefused``; otherwise the main
    collection is opened alone, as one collection, and the log says why (nothing else is
    blocked by it)."""
    cfg = settings.index
    main = open_edge_index(settings) if cfg.engine == "edge" else open_qdrant_index(settings)
    if cfg.archive_collection is None:
        return main
    from reconciler.stores.split import SplitChunkIndex  # noqa: PLC0415

    try:
        split = SplitChunkIndex(main, open_archive(settings, main))
        conflict = split.archive_conflict()
    except BaseException:
        main.close()
        raise
    if conflict is None:
        return split
    if refuse_foreign_archive:
        split.close()
        raise ArchiveRefused(f"refused: {conflict}; nothing was moved")
    log.error(
        "split store refused: %s; the main collection %r is reconciled alone (as one "
        "collection) and nothing is moved into the archive",
        conflict,
        cfg.collection,
    )
    if cfg.engine == "edge":
        split.archive.close()  # (its own shard; a qdrant-client archive shares main's client)
    return main


def open_archive(settings: Settings, main: ChunkIndex) -> ChunkIndex:
    """The archive collection of a split store beside ``main`` (on the same client, or the
    Edge shard ``index.path``/``index.archive_collection``)."""
    cfg = settings.index
    assert cfg.archive_collection is not None
    if cfg.engine == "edge":
        return open_edge_index(settings, collection=cfg.archive_collection)
    from reconciler.stores.qdrant.index import QdrantChunkIndex  # noqa: PLC0415

    assert isinstance(main, QdrantChunkIndex)
    return QdrantChunkIndex(
        main.client, collection=cfg.archive_collection, keys=cfg.key_map, text_key=cfg.text_key
    )


def open_qdrant_index(settings: Settings, *, needed_by: str | None = None) -> QdrantChunkIndex:
    """Open the qdrant-client chunk index; ``needed_by`` names a command that works only there
    (it searches through the client), refused with a ConfigError on another engine."""
    cfg = settings.index
    if cfg.engine != "qdrant":
        raise ConfigError(
            [
                (
                    "index.engine",
                    f'{needed_by or "this command"} runs on engine = "qdrant" only (local '
                    f"mode or a server), not {cfg.engine!r}",
                )
            ],
            origin=settings.origin,
        )
    # (imported here: qdrant-client takes ~0.6 s to import, which an Edge deployment never needs)
    from reconciler.stores.qdrant.index import QdrantChunkIndex, connect  # noqa: PLC0415

    client = connect(
        path=cfg.path, url=cfg.url, api_key=cfg.api_key(), timeout=settings.store_bounds.index
    )
    return QdrantChunkIndex(
        client, collection=cfg.collection, keys=cfg.key_map, text_key=cfg.text_key
    )


def open_edge_index(settings: Settings, *, collection: str | None = None) -> ChunkIndex:
    """Open (or prepare to create) the Qdrant Edge shard ``index.path``/``index.collection``
    (or ``collection``)."""
    cfg = settings.index
    try:
        from reconciler.stores.edge.index import EdgeChunkIndex  # noqa: PLC0415 (an optional extra)
    except ImportError as exc:
        raise ConfigError(
            [
                (
                    "index.engine",
                    'engine = "edge" needs Qdrant Edge, which is not installed: '
                    f"pip install 'corpus-reconciler[edge]' ({exc})",
                )
            ],
            origin=settings.origin,
        ) from None
    assert cfg.path is not None  # settings require it for Edge
    shard = Path(cfg.path) / (collection or cfg.collection)
    return EdgeChunkIndex(shard, keys=cfg.key_map, text_key=cfg.text_key)


def build_sources(settings: Settings, names: list[str] | None = None) -> list[SystemOfRecord]:
    """The configured connectors (optionally only those named)."""
    chosen = [s for s in settings.sources if not names or s.name in names]
    return [build_source(s) for s in chosen]


@dataclass
class Stores:
    """The document table and chunk index of one deployment, and the leases kept beside the
    table."""

    table: SqlDocumentTable
    index: ChunkIndex
    leases: LeaseFactory


@contextmanager
def stores(settings: Settings, *, create: bool = False) -> Iterator[Stores]:
    """Open both stores and close them afterwards (local mode and Edge hold a lock)."""
    table = open_table(settings, create=create)
    try:
        index = open_index(settings)
        try:
            yield Stores(table=table, index=index, leases=leases_of(table))
        finally:
            index.close()
    finally:
        table.close()
