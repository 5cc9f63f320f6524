"""The gateway's HTTP on the wire: uvicorn's httptools protocol with the deadlines and caps a
server on the open network needs, and a transport that sends each answer in one write."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_TIMEOUT = 10.0  # seconds for a request's head: from the connection, or its first byte
BODY_IDLE = 60.0  # seconds a request body may send nothing while the gateway reads it
MAX_HEAD = 16 * 1024  # bytes of a request head that may come in unfinished; past them, 400
HOLD_MAX = 64 * 1024  # bytes a step's writes may hold before they go out anyway

Reading = Literal["head", "body", "done"]


class CoalescingTransport(asyncio.Transport):
    """A connection's transport that sends what one event-loop step wrote as one write.

    uvicorn writes a response's status line and headers, then its body: two sends, two TCP
    segments and two wake-ups of the client for every answer. Held until the step ends, they
    leave together; a streamed response's head still leaves at once (its step ends without a
    body), and past HOLD_MAX bytes a write goes out without waiting, so the transport's own
    buffer still pushes back on a writer that never yields."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0
        self._flushing: asyncio.Handle | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        self._held.append(bytes(data))
        self._size += len(data)
        if self._size >= HOLD_MAX:
            self.flush()
        elif self._flushing is None:
            self._flushing = self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what is held now."""
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        held, self._held, self._size = self._held, [], 0
        if held and not self.transport.is_closing():  # else the peer is gone: nobody to read
            self.transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self._held, self._size = [], 0
        self.flush()
        self.transport.abort()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + self._size


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol on httptools (llhttp, in C: half of h11's cost per
    request), with the deadlines and the head limit it lacks.

    uvicorn 0.55 arms no timer before its first response, and cancels its keep-alive timer at
    the first byte of the next request; nothing limits how long a head or a body may take, nor
    how large a head may grow. So a client that sent half a request line and then nothing, or
    its headers a byte at a time, or stopped halfway through a body, held its connection for
    good. Here a head must be complete within HEADER_TIMEOUT of the connection (or of its
    first byte, on a kept-alive connection), and is a 400 once MAX_HEAD bytes of it came in
    unfinished; a body is cut off once a whole BODY_IDLE passes without a byte while the
    gateway reads it (not while it holds the body back): after BODY_IDLE to twice that, as it
    is looked at every BODY_IDLE. That covers a body nobody reads, too (a 413 leaves it to
    come in). A cut-off connection is just closed.
    """

    _timer: asyncio.TimerHandle | None = None
    _reading: Reading = "head"  # what of the client's request the gateway waits for
    _head_since: float | None = None  # when the head being read began, if one is
    _head_size = 0  # bytes come in while that head is unfinished
    _heard = False  # a byte came in since the last look at a body
    _upgraded = False  # a websocket took the connection over: its own protocol watches it
    _coalescing: CoalescingTransport

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._coalescing = CoalescingTransport(transport, self.loop)
        super().connection_made(self._coalescing)
        self._head_since = self.loop.time()
        self._check()

    def data_received(self, data: bytes) -> None:
        reading = self._reading
        self._heard = True
        super().data_received(data)
        if self._reading == "head" and not self.transport.is_closing():
            self._head_size += len(data)
            if self._head_size > MAX_HEAD:
                self.logger.warning("A request head past %d bytes.", MAX_HEAD)
                self.send_400_response("Request head too large.")
        if self._reading != reading:  # a head began or ended, or a body did: the next deadline
            self._stop()
        if self._timer is None:
            self._check()

    def on_message_begin(self) -> None:
        if self._reading == "done":  # the next request's first byte: its head's deadline begins
            self._reading = "head"  # (and replaces whatever the last request left)
            self._head_since, self._head_size = self.loop.time(), 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._reading, self._head_since = "body", None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._reading = "done"
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._upgraded = True  # the websocket protocol owns the connection from here
        self._stop()
        self._coalescing.flush()
        self.transport = self._coalescing.transport  # its frames are written one by one
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        super().connection_lost(exc)

    def _check(self) -> None:
        """Close the connection past its deadline, else look again when the next one falls.
        Waiting for the app's answer, or between requests (uvicorn's keep-alive timer), there
        is none: the next byte in starts one."""
        self._timer = None
        if self._upgraded or self.transport.is_closing():
            return
        if self._reading == "head" and self._head_since is not None:
            left = self._head_since + HEADER_TIMEOUT - self.loop.time()
        elif self._reading == "body":
            left = BODY_IDLE if self._heard or self.flow.read_paused else 0.0
            self._heard = False
        else:
            return
        if left <= 0:
            self.transport.close()
        else:
            self._timer = self.loop.call_later(left, self._check)

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
