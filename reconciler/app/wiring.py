"""Turns settings into live stores and connectors: the one place that opens them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import ConfigError
from reconciler.ports import ChunkIndex
from reconciler.ports.source import SystemOfRecord
from reconciler.settings import Settings
from reconciler.sources import build_source
from reconciler.stores.sql import SqlDocumentTable

if TYPE_CHECKING:
    from reconciler.stores.qdrant import QdrantChunkIndex


def open_table(settings: Settings, *, create: bool = False) -> SqlDocumentTable:
    """Open the document table and check (or, with ``create``, initialise) its schema."""
    table = SqlDocumentTable.from_url(settings.table.resolved_url())
    try:
        table.ensure_schema(create=create)
    except BaseException:
        table.close()
        raise
    return table


def schema_revision(settings: Settings) -> str | None:
    """The document table's schema revision as it stands (``None``: not initialised), read
    without checking or creating anything."""
    probe = SqlDocumentTable.from_url(settings.table.resolved_url())
    try:
        return probe.schema_status().current
    finally:
        probe.close()


def open_index(settings: Settings) -> ChunkIndex:
    """Open the chunk index of ``index.engine``: qdrant-client (local mode or a server) or a
    Qdrant Edge shard at ``index.path``/``index.collection``."""
    cfg = settings.index
    if cfg.engine == "edge":
        return open_edge_index(settings)
    return open_qdrant_index(settings)


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
    from reconciler.stores.qdrant import QdrantChunkIndex, connect  # noqa: PLC0415

    client = connect(path=cfg.path, url=cfg.url, api_key=cfg.api_key(), timeout=cfg.timeout)
    return QdrantChunkIndex(
        client, collection=cfg.collection, keys=cfg.key_map, text_key=cfg.text_key
    )


def open_edge_index(settings: Settings) -> ChunkIndex:
    """Open (or prepare to create) the Qdrant Edge shard ``index.path``/``index.collection``."""
    cfg = settings.index
    try:
        from reconciler.stores.edge import EdgeChunkIndex  # noqa: PLC0415 (an optional extra)
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
    return EdgeChunkIndex(Path(cfg.path) / cfg.collection, keys=cfg.key_map, text_key=cfg.text_key)


def build_sources(settings: Settings, names: list[str] | None = None) -> list[SystemOfRecord]:
    """The configured connectors (optionally only those named)."""
    chosen = [s for s in settings.sources if not names or s.name in names]
    return [build_source(s) for s in chosen]


@dataclass
class Stores:
    """The document table and chunk index of one deployment."""

    table: SqlDocumentTable
    index: ChunkIndex


@contextmanager
def stores(settings: Settings, *, create: bool = False) -> Iterator[Stores]:
    """Open both stores and close them afterwards (local mode and Edge hold a lock)."""
    table = open_table(settings, create=create)
    try:
        index = open_index(settings)
        try:
            yield Stores(table=table, index=index)
        finally:
            index.close()
    finally:
        table.close()
