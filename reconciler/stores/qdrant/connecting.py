"""Opening qdrant-client: local mode on a folder (``path=``) or a Qdrant server (``url=``),
the failure to open said as the port's ``IndexUnavailable`` (``reconciler.stores.qdrant.index``
re-exports ``connect``)."""

from __future__ import annotations

import logging
import math
import warnings

from qdrant_client import QdrantClient

from reconciler.errors import IndexUnavailable
from reconciler.stores.qdrant.errors import close_half_open

log = logging.getLogger(__name__)

__all__ = ["connect"]


def connect(
    *,
    path: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
) -> QdrantClient:
    """Open a client: local mode on ``path``, or a Qdrant server at ``url`` (exactly one)."""
    if (path is None) == (url is None):
        raise ValueError("connect() takes exactly one of path= (local mode) or url= (a server)")
    if path is not None:
        if api_key:
            log.debug("api key ignored: local mode at %s needs none", path)
        try:
            return QdrantClient(path=path)
        except RuntimeError as exc:
            if "already accessed" not in str(exc):
                raise
            close_half_open(exc)
            raise IndexUnavailable(
                f"the local Qdrant storage at {path} is open in another process (another "
                "reconciler or ingestion run?); local mode allows one client at a time: stop "
                "the other process and retry, or use a Qdrant server (index.url)"
            ) from exc
        except OSError as exc:
            raise IndexUnavailable(
                f"cannot open the local Qdrant storage at {path}: {exc.strerror or exc}; "
                "check index.path and its permissions"
            ) from exc
    assert url is not None
    if api_key and url.startswith("http://"):
        # qdrant-client warns through `warnings`; say it once, in our log, without the key.
        log.warning("index.url %s is plain http: the API key travels unencrypted", url)
    # The compatibility check runs in a background thread and only warns; the first call
    # reports an unreachable server through IndexUnavailable instead.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Api key is used with an insecure connection")
        return QdrantClient(
            url=url,
            api_key=api_key,
            timeout=max(1, math.ceil(timeout)),
            check_compatibility=False,
        )
