"""``POST /hooks/SOURCE`` on ``serve``'s HTTP port (``[watch] webhooks``, off by default): a
system of record that can call out (a git host's push hook, a CMS's publish hook) makes the
watch look at that source now instead of at its next poll.

A request is taken on its signature alone, never on its address: the HMAC-SHA256 of the raw
body with the secret (``[watch] webhook_secret_env`` or ``webhook_secret_file``), sent as
``X-Hub-Signature-256: sha256=<hex>`` (the form GitHub, Gitea and Forgejo send). A missing
or wrong signature is 401 and nothing is done; a signed request for a source the watch does
not follow is 404; a taken one is 202 (the watch polls, or rescans the vault, at its next
tick; what it finds is reconciled as any change is). The body is not read for what changed:
a hook only says "look now", so a replayed request costs one poll and changes nothing."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)

#: Where the hooks are.
PREFIX = "/hooks/"
#: The signature header, as WSGI names it.
SIGNATURE = "HTTP_X_HUB_SIGNATURE_256"
#: The largest body read (a push event of a big merge is well under it).
MAX_BODY = 1 << 20

StartResponse = Callable[..., Any]


def signature(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value of ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class Hooks:
    """The WSGI app of ``/hooks/SOURCE``; ``nudge(source)`` (the watch's) says whether the
    source is watched, and makes the watch look at it now."""

    def __init__(self, secret: bytes, nudge: Callable[[str], bool] | None = None) -> None:
        self._secret = secret
        self.nudge = nudge

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, "405 Method Not Allowed", "POST only\n", allow="POST")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _answer(start_response, "400 Bad Request", "bad Content-Length\n")
        if length < 0 or length > MAX_BODY:
            return _answer(start_response, "413 Content Too Large", f"at most {MAX_BODY} bytes\n")
        body = environ["wsgi.input"].read(length) if length else b""
        given = str(environ.get(SIGNATURE, ""))
        if not hmac.compare_digest(given.encode(), signature(self._secret, body).encode()):
            log.warning(
                "webhook %s refused: %s signature (from %s)",
                environ.get("PATH_INFO"),
                "a wrong" if given else "no",
                environ.get("REMOTE_ADDR", "?"),
            )
            return _answer(start_response, "401 Unauthorized", "bad or missing signature\n")
        source = str(environ.get("PATH_INFO", ""))[len(PREFIX) :]
        if self.nudge is None or not self.nudge(source):
            return _answer(start_response, "404 Not Found", f"no watched source {source!r}\n")
        log.info("webhook: looking at %s now", source)
        return _answer(start_response, "202 Accepted", f"looking at {source} now\n")


def _answer(
    start_response: StartResponse, status: str, text: str, allow: str | None = None
) -> list[bytes]:
    headers = [("Content-Type", "text/plain")]
    if allow:
        headers.append(("Allow", allow))
    start_response(status, headers)
    return [text.encode("utf-8")]
