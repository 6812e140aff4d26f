"""Builds system-of-record connectors from settings, through the ``reconciler.connectors``
entry points (so third parties can add their own)."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from connectors.base import ConnectorConfigError, SystemOfRecord
from reconciler.settings import SourceSettings

ENTRY_POINT_GROUP = "reconciler.connectors"
#: Built-in connectors, used when the distribution's entry points are not installed
#: (running from a source checkout).
BUILTIN = {"vault": "connectors.vault:VaultSource"}


def available_connectors() -> dict[str, str]:
    """Connector type -> ``module:attr`` of every installed connector."""
    found = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value
    return found


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def build_source(settings: SourceSettings) -> SystemOfRecord:
    """Instantiate the connector a source's settings name."""
    target = available_connectors().get(settings.type)
    if target is None:
        raise ConnectorConfigError(
            f"source {settings.name!r}: no connector of type {settings.type!r} is installed "
            f"(installed: {', '.join(sorted(available_connectors()))})"
        )
    factory = _load(target)
    if hasattr(factory, "from_settings"):
        source: SystemOfRecord = factory.from_settings(settings)
    else:
        source = factory(name=settings.name, path=settings.path)
    return source
