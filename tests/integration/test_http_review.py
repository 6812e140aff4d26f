"""``serve``'s HTTP port (``/metrics``, ``/healthz``, ``POST /hooks/SOURCE``) under a client
that opens a request and never finishes it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry

from reconciler.app.hooks import Hooks
from reconciler.app.http_port import HTTP_TIMEOUT, start_http


@contextlib.contextmanager
def hooks_port() -> Iterator[int]:
    """serve's port with the hooks of one watched source, ``gh``: its number."""
    hooks = Hooks(b"secret", lambda source: True, registry=CollectorRegistry(), sources=["gh"])
    server = start_http("127.0.0.1:0", hooks)
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_whose_body_never_comes_is_let_go(tmp_path: object) -> None:
    """A caller (anyone who can reach the port: the hook is signed, but the body is read
    before its signature is checked) announces a body and never sends it, or sends nothing:
    each such connection held a thread and a socket for ever, until threads or file
    descriptors ran out and /healthz no longer answered. The server lets go of it."""
    with hooks_port() as port:
        before = threading.active_count()
        held = []
        try:
            for n in range(20):
                conn = socket.create_connection(("127.0.0.1", port))
                if n % 2:
                    conn.sendall(
                        b"POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
                    )
                held.append(conn)
            time.sleep(0.5)
            assert threading.active_count() >= before + 20  # (one thread a connection)
            deadline = time.monotonic() + HTTP_TIMEOUT + 5
            for conn in held:
                conn.settimeout(max(deadline - time.monotonic(), 0.1))
                with contextlib.suppress(ConnectionResetError):
                    conn.recv(1024)  # b"" (closed) or an error answer, not a wait for ever
            time.sleep(0.5)
            assert threading.active_count() <= before + 1
        finally:
            for conn in held:
                conn.close()


def test_a_body_that_trickles_is_let_go_after_its_deadline(monkeypatch: object) -> None:
    """A caller that sends its announced body a byte at a time, each byte inside the port's
    per-read timeout: the body read waited for as long as the sender liked, holding a thread.
    The whole body has ``BODY_WITHIN`` seconds; then the request is answered 408 and let go."""
    import reconciler.app.hooks as hooks_module  # noqa: PLC0415

    monkeypatch.setattr(hooks_module, "BODY_WITHIN", 1.0)  # type: ignore[attr-defined]
    with hooks_port() as port, socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(b"POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        started = time.monotonic()
        answer = b""
        conn.settimeout(0.3)
        while time.monotonic() - started < 8:  # (a byte every 0.3 s: each read in time)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.sendall(b"x")
            try:
                answer = conn.recv(1024)
            except TimeoutError:
                continue
            break
        assert answer.startswith((b"HTTP/1.0 408", b"HTTP/1.1 408")), answer
        assert time.monotonic() - started < 4


def test_a_request_line_that_trickles_is_let_go_after_its_deadline(monkeypatch: object) -> None:
    """A caller that sends its request line a byte at a time, each byte inside the port's
    per-read timeout: the line (then the headers) was read for as long as the sender liked,
    holding a thread. The request line and headers have ``HTTP_TIMEOUT`` in all; then the
    connection is let go, and the port still answers another."""
    import reconciler.app.http_port as port_module  # noqa: PLC0415

    monkeypatch.setattr(port_module, "HTTP_TIMEOUT", 1.0)  # type: ignore[attr-defined]
    with hooks_port() as port:
        with socket.create_connection(("127.0.0.1", port)) as conn:
            started = time.monotonic()
            closed = False
            conn.settimeout(0.3)
            for byte in b"POST /hooks/gh HTTP/1.1\r\nHost: x\r\n" * 20:  # (0.3 s a byte)
                if closed or time.monotonic() - started > 8:
                    break
                try:
                    conn.sendall(bytes([byte]))
                    closed = conn.recv(1024) == b""
                except TimeoutError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
            assert closed
            assert time.monotonic() - started < 4
        with socket.create_connection(("127.0.0.1", port), timeout=5) as other:
            other.sendall(b"GET /hooks/gh HTTP/1.1\r\nHost: x\r\n\r\n")
            assert other.recv(1024).startswith((b"HTTP/1.0 405", b"HTTP/1.1 405"))
