"""Loopback HTTP for tests: a free port, and the one threaded server every fake is built on.

Each fake server (a webhook, a model server, a Controls hook, a web page) used to build its
`ThreadingHTTPServer` and serving thread by hand, and not all of them closed their listening
socket. `LoopbackServer` does it once: bound on 127.0.0.1 to a port the kernel picks, served
from a daemon thread, and closed with shutdown + server_close, so no socket outlives its test
(with warnings as errors, an unclosed one fails the test that leaked it).
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from types import TracebackType
from typing import Self

LOOPBACK = "127.0.0.1"

# How often serve_forever looks for a shutdown request: close() waits up to this long, and
# test files open dozens of servers, so a short poll keeps them fast (0.5 s is the default).
POLL_INTERVAL = 0.02


def free_port() -> int:
    """A loopback port nothing listens on right now (for a process the test starts, or to
    have a connection refused)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


class LoopbackServer:
    """An HTTP server on a free loopback port that serves `handler` in a daemon thread until
    `close()` (or the end of a `with` block).

    `daemon_threads=True` lets close() return while a request is still being answered (a fake
    that holds a connection open); with False, close() waits for every request to finish.
    """

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], *, daemon_threads: bool = False
    ) -> None:
        server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        server.daemon_threads = daemon_threads
        self._serve(server)

    @classmethod
    def serving(cls, server: HTTPServer) -> LoopbackServer:
        """Serve a server some other code has already bound (e.g. the example agent's)."""
        running = cls.__new__(cls)
        running._serve(server)
        return running

    def _serve(self, server: HTTPServer) -> None:
        self.server = server
        self.port: int = server.server_port
        self.origin = f"http://{LOOPBACK}:{self.port}"
        self.url = self.origin  # a fake may point it at a path of its own
        self._closed = False
        self._thread = threading.Thread(
            target=server.serve_forever,
            args=(POLL_INTERVAL,),
            daemon=True,
            name=f"{type(self).__name__}:{self.port}",
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and close the listening socket; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
