"""The shape of a configuration: one pydantic model a section (``TableSettings``,
``IndexSettings``, ``SourceSettings``, ...), the whole ``Settings``, and the value types they
share (durations, cron expressions, secrets named by a variable)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from sqlalchemy.engine import make_url

from reconciler.errors import ConfigError
from reconciler.model import ALL_KEYS
from reconciler.payload import LAYOUTS, KeyMap

ENV_PREFIX = "RECONCILER_"
#: Environment variables that are not config keys.
#: Variables that are not overrides: the config file, and the test suite's own (its PostgreSQL,
#: its Hypothesis profile: under ``thorough`` every CLI test refused its config).
ENV_RESERVED = {"RECONCILER_CONFIG", "RECONCILER_TEST_PG", "RECONCILER_HYPOTHESIS_PROFILE"}
#: ... and the audit chain's protection, read where the chain is written and verified, never
#: from the config file (``reconciler.stores.audit_protection``).
ENV_RESERVED |= {"RECONCILER_AUDIT_KEY", "RECONCILER_AUDIT_KEY_FILE", "RECONCILER_AUDIT_ANCHOR"}
DEFAULT_CONFIG_NAME = "reconciler.toml"

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(value: Any) -> timedelta:
    """Parse ``"90s"``, ``"15m"``, ``"24h"``, ``"7d"``, ``"2w"`` (or seconds as a number)."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    raise ValueError("expected a duration such as 90s, 15m, 24h, 7d or 2w")


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class StoreBounds:
    """Seconds one call to a store may take: a connect to the table (its handshake included),
    a statement, a lock wait (SQLite's busy timeout), a request to a Qdrant server."""

    connect: float
    statement: float
    lock: float
    index: float


def _secret_variable(value: str | None) -> str | None:
    if value is not None and value.upper().startswith(ENV_PREFIX):
        raise ValueError(
            f"{value}: variables starting with {ENV_PREFIX} are read as config overrides; "
            "name the secret's variable otherwise (e.g. DATABASE_URL, QDRANT_API_KEY)"
        )
    return value


SecretVariable = Annotated[str | None, BeforeValidator(_secret_variable)]


class TableSettings(_Section):
    """The document table (SQLAlchemy URL)."""

    url: str = "sqlite:///reconciler.db"
    #: Name of an environment variable holding the URL (use when it carries a password).
    url_env: SecretVariable = None
    batch_size: int = Field(default=1000, gt=0)
    #: Bounds of every call to the database (``Settings.store_bounds``); unset: derived from
    #: ``[schedule] job_deadline``.
    connect_timeout: Duration | None = None
    statement_timeout: Duration | None = None
    lock_timeout: Duration | None = None

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str) -> str:
        try:
            url = make_url(value)
        except Exception as exc:  # sqlalchemy raises ArgumentError with a clear text
            raise ValueError(f"not a SQLAlchemy database URL ({exc})") from None
        if url.get_backend_name() not in {"sqlite", "postgresql"}:
            raise ValueError("supported databases are sqlite:/// and postgresql+psycopg://")
        return value

    def resolved_url(self) -> str:
        """The URL to connect with (from ``url_env`` when set)."""
        if self.url_env:
            value = os.environ.get(self.url_env)
            if not value:
                raise ConfigError(
                    [("table.url_env", f"environment variable {self.url_env} is not set")]
                )
            return value
        return self.url

    def display_url(self) -> str:
        """The URL with any password masked, for logs and status."""
        return make_url(self.resolved_url()).render_as_string(hide_password=True)


class IndexSettings(_Section):
    """The chunk index. ``engine = "qdrant"`` (qdrant-client): embedded local mode (``path``)
    or a server (``url``). ``engine = "edge"``: a Qdrant Edge shard (beta, embedded, one
    process at a time) at ``path``/``collection``; needs the ``edge`` extra."""

    engine: Literal["qdrant", "edge"] = "qdrant"
    path: str | None = None
    url: str | None = None
    api_key_env: SecretVariable = None
    api_key_file: str | None = None
    collection: str = "corpus"
    #: A split store: the collection (an Edge shard beside ``collection``'s) that holds every
    #: chunk of a version that is not servable (superseded, retired, draft), so the main one
    #: holds only what may be served. Unset: one collection.
    archive_collection: str | None = None
    #: The framework whose payload layout the collection has (``reconciler.payload.LAYOUTS``):
    #: sets the defaults of payload_prefix, text_key and keys.doc_id (explicit ones win), and
    #: what the reference ingestion writes beside them. ``[bootstrap] preset`` is its old name.
    layout: Literal["default", "langchain", "llamaindex"] = "default"
    payload_prefix: str = ""
    #: Where chunk text lives (``page_content`` in LangChain-built collections).
    text_key: str = "text"
    keys: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=30.0, gt=0)
    scroll_batch: int = Field(default=1000, gt=0)
    write_batch: int = Field(default=256, gt=0)

    @field_validator("path", "url", "api_key_file", "archive_collection", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """An empty value (``RECONCILER_INDEX__PATH=""`` to switch to a server) is unset."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("keys")
    @classmethod
    def _known_keys(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(ALL_KEYS))
        if unknown:
            raise ValueError(
                f"unknown payload key(s) {', '.join(unknown)}; renamable keys are "
                + ", ".join(ALL_KEYS)
            )
        for stored in value.values():
            if not stored or "." in stored:
                raise ValueError("renamed key names must be non-empty and contain no '.'")
        return value

    @field_validator("payload_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if value and (value.startswith(".") or ".." in value):
            raise ValueError('a dotted path such as "metadata." or ""')
        return value if not value or value.endswith(".") else value + "."

    @model_validator(mode="after")
    def _one_location(self) -> IndexSettings:
        if self.archive_collection is not None and self.archive_collection == self.collection:
            raise ValueError(
                f"index.archive_collection names the main collection {self.collection!r}: "
                'name another one (e.g. "corpus_archive"), or remove it for one collection'
            )
        if self.engine == "edge":
            if self.url:
                raise ValueError(
                    'index.url names a Qdrant server, which engine = "edge" does not use: '
                    "remove index.url (Edge keeps its shard under index.path), or set "
                    'engine = "qdrant"'
                )
            if not self.path:
                raise ValueError('engine = "edge" needs index.path, the folder of its shards')
            if self.api_key_env or self.api_key_file:
                raise ValueError(
                    'engine = "edge" takes no API key: remove index.api_key_env/api_key_file'
                )
            return self
        if bool(self.path) == bool(self.url):
            raise ValueError("set exactly one of index.path (embedded) or index.url (server)")
        if self.api_key_env and self.api_key_file:
            raise ValueError("set at most one of index.api_key_env or index.api_key_file")
        return self

    @property
    def key_map(self) -> KeyMap:
        """The payload key layout this collection uses."""
        return KeyMap(prefix=self.payload_prefix, renames=self.keys)

    def api_key(self) -> str | None:
        """The Qdrant API key, from the environment or a file; never logged."""
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise ConfigError(
                    [("index.api_key_env", f"environment variable {self.api_key_env} is not set")]
                )
            return value
        if self.api_key_file:
            try:
                return Path(self.api_key_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    [("index.api_key_file", f"cannot read {self.api_key_file}: {exc.strerror}")]
                ) from None
        return None


class SourceSettings(_Section):
    """One system of record. ``type`` names an installed connector (``reconciler connectors``);
    connector-specific settings go in ``[sources.options]`` and are checked by the connector."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    type: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    path: str | None = None
    url: str | None = None
    trigger: Literal["polling", "webhook", "cdc"] = "polling"
    ttl: Duration | None = None
    #: ``serve`` watches this source (vault, git) and reconciles its changes in seconds;
    #: false leaves it to the scheduled jobs.
    watch: bool = True
    #: How often ``serve``'s watch polls this source (a git branch's tip: 2s unless set);
    #: a webhook (``[watch] webhooks``) makes it look sooner.
    poll_interval: Duration | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _needs(self) -> SourceSettings:
        if self.ttl is not None and self.trigger != "polling":
            raise ValueError("ttl applies to polling sources only")
        if self.poll_interval is not None and self.poll_interval <= timedelta(0):
            raise ValueError("poll_interval must be longer than 0s")
        return self

    @property
    def effective_ttl(self) -> timedelta | None:
        """The TTL in force: configured, else 24h for polling sources, else none."""
        if self.trigger != "polling":
            return None
        return self.ttl if self.ttl is not None else timedelta(hours=24)


class GuardSettings(_Section):
    """The blast-radius guard."""

    #: Of families or chunks a run may hide or change (every write but restores).
    max_changed_fraction: float = Field(default=0.2, gt=0, le=1)
    #: Of families or chunks a run may restore: quarantines lifted because their cause is gone
    #: (re-ingested, read again). 1: never refused; they never count against the other.
    max_restored_fraction: float = Field(default=1.0, gt=0, le=1)
    #: Runs changing at most this many families or chunks never trip the fraction rule (a
    #: five-note vault must be repairable). The empty-source rule has no floor.
    floor: int = Field(default=10, ge=0)
    #: In a split store (``index.archive_collection``), of families or chunks a run may move
    #: between the main collection and the archive (``reconciler split`` moves the first time).
    max_moved_fraction: float = Field(default=0.2, gt=0, le=1)


class PolicySettings(_Section):
    """Repair policies."""

    successor_not_ingested: Literal["supersede", "keep"] = "supersede"
    #: An ``unknown`` version beside a later started ``unknown`` sibling: superseded by it
    #: (the time rule), or only reported, for teams that move such versions out by hand.
    unknown_siblings: Literal["supersede", "report"] = "supersede"
    missing_in_source_grace: Duration = timedelta(days=7)
    #: A version the source declares in force while a successor it names is in force already:
    #: a warning (``family/status_contradicts_link``), or nothing, for vaults that leave a
    #: replaced note saying ``current`` (declared links win either way).
    status_contradicts_link: Literal["report", "ignore"] = "report"


def _cron(value: str) -> str:
    from reconciler.scheduling import cron_trigger  # noqa: PLC0415 (settings load first)

    try:
        cron_trigger(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"a 5-field cron expression such as '0 2 * * *' ({exc})") from None
    return value


Cron = Annotated[str, BeforeValidator(_cron)]


class ScheduleSettings(_Section):
    """Cron expressions (UTC) of the scheduled jobs. The defaults never fire in the same
    minute (the dates job on multiples of 5, the TTL job 2 minutes past, the full job at
    02:33); serve runs its jobs in one lane, so jobs that still meet wait for each other."""

    full: Cron = "33 2 * * *"
    ttl: Cron = "2-59/15 * * * *"
    dates: Cron = "*/5 * * * *"
    #: How long after its scheduled time the full job may take before ``serve``'s /healthz
    #: calls it overdue (503): raise it above your longest full run.
    full_grace: Duration = timedelta(hours=6)
    #: How long one job of ``serve`` may run: past it, the job is asked to stop at its next
    #: safe point (before a payload batch, between the bytes of a source's answer), recorded
    #: as failed, and the lane goes to the next job.
    job_deadline: Duration = timedelta(hours=1)
    #: How long ``serve`` takes at most to exit after SIGTERM (the running job is asked to
    #: stop at half of it and left at three quarters, wherever it is); and how long a job
    #: past its deadline has to reach its safe point before ``serve`` leaves it (in a store
    #: call it keeps its lease until the call ends). Below the shipped deployments' stop
    #: timeouts (15 min).
    stop_grace: Duration = timedelta(minutes=5)
    #: How long one source's read may take in a job of ``serve`` (the sources are read side
    #: by side); past it the source is unreadable this run (the run is ``partial``: its
    #: families stay as they are, and its TTL quarantines them in time) and the others are
    #: reconciled. Unset: half of ``job_deadline``.
    source_deadline: Duration | None = None

    @property
    def read_deadline(self) -> timedelta:
        """``source_deadline``, or half of ``job_deadline``."""
        return self.source_deadline or self.job_deadline / 2

    @model_validator(mode="after")
    def _bounded(self) -> ScheduleSettings:
        for name in ("full_grace", "job_deadline", "stop_grace", "source_deadline"):
            if (value := getattr(self, name)) is not None and value <= timedelta(0):
                raise ValueError(f"schedule.{name} must be longer than 0s")
        if self.job_deadline > self.full_grace:
            raise ValueError(
                f"schedule.job_deadline ({self.job_deadline}) is longer than "
                f"schedule.full_grace ({self.full_grace}): /healthz would call the full job "
                "overdue while it may still run; lower job_deadline or raise full_grace"
            )
        return self


class MetricsSettings(_Section):
    """Where metrics go."""

    listen: str = Field(default="127.0.0.1:9464", pattern=r"^[^:\s]*:\d{1,5}$")
    textfile: str = ""
    pushgateway: str = ""


class WatchSettings(_Section):
    """``serve``'s watch of its sources (vault, git: ``reconciler.app.watching``)."""

    #: How long the watch keeps the document table and the chunk index open after a run (a
    #: run that comes sooner reuses them: no reload of a local-mode collection or an Edge
    #: shard). Local mode and Edge lock their folder while open, so other processes
    #: (``reconciler status``, ``check``) cannot open the index that long after a change;
    #: 0 closes them after each run.
    keep_open: Duration = timedelta(0)
    #: ``POST /hooks/SOURCE`` on serve's HTTP port: a signed request (HMAC-SHA256 of the body
    #: with the secret, ``X-Hub-Signature-256: sha256=<hex>``) makes the watch look at that
    #: source now. Off by default; on, it needs the secret (an environment variable or a file).
    webhooks: bool = False
    webhook_secret_env: SecretVariable = None
    webhook_secret_file: str | None = None

    @model_validator(mode="after")
    def _bounded(self) -> WatchSettings:
        if self.keep_open < timedelta(0):
            raise ValueError("watch.keep_open must be 0s or longer")
        if self.webhook_secret_env and self.webhook_secret_file:
            raise ValueError("set at most one of watch.webhook_secret_env or webhook_secret_file")
        if self.webhooks and not (self.webhook_secret_env or self.webhook_secret_file):
            raise ValueError(
                "watch.webhooks needs a secret: set watch.webhook_secret_env (an environment "
                "variable's name) or watch.webhook_secret_file"
            )
        return self

    def webhook_secret(self) -> bytes:
        """The webhooks' HMAC secret, from the environment or a file; never logged."""
        where = (
            "watch.webhook_secret_env" if self.webhook_secret_env else "watch.webhook_secret_file"
        )
        try:
            if self.webhook_secret_env:
                value = os.environ.get(self.webhook_secret_env, "")
            else:
                value = Path(self.webhook_secret_file or "").read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                [(where, f"cannot read {self.webhook_secret_file}: {exc.strerror}")]
            ) from None
        if not value.strip():
            raise ConfigError([(where, "the webhook secret is empty or not set")])
        return value.strip().encode("utf-8")


class IngestSettings(_Section):
    """The reference ingestion (the reconciler itself never embeds)."""

    embedder: Literal["hashing", "sentence-transformers"] = "hashing"
    dim: int = Field(default=384, gt=0, le=65536)
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    max_chunk_chars: int = Field(default=1200, ge=200)


#: Payload layouts ``[bootstrap] preset`` names (``[index] layout``'s, "native" for "default"):
#: defaults for index.payload_prefix, index.text_key and the stored name of the document id
#: (``index.keys.doc_id``).
BOOTSTRAP_PRESETS: dict[str, dict[str, str]] = {
    "native": {},
    **{
        name: {"payload_prefix": each.prefix, "text_key": each.text_key, "doc_id": each.doc_id_key}
        for name, each in LAYOUTS.items()
        if name != "default"
    },
}


class BootstrapSettings(_Section):
    """Adopting an existing collection (``reconciler bootstrap``)."""

    #: The collection's payload layout; sets defaults for the index keys (explicit ones win).
    preset: Literal["native", "langchain", "llamaindex"] = "native"
    #: The stored name (under index.payload_prefix) of the document id; default per preset.
    doc_id_key: str | None = Field(default=None, pattern=r"^[^.\s][^.]*$")
    #: A dotted payload path (from the payload's root) holding the family id; else the
    #: payload's doc_family_id; else one family per document.
    family_key: str | None = Field(default=None, pattern=r"^[^.\s]+(\.[^.\s]+)*$")
    #: The source name adopted rows are registered under (their source_key is the doc id).
    source: str = Field(default="adopted", pattern=r"^[A-Za-z0-9_.-]+$")


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


class Settings(_Section):
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
