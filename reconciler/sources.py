"""Builds system-of-record connectors from settings: the built-in ones (``BUILTIN``) and those
other distributions add through the ``reconciler.connectors`` entry points.

A connector class offers ``from_settings(settings) -> SystemOfRecord`` and, optionally,
``config_problems(settings) -> list[(key, message)]`` so a bad source is refused at load time
together with every other configuration problem.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any, Protocol

from reconciler.ports.source import ConnectorConfigError, SystemOfRecord

ENTRY_POINT_GROUP = "reconciler.connectors"
#: The built-in connectors, listed here only: the distribution declares no entry point for
#: them, so a source checkout on ``PYTHONPATH`` finds the same ones as an installed package.
BUILTIN = {
    "vault": "connectors.vault:VaultSource",
    "git": "connectors.git:GitSource",
    "confluence": "connectors.confluence:ConfluenceSource",
    "http": "connectors.http:HttpRegistrySource",
    "sql": "connectors.sql:SqlTableSource",
}


def installed() -> dict[str, str]:
    """Connector type -> ``module:attr`` of every installed connector (an entry point of the
    same name as a built-in one takes its place)."""
    found = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value
    return found


def connector_class(kind: str) -> Any:
    """The connector class registered as ``kind``; LookupError when none is."""
    target = installed().get(kind)
    if target is None:
        raise LookupError(kind)
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


class SourceConfig(Protocol):
    """What building a source reads of its settings (``reconciler.settings.SourceSettings``,
    which passes the whole of itself on to the connector's ``from_settings``)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def path(self) -> str | None: ...


def build_source(settings: SourceConfig) -> SystemOfRecord:
    """Instantiate the connector a source's settings name."""
    try:
        factory = connector_class(settings.type)
    except LookupError:
        raise ConnectorConfigError(
            f"source {settings.name!r}: no connector of type {settings.type!r} is installed "
            f"(installed: {', '.join(sorted(installed()))})"
        ) from None
    if hasattr(factory, "from_settings"):
        source: SystemOfRecord = factory.from_settings(settings)
    else:
        source = factory(name=settings.name, path=settings.path)
    return source


def describe() -> list[dict[str, str]]:
    """What ``reconciler connectors`` lists."""
    rows = []
    for kind, target in sorted(installed().items()):
        try:
            factory = connector_class(kind)
            doc = (factory.__doc__ or "").strip().splitlines()[0] if factory.__doc__ else ""
            status = "ok"
        except Exception as exc:  # a broken third-party plug-in must not hide the others
            doc, status = "", f"cannot load: {exc}"
        rows.append({"type": kind, "target": target, "status": status, "summary": doc})
    return rows
