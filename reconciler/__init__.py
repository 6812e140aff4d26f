"""corpus-reconciler: keeps the version state of a RAG corpus true.

Retrieval and ingestion code import two functions from here::

    from reconciler import payload_for, default_filter

(``default_edge_filter`` is ``default_filter`` for Qdrant Edge shards.) LangChain and LlamaIndex
code takes a retriever that builds the filter per query instead:
``reconciler.integrations.langchain`` and ``reconciler.integrations.llamaindex`` (extras of the
same names; not imported from here).
"""

from typing import TYPE_CHECKING, Any

from reconciler.model import (
    OPEN_END,
    OPEN_START,
    Document,
    SourceDocument,
    VersionState,
)
from reconciler.payload import KeyMap, chunk_payload, payload_for

if TYPE_CHECKING:
    from reconciler.filters import default_edge_filter, default_filter

__version__: str


def __getattr__(name: str) -> Any:
    """``default_filter`` and ``default_edge_filter`` (whose calls import qdrant_client, and
    qdrant_edge and numpy) and ``__version__`` (which reads the installed metadata) load on
    first use, so ``import reconciler`` stays cheap: every CLI command and every connector
    imports this package."""
    if name in ("default_filter", "default_edge_filter"):
        from reconciler import filters  # noqa: PLC0415

        return getattr(filters, name)
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            found = version("corpus-reconciler")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module 'reconciler' has no attribute {name!r}")


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
