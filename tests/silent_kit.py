"""Loopback TCP listeners that stand in for a store which stops answering: ``Silent`` accepts
every connection and never sends a byte (its kernel still acknowledges what it is sent), and
``Proxy`` forwards to a real server (PostgreSQL on 127.0.0.1:5432) until ``hang()``, after
which it forwards nothing either way on the connections it holds (not even their end: the
server keeps a session whose client has gone, as across a partition) and accepts new ones
into the same silence. Real sockets, real time; what the store-bound tests of serve read from."""

from __future__ import annotations

import contextlib
import socket
import threading


class _Listener:
    """A loopback listener whose accepted connections ``_accepted`` takes (held until
    ``close``)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port: int = self.listener.getsockname()[1]
        self.stop = threading.Event()
        #: Set once a connection has been accepted.
        self.accepted = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            self._held.append(conn)
            self.accepted.set()
            self._accepted(conn)

    def _accepted(self, conn: socket.socket) -> None:
        """Silence: the connection is held and never answered."""

    def close(self) -> None:
        self.stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # (wakes a thread blocked on it; sends the end)
            with contextlib.suppress(OSError):
                conn.close()
        self.listener.close()


class Silent(_Listener):
    """Accepts connections and never answers them (holds them open until ``close``)."""


class Proxy(_Listener):
    """Forwards 127.0.0.1:<port> to ``target`` until ``hang()``; then silent both ways."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.hung = threading.Event()
        super().__init__()

    def hang(self) -> None:
        """From now on nothing is forwarded, on open connections or new ones."""
        self.hung.set()

    def _accepted(self, conn: socket.socket) -> None:
        if self.hung.is_set():
            return  # accepted, never answered
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            conn.close()
            return
        upstream.settimeout(None)
        self._held.append(upstream)
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=self._pipe, args=[a, b], daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not self.stop.is_set():
                data = source.recv(65536)
                if self.hung.is_set():
                    self.stop.wait()  # swallowed (an end too): the other side waits for ever
                    return
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
