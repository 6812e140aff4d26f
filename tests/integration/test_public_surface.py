"""What users bind to, pinned: a change to the public surface is a deliberate change here."""

from __future__ import annotations

from importlib.metadata import version

import reconciler

#: ``from reconciler import ...``: the names retrieval and ingestion code may rely on.
PUBLIC = [
    "OPEN_END",
    "OPEN_START",
    "Document",
    "KeyMap",
    "SourceDocument",
    "VersionState",
    "__version__",
    "chunk_payload",
    "default_edge_filter",
    "default_filter",
    "payload_for",
]


def test_the_public_names_are_exactly_the_declared_ones() -> None:
    assert reconciler.__all__ == PUBLIC
    for name in PUBLIC:
        assert hasattr(reconciler, name), name


def test_the_version_is_the_installed_package_s() -> None:
    assert reconciler.__version__ == version("corpus-reconciler")
