"""``serve``'s HTTP port: ``/metrics``, ``/healthz`` and ``POST /hooks/SOURCE``
(``http_app``), served by a thread a connection (``start_http``) that lets go of a client
which does not finish its request in time: its request line and headers within
``HTTP_TIMEOUT`` in all (however they trickle), each later read within ``HTTP_TIMEOUT``, a
hook's body within ``hooks.BODY_WITHIN``."""

from __future__ import annotations

import io
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.metrics import LiveMetrics

log = logging.getLogger("reconciler.app.daemon")

StartResponse = Callable[..., Any]

#: Seconds the HTTP port waits for a client's next bytes (its request line, headers, body)
#: before it lets go of the connection: one that never finishes its request held a thread
#: and a socket for ever, and enough of them left /healthz unanswered.
HTTP_TIMEOUT = 10.0


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (TimeoutError, ConnectionError)):
            # (a client that went quiet, or away: no traceback on stderr for it)
            log.debug("http: %s let go: %s", client_address[0], sys.exc_info()[1] or "timed out")
            return
        super().handle_error(request, client_address)


class _Reads(io.RawIOBase):
    """The connection's reads, each given what is left of ``deadline`` when one is set (the
    socket's timeout alone is per read: a request line sent a byte every few seconds held a
    thread for as long as its sender liked)."""

    def __init__(self, raw: Any, sock: socket.socket) -> None:
        super().__init__()
        self.raw, self.sock = raw, sock
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request line and headers did not come in time")
            self.sock.settimeout(min(left, HTTP_TIMEOUT))
        found: int | None = self.raw.readinto(buffer)
        return found

    def close(self) -> None:
        self.raw.close()
        super().close()


class _QuietHandler(WSGIRequestHandler):
    timeout = HTTP_TIMEOUT

    def setup(self) -> None:
        super().setup()
        self._reads = _Reads(self.rfile.detach(), self.connection)
        self.rfile = io.BufferedReader(self._reads)

    def handle(self) -> None:
        self._reads.deadline = time.monotonic() + HTTP_TIMEOUT  # (the request line, headers)
        super().handle()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self._reads.deadline = None  # (the rest: each read within the socket's timeout)
        self.connection.settimeout(HTTP_TIMEOUT)
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: " + format, *args)


def http_app(
    registry: CollectorRegistry,
    live: LiveMetrics,
    *,
    clock: Clock = SYSTEM_CLOCK,
    stalled: Callable[[], str | None] = lambda: None,
    hooks: Callable[..., Iterable[bytes]] | None = None,
) -> Callable[..., Iterable[bytes]]:
    """``/metrics`` (Prometheus exposition) and ``/healthz`` (200 or 503 with the reason; 503
    too when the full job is overdue, or while ``stalled`` says a store does not answer);
    ``/hooks/SOURCE`` when ``hooks`` is given (``reconciler.app.hooks``). All else is GET."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if hooks is not None and path.startswith("/hooks/"):
            return hooks(environ, start_response)
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b"GET only\n"]
        if path == "/healthz":
            healthy, problem = live.health(clock.now())
            if healthy and (hung := stalled()) is not None:
                healthy, problem = False, hung
            body = json.dumps({"healthy": healthy, "problem": problem}).encode()
            status = "200 OK" if healthy else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json")])
            return [body]
        if path in ("/metrics", "/"):
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics or /healthz\n"]

    return app


def start_http(listen: str, app: Callable[..., Iterable[bytes]]) -> WSGIServer:
    """Serve ``app`` on ``host:port`` in a daemon thread."""
    host, _, port = listen.rpartition(":")
    server = make_server(host or "127.0.0.1", int(port), app, _ThreadingServer, _QuietHandler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="http", daemon=True
    ).start()
    log.info("metrics on http://%s:%d/metrics", *server.server_address[:2])
    return server
