"""A server on HTTP/1.1 for a client's connection pool: it keeps its connections open, or
(`hang_up`) closes each once it has answered without saying so, as a server's idle timeout
does. A pool must reuse the first kind and never fail a call on the second."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

from tests.helpers.http import LOOPBACK, LoopbackServer

T = TypeVar("T")


class KeepAliveServer(LoopbackServer):
    """Answers every GET and POST with the JSON `body` (over TLS with `tls`), noting the client
    port of each."""

    def __init__(
        self, body: bytes, *, hang_up: bool = False, tls: ssl.SSLContext | None = None
    ) -> None:
        self.ports: list[int] = []
        self.hang_up = hang_up
        self.hung_up = threading.Event()  # set each time it has closed a connection
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                fake.ports.append(self.client_address[1])
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if hang_up:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    fake.hung_up.set()

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        server.daemon_threads = True  # close() won't wait for a connection a client kept
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
        self._serve(server)

    def repeat(self, call: Callable[[], T], times: int) -> list[T]:
        """`call()`'s results, `times` times; when the server hangs up, each call comes once
        it has closed the last connection (so a pool's look at an idle one is what's tested)."""
        results = []
        for _ in range(times):
            results.append(call())
            if self.hang_up:
                assert self.hung_up.wait(5), "the server never hung up"
                self.hung_up.clear()
        return results

    @property
    def connections(self) -> int:
        return len(set(self.ports))
