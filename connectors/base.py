"""The contract every system-of-record connector honours, and its error types: defined in
``reconciler.ports.source`` (the engine's ports), re-exported here for connectors."""

from reconciler.ports.source import (
    ConnectorConfigError,
    ConnectorError,
    DocumentUnreadable,
    SourceUnavailable,
    SystemOfRecord,
)

__all__ = [
    "ConnectorConfigError",
    "ConnectorError",
    "DocumentUnreadable",
    "SourceUnavailable",
    "SystemOfRecord",
]
