"""corpus-reconciler: keeps the version state of a RAG corpus true.

Retrieval and ingestion code import two functions from here::

    from reconciler import payload_for, default_filter
"""

from reconciler.filters import default_filter
from reconciler.model import (
    OPEN_END,
    OPEN_START,
    Document,
    SourceDocument,
    VersionState,
)
from reconciler.payload import KeyMap, chunk_payload, payload_for

__version__ = "0.1.0"

__all__ = [
    "OPEN_END",
    "OPEN_START",
    "Document",
    "KeyMap",
    "SourceDocument",
    "VersionState",
    "__version__",
    "chunk_payload",
    "default_filter",
    "payload_for",
]
