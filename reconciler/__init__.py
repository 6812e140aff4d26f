"""corpus-reconciler: keeps the version state of a RAG corpus true.

Retrieval and ingestion code import two functions from here::

    from reconciler import payload_for, default_filter

(``default_edge_filter`` is ``default_filter`` for Qdrant Edge shards.)
"""

from importlib.metadata import PackageNotFoundError, version

from reconciler.filters import default_edge_filter, default_filter
from reconciler.model import (
    OPEN_END,
    OPEN_START,
    Document,
    SourceDocument,
    VersionState,
)
from reconciler.payload import KeyMap, chunk_payload, payload_for

try:
    __version__ = version("corpus-reconciler")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
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
