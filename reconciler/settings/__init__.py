"""Configuration: one TOML file, overridden by ``RECONCILER_...`` environment variables; one
module a section (``table``, ``index``, ``sources``, ...), the whole in ``configuration``.

A bad configuration is refused before anything runs, with one ``ConfigError`` that lists every
problem by key path. Relative paths resolve against the config file's folder. Secrets are read
only from environment variables or files named in the config, and are never logged.
"""

from reconciler.settings.bootstrap import BootstrapSettings
from reconciler.settings.configuration import Settings, StoreBounds
from reconciler.settings.guard import GuardSettings
from reconciler.settings.index import IndexSettings
from reconciler.settings.ingest import IngestSettings
from reconciler.settings.loading import load_settings
from reconciler.settings.metrics import MetricsSettings
from reconciler.settings.policy import PolicySettings
from reconciler.settings.schedule import Cron, ScheduleSettings
from reconciler.settings.shared import (
    DEFAULT_CONFIG_NAME,
    ENV_PREFIX,
    ENV_RESERVED,
    Duration,
    SecretVariable,
    parse_duration,
)
from reconciler.settings.sources import SourceSettings
from reconciler.settings.table import TableSettings
from reconciler.settings.watch import WatchSettings

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "ENV_PREFIX",
    "ENV_RESERVED",
    "BootstrapSettings",
    "Cron",
    "Duration",
    "GuardSettings",
    "IndexSettings",
    "IngestSettings",
    "MetricsSettings",
    "PolicySettings",
    "ScheduleSettings",
    "SecretVariable",
    "Settings",
    "SourceSettings",
    "StoreBounds",
    "TableSettings",
    "WatchSettings",
    "load_settings",
    "parse_duration",
]
