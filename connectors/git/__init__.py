"""The system of record for a docs-as-code git repository (docs/connectors/git.md).

``GitSource`` (``source.py``) reads the tracked branch's tip commit through its parts:
``command`` runs git safely, ``repository`` finds the git directory (a local repository, or a
clone URL's mirror) and the branch tip, ``tree`` picks the documents and their sidecars out of
the tip, ``history`` gives each its identity, ordinal and start from the branch's history, and
``options`` declares the ``[[sources]]`` entry.
"""

from connectors.git.options import (
    DEFAULT_GLOB,
    DEFAULT_TIMEOUT,
    EFFECTIVE_FROM,
    GitOptions,
    GitSettings,
)
from connectors.git.repository import default_cache_dir
from connectors.git.source import GitSource

__all__ = [
    "DEFAULT_GLOB",
    "DEFAULT_TIMEOUT",
    "EFFECTIVE_FROM",
    "GitOptions",
    "GitSettings",
    "GitSource",
    "default_cache_dir",
]
