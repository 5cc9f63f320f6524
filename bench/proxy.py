"""A counting proxy on loopback between one bridge and the relay: it forwards bytes untouched
and counts what the bridge asks, HTTP request by HTTP request (keep-alive included) and, once a
connection is upgraded to a websocket, frame by frame. It also times each request, from its
last byte forwarded to the first byte of the answer (the relay's service time)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter, deque

HEAD_LIMIT = 1 << 20
OPCODES = {0: "continuation", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}


def _kind(head: bytes, body: bytes) -> str:
    """`METHOD /path` (query dropped; a yui-connect call is named by its action)."""
    method, target = head.split(b" ", 2)[:2]
    path = target.split(b"?", 1)[0].decode()
    if path.endswith("/yui-connect"):
        with contextlib.suppress(ValueError, AttributeError):
            path += " " + str(json.loads(body).get("action"))
    return f"{method.decode()} {path}"


def _header(head: bytes, name: bytes) -> bytes:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return b""


class CountingProxy:
    """Listens on a free loopback port and forwards to `target_port`; `counts` holds what
    went through since the last `reset()`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.counts: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}  # kind → seconds to the answer's first byte
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        assert self._server is not None
        self.port: int = self._server.sockets[0].getsockname()[1]
        self.url: str = f"http://127.0.0.1:{self.port}"

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_LIMIT)

    def reset(self) -> None:
        def clear() -> None:
            self.counts.clear()
            self.times.clear()

        self._loop.call_soon_threadsafe(clear)

    def snapshot(self) -> tuple[Counter[str], dict[str, list[float]]]:
        """What went through since the last reset: counts, and service times per kind."""
        return asyncio.run_coroutine_threadsafe(self._copy(), self._loop).result(10)

    async def _copy(self) -> tuple[Counter[str], dict[str, list[float]]]:
        return Counter(self.counts), {k: list(v) for k, v in self.times.items()}

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            relay_r, relay_w = await asyncio.open_connection(
                "127.0.0.1", self.target_port, limit=HEAD_LIMIT
            )
        except OSError:
            client_w.close()
            return
        waiting: deque[tuple[str, float]] = deque()  # requests sent, not yet answered
        up = asyncio.ensure_future(self._requests(client_r, relay_w, waiting))
        down = asyncio.ensure_future(self._answers(relay_r, client_w, waiting))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for writer in (client_w, relay_w):
            writer.close()

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        waiting: deque[tuple[str, float]],
    ) -> None:
        """Client → relay: count each HTTP request; after an upgrade, each websocket frame."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                body = await reader.readexactly(int(_header(head, b"content-length") or 0))
                kind = _kind(head, body)
                self.counts[kind] += 1
                writer.write(head + body)
                await writer.drain()
                waiting.append((kind, time.perf_counter()))
                if _header(head, b"upgrade").lower() == b"websocket":
                    await self._frames(reader, writer)
                    return

    async def _frames(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            start = await reader.readexactly(2)
            size = start[1] & 0x7F
            extra = {126: 2, 127: 8}.get(size, 0)
            length = await reader.readexactly(extra)
            if extra:
                size = int.from_bytes(length, "big")
            mask = await reader.readexactly(4 if start[1] & 0x80 else 0)
            payload = await reader.readexactly(size)
            self.counts["websocket " + OPCODES.get(start[0] & 0x0F, "other")] += 1
            writer.write(start + length + mask + payload)
            await writer.drain()

    async def _answers(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        waiting: deque[tuple[str, float]],
    ) -> None:
        """Relay → client, untouched; the first bytes after a request time its answer (a
        client sends its next request only once it has read the whole answer)."""
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                if waiting:
                    kind, sent = waiting.popleft()
                    self.times.setdefault(kind, []).append(time.perf_counter() - sent)
                writer.write(data)
                await writer.drain()

    def close(self) -> None:
        async def shut() -> None:
            if self._server is not None:
                self._server.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
