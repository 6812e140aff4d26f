"""A raw-socket HTTP/1.1 server on 127.0.0.1 that answers every request as told: at once, a
byte at a time (``trickle``), with a flood of bytes, or with its headers and then nothing
(``stall``: the first N requests). What the HTTP limit tests and serve's job deadline tests
read from; real sockets, real time."""

from __future__ import annotations

import socket
import threading


def answer(body: bytes) -> bytes:
    """A 200 answer with a JSON ``body`` (its length declared), as ``RawServer`` sends it."""
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def http_source(url: str, name: str = "reg") -> str:
    """The ``[[sources]]`` table of an HTTP registry at ``url`` whose own bounds are far off
    (no retry, a 30 s read timeout, an hour's deadline): only a job's bounds cut its read."""
    return "\n".join(
        [
            "[[sources]]",
            f'name = "{name}"',
            'type = "http"',
            f'url = "{url}"',
            "[sources.options]",
            "retries = 0",
            "read_timeout = 30",
            "deadline = 3600",
        ]
    )


class RawServer:
    """Answers every request with ``answer`` (headers, blank line, body), one thread each."""

    def __init__(
        self, answer: bytes, *, trickle: float = 0.0, flood: int = 0, stall: int = 0
    ) -> None:
        self.answer = answer
        self.trickle = trickle
        self.flood = flood
        self.stall = stall
        self.stop = threading.Event()
        #: Set once a request has been read (its answer is being sent).
        self.requested = threading.Event()
        self.requests = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/docs"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=[conn], daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                self.requests += 1
                stalled = self.requests <= self.stall
                self.requested.set()
                head, _, body = self.answer.partition(b"\r\n\r\n")
                conn.sendall(head + b"\r\n\r\n")
                if stalled:
                    self.stop.wait()
                elif self.trickle:
                    for byte in body:
                        if self.stop.wait(self.trickle):
                            return
                        conn.sendall(bytes([byte]))
                elif self.flood:
                    block = b"x" * 65536
                    for _ in range(self.flood // len(block)):
                        conn.sendall(block)
                else:
                    conn.sendall(body)
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.listener.close()
