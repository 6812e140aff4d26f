"""Configuration: one TOML file, overridden by ``RECONCILER_...`` environment variables.

A bad configuration is refused before anything runs, with one ``ConfigError`` that lists every
problem by key path. Relative paths resolve against the config file's folder. Secrets are read
only from environment variables or files named in the config, and are never logged.
"""

from reconciler.settings.loading import load_settings
from reconciler.settings.sections import (
    DEFAULT_CONFIG_NAME,
    ENV_PREFIX,
    ENV_RESERVED,
    BootstrapSettings,
    Cron,
    Duration,
    GuardSettings,
    IndexSettings,
    IngestSettings,
    MetricsSettings,
    PolicySettings,
    ScheduleSettings,
    SecretVariable,
    Settings,
    SourceSettings,
    StoreBounds,
    TableSettings,
    WatchSettings,
    parse_duration,
)

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
