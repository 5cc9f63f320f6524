"""The gateway's HTTP protocol, on a recording transport: an answer whose head and body are
ready together is one write (one TCP segment, one wake-up of the client), a streamed answer's
head leaves at once, and a request head that grows past MAX_HEAD unfinished is a 400. (Its
deadlines are tested on real sockets in test_relay_bounds.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.server import ServerState

from relay import protocol, server


class RecordingTransport(asyncio.Transport):
    """A connection that keeps what is written to it, one entry per write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8000) if name in ("peername", "sockname") else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def whole(request: Request) -> Response:
    return Response(b'{"ok":true}', media_type="application/json")


async def streamed(request: Request) -> Response:
    async def chunks() -> Any:
        yield b"first"
        await asyncio.sleep(0.05)  # the head must not wait for this
        yield b"second"

    return StreamingResponse(chunks(), media_type="text/plain")


APP = Starlette(routes=[Route("/whole", whole), Route("/streamed", streamed)])


async def talk(reads: Iterable[bytes], wait: float) -> RecordingTransport:
    """The transport the gateway's protocol wrote to, `wait` seconds after a client sent
    `reads` (each read on its own)."""
    config = server.config(APP, "127.0.0.1", 0)
    config.load()
    protocol = config.http_protocol_class(  # type: ignore[call-arg]
        config=config, server_state=ServerState(), app_state={}
    )
    transport = RecordingTransport()
    protocol.connection_made(transport)
    for read in reads:
        if not transport.closing:
            protocol.data_received(read)
    await asyncio.sleep(wait)
    closed = transport.closing
    protocol.connection_lost(None)  # the client goes: the protocol's timers and tasks end
    transport.closing = closed  # whether the gateway closed it, not this teardown
    return transport


def exchange(path: str, wait: float, *, lines: Iterable[bytes] = ()) -> RecordingTransport:
    """A GET of `path` whose head goes on with `lines` (each its own read)."""
    first = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
    return asyncio.run(talk((first, *lines, b"\r\n"), wait))


def test_a_whole_answer_is_one_write() -> None:
    for _ in range(2):  # and again on the same kind of connection: nothing carried over
        writes = exchange("/whole", 0.02).writes
        assert len(writes) == 1, writes
        assert writes[0].startswith(b"HTTP/1.1 200 ")
        assert writes[0].endswith(b'\r\n\r\n{"ok":true}')


def test_a_streamed_answers_head_is_not_held_for_its_body() -> None:
    early = exchange("/streamed", 0.02).writes
    assert early and early[0].startswith(b"HTTP/1.1 200 ")
    assert b"second" not in b"".join(early)
    late = b"".join(exchange("/streamed", 0.2).writes)
    assert b"first" in late and b"second" in late and late.endswith(b"0\r\n\r\n")


def padding(size: int) -> list[bytes]:
    """Header lines of about `size` bytes in all, a kilobyte a read."""
    return [b"x-pad-%d: %s\r\n" % (n, b"a" * 1000) for n in range(size // 1012)]


def test_a_head_past_the_limit_is_a_400_and_one_within_it_is_served() -> None:
    within = exchange("/whole", 0.02, lines=padding(protocol.MAX_HEAD - 2048))
    assert within.writes[0].startswith(b"HTTP/1.1 200 ")
    past = exchange("/whole", 0.02, lines=padding(protocol.MAX_HEAD + 2048))
    assert past.closing
    assert b"".join(past.writes).startswith(b"HTTP/1.1 400 ")


def test_a_head_begun_in_the_read_that_ended_a_request_has_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(protocol, "HEADER_TIMEOUT", 0.1)
    whole_then_half = b"GET /whole HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /who"
    transport = asyncio.run(talk([whole_then_half], 0.4))
    assert transport.writes[0].startswith(b"HTTP/1.1 200 ")
    assert transport.closing, "half a pipelined head held its connection"
