"""qdrant-client's failures said as the port's errors, once, at this edge.

A failure of the store (a server's answer, the transport, local mode's plain built-ins) is
``IndexUnavailable`` on a read (retry later) and ``IndexWriteError`` with ``points_written``
on a write (stop the run); a bug of ours passes through unmapped. Each message says what went
wrong and what to do (``describe``), and never echoes credentials. ``reconciler.stores.qdrant.index``
wraps every client call in ``reading`` or ``writing``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc  # type: ignore[import-untyped]
from qdrant_client.common.client_exceptions import QdrantException, ResourceExhaustedResponse
from qdrant_client.http.exceptions import (
    ApiException,
    ResponseHandlingException,
    UnexpectedResponse,
)

from reconciler.errors import IndexUnavailable, IndexWriteError

__all__ = [
    "close_half_open",
    "describe",
    "is_store_failure",
    "reading",
    "redacted_url",
    "writing",
]

_REMOTE_ERRORS: tuple[type[BaseException], ...] = (
    ApiException,
    QdrantException,
    ConnectionError,
    TimeoutError,
    grpc.RpcError,
)


@contextmanager
def reading(collection: str, where: str, action: str) -> Iterator[None]:
    """Map a client failure to ``IndexUnavailable`` (retry later); bugs pass through."""
    try:
        yield
    except Exception as exc:
        if not is_store_failure(exc, writing=False):
            raise
        raise IndexUnavailable(
            f"{action} on Qdrant collection {collection!r} ({where}) failed: {describe(exc)}"
        ) from exc


@contextmanager
def writing(where: str, what: str, *, written: int) -> Iterator[None]:
    """Map a client failure to ``IndexWriteError`` saying how far the writes got."""
    try:
        yield
    except Exception as exc:
        if not is_store_failure(exc, writing=True):
            raise
        raise IndexWriteError(
            f"{what} ({where}) failed: {describe(exc)}", points_written=written
        ) from exc


def describe(exc: BaseException) -> str:
    """Say what went wrong and what to do, never echoing credentials."""
    if isinstance(exc, UnexpectedResponse):
        status = exc.status_code
        detail = _server_error(exc)
        if status in (401, 403):
            return (
                f"HTTP {status}, the server refused the credentials: check the API key "
                "(the environment variable index.api_key_env names)"
            )
        if status == 404:
            return (
                f"HTTP 404 ({detail}): check index.collection, or run ingestion first; "
                "a missing point was deleted after the scan (the next run skips it)"
            )
        return f"HTTP {status} ({detail}); retry later, or check the server's log"
    if isinstance(exc, ResourceExhaustedResponse):
        return f"the server is rate limiting (retry after {exc.retry_after_s}s)"
    if isinstance(exc, ResponseHandlingException):
        source = exc.source
        return (
            f"could not talk to Qdrant ({type(source).__name__}: {source}); check "
            "index.url and that the server is up, then retry"
        )
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if hasattr(exc, "code") else "?"
        return f"gRPC error {code}; check index.url and that the server is up, then retry"
    if isinstance(exc, KeyError):
        return (
            f"point {exc.args[0] if exc.args else '?'!s} does not exist (deleted after the "
            "scan?); the next run skips it"
        )
    if isinstance(exc, ValueError):
        return f"{exc}: check index.collection, or run ingestion first"
    if isinstance(exc, RuntimeError):
        return f"{exc}: open a new client with connect()"
    return f"{type(exc).__name__}: {exc}; retry later"


def is_store_failure(exc: BaseException, *, writing: bool) -> bool:
    """Whether ``exc`` is the store failing (mapped) rather than a bug here (re-raised)."""
    if isinstance(exc, _REMOTE_ERRORS):
        return True
    text = str(exc)
    # Local mode raises plain built-ins: a missing collection, a closed client, and (on a
    # write) the first missing point id after applying the rest of the call, as the server does.
    if isinstance(exc, ValueError):
        return "not found" in text
    if isinstance(exc, RuntimeError):
        return "closed" in text or "already accessed" in text
    return writing and isinstance(exc, KeyError)


def _server_error(exc: UnexpectedResponse) -> str:
    try:
        message = exc.structured()["status"]["error"]
    except Exception:
        message = exc.reason_phrase
    return str(message)[:200]


def close_half_open(exc: BaseException) -> None:
    """Close the lock file a refused local client leaves open (it would leak to the GC)."""
    tb = exc.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        lock_file = getattr(candidate, "_flock_file", None)
        if lock_file is not None and not lock_file.closed:
            lock_file.close()
        tb = tb.tb_next


def redacted_url(options: Mapping[str, Any]) -> str:
    """The server address for messages, without any user info it may carry."""
    url = options.get("url") or options.get("location") or options.get("host") or "?"
    parts = urlsplit(str(url))
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)
