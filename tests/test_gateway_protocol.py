"""The gateway's HTTP protocol, on a recording transport: an answer whose head and body are
ready together is one write (one TCP segment, one wake-up of the client), a streamed answer's
head leaves at once, and a request head that grows past MAX_HEAD unfinished is a 400. (Its
deadlines are tested on real sockets in test_relay_bounds.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.server import ServerState

from relay import server


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


async def exchange(path: str, wait: float, *, pieces: Iterable[bytes] = ()) -> RecordingTransport:
    """The transport the gateway's protocol wrote to, `wait` seconds into a GET of `path`
    whose head goes on with `pieces` (each its own read), then its end."""
    config = server.config(APP, "127.0.0.1", 0)
    config.load()
    protocol = config.http_protocol_class(  # type: ignore[call-arg]
        config=config, server_state=ServerState(), app_state={}
    )
    transport = RecordingTransport()
    protocol.connection_made(transport)
    for piece in (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode(), *pieces, b"\r\n"):
        if not transport.closing:
            protocol.data_received(piece)
    await asyncio.sleep(wait)
    protocol.connection_lost(None)
    return transport


def test_a_whole_answer_is_one_write() -> None:
    for _ in range(2):  # and again on the same kind of connection: nothing carried over
        writes = asyncio.run(exchange("/whole", 0.02)).writes
        assert len(writes) == 1, writes
        assert writes[0].startswith(b"HTTP/1.1 200 ")
        assert writes[0].endswith(b'\r\n\r\n{"ok":true}')


def test_a_streamed_answers_head_is_not_held_for_its_body() -> None:
    early = asyncio.run(exchange("/streamed", 0.02)).writes
    assert early and early[0].startswith(b"HTTP/1.1 200 ")
    assert b"second" not in b"".join(early)
    late = b"".join(asyncio.run(exchange("/streamed", 0.2)).writes)
    assert b"first" in late and b"second" in late and late.endswith(b"0\r\n\r\n")


def padding(size: int) -> list[bytes]:
    """Header lines of about `size` bytes in all, a kilobyte a read."""
    return [b"x-pad-%d: %s\r\n" % (n, b"a" * 1000) for n in range(size // 1012)]


def test_a_head_past_the_limit_is_a_400_and_one_within_it_is_served() -> None:
    within = asyncio.run(exchange("/whole", 0.02, pieces=padding(server.MAX_HEAD - 2048)))
    assert within.writes[0].startswith(b"HTTP/1.1 200 ")
    past = asyncio.run(exchange("/whole", 0.02, pieces=padding(server.MAX_HEAD + 2048)))
    assert past.closing
    assert b"".join(past.writes).startswith(b"HTTP/1.1 400 ")
