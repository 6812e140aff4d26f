"""``POST /hooks/SOURCE`` on ``serve``'s HTTP port (``[watch] webhooks``, off by default): a
system of record that can call out (a git host's push hook, a CMS's publish hook) makes the
watch look at that source now instead of at its next poll.

A request is taken on its signature alone, never on its address: the HMAC-SHA256 of the raw
body with the secret (``[watch] webhook_secret_env`` or ``webhook_secret_file``), sent as
``X-Hub-Signature-256: sha256=<hex>`` (the form GitHub, Gitea and Forgejo send). A missing
or wrong signature is 401 and nothing is done; a signed request for a source the watch does
not follow is 404; a taken one is 202 (the watch polls, or rescans the vault, at its next
tick; what it finds is reconciled as any change is). The body is not read for what changed:
a hook only says "look now", so a replayed request costs one poll and changes nothing.

Every request is counted in ``reconciler_webhook_requests_total{source,outcome}``
(``accepted``, ``unauthorized``, ``unknown_source``, ``bad_request``, ``method_not_allowed``;
``source`` is the one named in the path when it is a watched source, else ``other``: an
unsigned caller cannot grow the label set)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger(__name__)

#: Where the hooks are.
PREFIX = "/hooks/"
#: The signature header, as WSGI names it.
SIGNATURE = "HTTP_X_HUB_SIGNATURE_256"
#: The largest body read (a push event of a big merge is well under it).
MAX_BODY = 1 << 20
#: Seconds a request's whole body may take to come (the port's timeout is per read: a body
#: sent a byte every few seconds held a thread for as long as its sender liked).
BODY_WITHIN = 10.0
#: Bytes read at most a read while a body comes.
_PIECE = 1 << 16

StartResponse = Callable[..., Any]

#: The ``source`` label of a request whose path names no watched source.
OTHER = "other"


def signature(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value of ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class Hooks:
    """The WSGI app of ``/hooks/SOURCE``; ``nudge(source)`` (the watch's) says whether the
    source is watched, and makes the watch look at it now."""

    def __init__(
        self,
        secret: bytes,
        nudge: Callable[[str], bool] | None = None,
        *,
        registry: CollectorRegistry | None = None,
        sources: Iterable[str] = (),
    ) -> None:
        self._secret = secret
        self.nudge = nudge
        #: The sources a request may be counted under (the watched ones); any other: ``other``.
        self.sources = frozenset(sources)
        self.requests = Counter(
            "reconciler_webhook_requests_total",
            "Requests to POST /hooks/SOURCE, by source (other: not a watched one) and outcome "
            "(accepted, unauthorized, unknown_source, bad_request, method_not_allowed).",
            labelnames=["source", "outcome"],
            registry=registry,
        )
        for name in self.sources:  # (each watched source's series exists from the start)
            for outcome in ("accepted", "unauthorized"):
                self.requests.labels(source=name, outcome=outcome)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        source = str(environ.get("PATH_INFO", ""))[len(PREFIX) :]
        if environ.get("REQUEST_METHOD") != "POST":
            self._count(source, "method_not_allowed")
            return _answer(start_response, "405 Method Not Allowed", "POST only\n", allow="POST")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            self._count(source, "bad_request")
            return _answer(start_response, "400 Bad Request", "bad Content-Length\n")
        if length < 0 or length > MAX_BODY:
            self._count(source, "bad_request")
            return _answer(start_response, "413 Content Too Large", f"at most {MAX_BODY} bytes\n")
        try:
            body = _body(environ["wsgi.input"], length, BODY_WITHIN) if length else b""
        except OSError:  # (TimeoutError: the body did not come within the port's timeout)
            self._count(source, "bad_request")
            return _answer(start_response, "408 Request Timeout", "the body did not come\n")
        given = str(environ.get(SIGNATURE, ""))
        if not hmac.compare_digest(given.encode(), signature(self._secret, body).encode()):
            log.warning(
                "webhook %s refused: %s signature (from %s)",
                environ.get("PATH_INFO"),
                "a wrong" if given else "no",
                environ.get("REMOTE_ADDR", "?"),
            )
            self._count(source, "unauthorized")
            return _answer(start_response, "401 Unauthorized", "bad or missing signature\n")
        if self.nudge is None or not self.nudge(source):
            self._count(source, "unknown_source")
            return _answer(start_response, "404 Not Found", f"no watched source {source!r}\n")
        self._count(source, "accepted")
        log.info("webhook: looking at %s now", source)
        return _answer(start_response, "202 Accepted", f"looking at {source} now\n")

    def _count(self, source: str, outcome: str) -> None:
        label = source if source in self.sources else OTHER
        self.requests.labels(source=label, outcome=outcome).inc()


def _body(stream: Any, length: int, within: float) -> bytes:
    """``length`` bytes of ``stream``, each read taking what has come (``read1``);
    ``TimeoutError`` once ``within`` seconds have passed before the last one came, and when
    the sender closes first (``ConnectionError``)."""
    read = getattr(stream, "read1", stream.read)
    ends = time.monotonic() + within
    parts: list[bytes] = []
    left = length
    while left > 0:
        if time.monotonic() > ends:
            raise TimeoutError(f"the body did not come within {within:g} s")
        piece = read(min(left, _PIECE))
        if not piece:
            raise ConnectionError("the sender closed before its body came")
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


def _answer(
    start_response: StartResponse, status: str, text: str, allow: str | None = None
) -> list[bytes]:
    headers = [("Content-Type", "text/plain")]
    if allow:
        headers.append(("Allow", allow))
    start_response(status, headers)
    return [text.encode("utf-8")]
