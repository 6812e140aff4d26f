"""The whole configuration, ``Settings``: its sections (one a module beside this one), how they
must agree, the index keys a layout defaults, and the bounds of a store call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import Field, field_validator, model_validator

from reconciler.payload import LAYOUTS
from reconciler.settings.bootstrap import BOOTSTRAP_PRESETS, BootstrapSettings
from reconciler.settings.guard import GuardSettings
from reconciler.settings.index import IndexSettings
from reconciler.settings.ingest import IngestSettings
from reconciler.settings.metrics import MetricsSettings
from reconciler.settings.policy import PolicySettings
from reconciler.settings.schedule import ScheduleSettings
from reconciler.settings.shared import Section
from reconciler.settings.sources import SourceSettings
from reconciler.settings.table import TableSettings
from reconciler.settings.watch import WatchSettings


@dataclass(frozen=True)
class StoreBounds:
    """Seconds one call to a store may take: a connect to the table (its handshake included),
    a statement, a lock wait (SQLite's busy timeout), a request to a Qdrant server."""

    connect: float
    statement: float
    lock: float
    index: float


def _preset_defaults(data: Any) -> Any:
    """Fill index defaults from the layout (``[index] layout``, or its old name ``[bootstrap]
    preset``, each filled from the other), then ``[bootstrap] doc_id_key``."""
    if not isinstance(data, Mapping):
        return data
    index = data.get("index")
    if isinstance(index, IndexSettings):
        return data  # an already-built section is taken as it is
    raw = data.get("bootstrap")
    if isinstance(raw, BootstrapSettings):
        raw = raw.model_dump()
    raw = dict(raw) if isinstance(raw, Mapping) else {}
    index = dict(index) if isinstance(index, Mapping) else {}
    layout = index.get("layout")
    if raw.get("preset") in BOOTSTRAP_PRESETS and not layout:
        layout = "default" if raw["preset"] == "native" else raw["preset"]
    elif isinstance(layout, str) and layout in LAYOUTS and not raw.get("preset"):
        raw["preset"] = "native" if layout == "default" else layout
    preset = BOOTSTRAP_PRESETS.get(str(raw.get("preset") or "native"))
    if preset is None or not (raw or layout):
        return data  # (the field validators report an unknown preset or layout)
    if layout:
        index["layout"] = layout
    keys = index.get("keys")
    keys = dict(keys) if isinstance(keys, Mapping) else {}
    for name in ("payload_prefix", "text_key"):
        if name in preset:
            index.setdefault(name, preset[name])
    doc_id = raw.get("doc_id_key") or preset.get("doc_id")
    if doc_id and doc_id != "doc_id":
        keys.setdefault("doc_id", doc_id)
    if keys:
        index["keys"] = keys
    return {**data, "bootstrap": raw, "index": index}


class Settings(Section):
    """The whole configuration."""

    table: TableSettings = TableSettings()
    index: IndexSettings = IndexSettings(path="qdrant")
    sources: tuple[SourceSettings, ...] = ()
    guard: GuardSettings = GuardSettings()
    policy: PolicySettings = PolicySettings()
    schedule: ScheduleSettings = ScheduleSettings()
    metrics: MetricsSettings = MetricsSettings()
    watch: WatchSettings = WatchSettings()
    ingest: IngestSettings = IngestSettings()
    bootstrap: BootstrapSettings = BootstrapSettings()
    #: Where the settings came from (a file path, or "defaults"); not a config key.
    origin: str = Field(default="defaults", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _presets(cls, data: Any) -> Any:
        return _preset_defaults(data)

    @model_validator(mode="after")
    def _layout_agrees(self) -> Settings:
        preset = "default" if self.bootstrap.preset == "native" else self.bootstrap.preset
        if preset != self.index.layout:
            raise ValueError(
                f"index.layout {self.index.layout!r} differs from bootstrap.preset "
                f"{self.bootstrap.preset!r} (its old name); set index.layout alone"
            )
        return self

    @model_validator(mode="after")
    def _doc_id_key_agrees(self) -> Settings:
        wanted = self.bootstrap.doc_id_key
        stored = self.index.keys.get("doc_id", "doc_id")
        if wanted and wanted != stored:
            raise ValueError(
                f"bootstrap.doc_id_key {wanted!r} differs from index.keys.doc_id {stored!r}; "
                "set one of them"
            )
        return self

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, value: tuple[SourceSettings, ...]) -> tuple[SourceSettings, ...]:
        names = [s.name for s in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return value

    @property
    def store_bounds(self) -> StoreBounds:
        """How long one call to a store may take, derived from ``[schedule] job_deadline``
        unless ``[table]`` sets it: a connect a tenth of it (2 s to 30 s), a statement all of
        it, a lock wait half of it (at most a minute); a Qdrant server's request at most
        ``[index] timeout`` and half of it. A job past its deadline waits on no store call
        for longer than its deadline."""
        deadline = self.schedule.job_deadline.total_seconds()

        def chosen(value: timedelta | None, derived: float) -> float:
            return value.total_seconds() if value is not None else derived

        table = self.table
        return StoreBounds(
            connect=chosen(table.connect_timeout, min(30.0, max(2.0, deadline / 10))),
            statement=chosen(table.statement_timeout, deadline),
            lock=chosen(table.lock_timeout, min(60.0, deadline / 2)),
            index=min(self.index.timeout, max(1.0, deadline / 2)),
        )

    def source(self, name: str) -> SourceSettings:
        """The source of that name."""
        for source in self.sources:
            if source.name == name:
                return source
        raise KeyError(name)
