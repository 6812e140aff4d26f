"""Turns settings into live stores and connectors: the one place that opens them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from connectors.base import SystemOfRecord
from reconciler.settings import Settings
from reconciler.sources import build_source
from reconciler.stores.qdrant import QdrantChunkIndex, connect
from reconciler.stores.sql import SqlDocumentTable


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


def open_index(settings: Settings) -> QdrantChunkIndex:
    """Open the chunk index (embedded local mode or a server)."""
    cfg = settings.index
    client = connect(path=cfg.path, url=cfg.url, api_key=cfg.api_key(), timeout=cfg.timeout)
    return QdrantChunkIndex(
        client, collection=cfg.collection, keys=cfg.key_map, text_key=cfg.text_key
    )


def build_sources(settings: Settings, names: list[str] | None = None) -> list[SystemOfRecord]:
    """The configured connectors (optionally only those named)."""
    chosen = [s for s in settings.sources if not names or s.name in names]
    return [build_source(s) for s in chosen]


@dataclass
class Stores:
    """The document table and chunk index of one deployment."""

    table: SqlDocumentTable
    index: QdrantChunkIndex


@contextmanager
def stores(settings: Settings, *, create: bool = False) -> Iterator[Stores]:
    """Open both stores and close them afterwards (local mode holds a file lock)."""
    table = open_table(settings, create=create)
    try:
        index = open_index(settings)
        try:
            yield Stores(table=table, index=index)
        finally:
            index.close()
    finally:
        table.close()
