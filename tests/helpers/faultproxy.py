"""A TCP proxy on loopback that a test controls, to put faults between the bridge and the relay
or the webhook: pass, delay, refuse new connections, reset open ones, black-hole, half-open.

It runs an asyncio loop on a thread of its own; the test calls its methods from anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import weakref
from concurrent.futures import Future
from inspect import CORO_CREATED, getcoroutinestate, iscoroutine
from typing import Any

PASS, DELAY, REFUSE, BLACKHOLE, HALF_OPEN = "pass", "delay", "refuse", "blackhole", "half-open"


class FaultProxy:
    """Forwards `127.0.0.1:<port>` to `127.0.0.1:<target_port>` under the current mode.

    - pass: forward bytes as they come;
    - delay: forward each chunk `delay` seconds late;
    - refuse: new connections are reset at once (open ones carry on);
    - blackhole: new connections are accepted and never answered, open ones go silent until
      the mode changes again (the network comes back);
    - half-open: the connections open now go silent both ways for good, but stay open (a dead
      path neither kernel knows about); new connections work as usual.
    `reset()` cuts every open connection with a RST.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.mode = PASS
        self.delay = 0.0
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._frozen: set[int] = set()  # connections silenced until the network comes back
        self._dead: set[int] = set()  # connections silenced for good (half-open)
        # Every socket the proxy opened or accepted, so `close` can abort whatever still holds
        # one, however its task ended (a socket left open is a ResourceWarning in a later test).
        self._transports: weakref.WeakSet[asyncio.WriteTransport] = weakref.WeakSet()
        self._loop = asyncio.new_event_loop()
        self._ready: Future[int] = Future()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fault-proxy")
        self._thread.start()
        self.port = self._ready.result(timeout=10)
        self.url = f"http://127.0.0.1:{self.port}"

    # --- control, from the test's thread -------------------------------------------------

    def set(self, mode: str, delay: float = 0.0) -> None:
        self._call(self._set, mode, delay)

    def pass_through(self) -> None:
        self.set(PASS)

    def down(self) -> None:
        """The far end can't be reached: new connections are refused, open ones cut."""
        self.set(REFUSE)
        self.reset()

    restore = pass_through

    def reset(self) -> None:
        """Cut every open connection with a RST."""
        self._call(self._reset)

    def close(self) -> None:
        """Cut every connection, end every task, then stop the loop and wait for its thread
        to close it (a loop left open leaks its self-pipe: a ResourceWarning)."""
        self._call(self._reset)
        asyncio.run_coroutine_threadsafe(self._end_tasks(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _call(self, func: Any, *args: Any) -> None:
        done: Future[None] = Future()

        def run() -> None:
            func(*args)
            done.set_result(None)

        self._loop.call_soon_threadsafe(run)
        done.result(timeout=10)

    # --- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self._server = server
        self._ready.set_result(server.sockets[0].getsockname()[1])
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _end_tasks(self) -> None:
        """Cancel every connection's task, but only once it has begun: a task cancelled before
        its first step never reaches the `finally` that closes its socket (and asyncio's own
        callback then fails on the cancelled task without closing it: a ResourceWarning)."""
        self._server.close()  # no new connection starts a task while the others end
        for _ in range(20):  # a connection accepted just before starts its task a step later
            await asyncio.sleep(0)  # tasks created last step take their first one here
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if not tasks:
                break
            begun = [t for t in tasks if _begun(t)]
            for task in begun:
                task.cancel()
            await asyncio.gather(*begun, return_exceptions=True)
        await self._server.wait_closed()
        for transport in list(self._transports):
            transport.abort()  # a close still flushing a buffer, or any path not seen yet
        await asyncio.sleep(0)  # the closed transports' connection_lost callbacks run here

    def _set(self, mode: str, delay: float) -> None:
        self.mode, self.delay = mode, delay
        if mode == HALF_OPEN:
            self._dead.update(id(pair) for pair in self._conns)
        elif mode == BLACKHOLE:
            self._frozen.update(id(pair) for pair in self._conns)
        else:
            self._frozen.clear()

    def _reset(self) -> None:
        for client, upstream in list(self._conns):
            for writer in (client, upstream):
                _rst(writer)
        self._conns.clear()
        self._frozen.clear()
        self._dead.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A client's connection, closed however it ends: a task cancelled by `close` while
        it was still opening the upstream leaked it (a ResourceWarning in a later test)."""
        self._transports.add(writer.transport)
        try:
            await self._proxy(reader, writer)
        finally:
            writer.close()

    async def _proxy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == REFUSE:
            _rst(writer)
            return
        if self.mode == BLACKHOLE:  # accepted, never answered
            with contextlib.suppress(Exception):
                await reader.read()  # until the client gives up
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            _rst(writer)
            return
        self._transports.add(up_writer.transport)
        pair = (writer, up_writer)
        self._conns.add(pair)
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, pair), self._pipe(up_reader, writer, pair)
            )
        finally:
            self._conns.discard(pair)
            self._frozen.discard(id(pair))
            self._dead.discard(id(pair))
            for end in pair:
                with contextlib.suppress(Exception):
                    end.close()

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        try:
            while data := await source.read(65536):
                if id(pair) in self._frozen or id(pair) in self._dead:
                    continue  # swallowed: the path is dead but nobody says so
                if self.mode == DELAY and self.delay:
                    await asyncio.sleep(self.delay)
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if id(pair) not in self._frozen and id(pair) not in self._dead:
                with contextlib.suppress(Exception):
                    sink.write_eof()


def _begun(task: asyncio.Task[Any]) -> bool:
    """Whether the task has taken its first step (its `try` entered)."""
    coro = task.get_coro()
    return not (iscoroutine(coro) and getcoroutinestate(coro) == CORO_CREATED)


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with a RST instead of a FIN, as a peer that vanished would."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()
