"""The official clients' Realtime, driven from a test: supabase-js in a Node process (a JSON
line per command, every event it hears tagged with its channel) and supabase-py's async client."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from realtime import AsyncRealtimeChannel, AsyncRealtimeClient
from realtime.types import RealtimeChannelConfig, RealtimePostgresChangesListenEvent
from supabase import AsyncClientOptions, acreate_client

from tests.helpers.relay import LocalRelay
from tests.helpers.sdk import JS_DIR, NODE_FLAGS, node_ready

WAIT = 10.0  # seconds for something that should come
QUIET = 1.0  # seconds of silence that count as "nothing came"
TABLE = {"schema": "public", "table": "yui_messages"}

# supabase-js, driven by JSON lines on stdin (tokens too: never a command line). Each command
# answers {"kind": "done", "id", "result"}; what a channel hears is a line tagged with its names.
HARNESS = r"""
import { createClient } from '@supabase/supabase-js'
import readline from 'node:readline'
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n')
const clients = {}, channels = {}
const shown = (p) => (p instanceof ArrayBuffer ? { hex: Buffer.from(p).toString('hex') } : p)
async function run(cmd) {
  if (cmd.do === 'client') {
    const db = createClient(process.env.URL, process.env.ANON, {
      auth: { persistSession: false, autoRefreshToken: false },
    })
    await db.realtime.setAuth(cmd.token)
    clients[cmd.client] = db
    return { vsn: db.realtime.vsn }
  }
  if (cmd.do === 'subscribe') {
    const ch = clients[cmd.client].channel(cmd.topic, { config: cmd.config ?? {} })
    const tag = { client: cmd.client, channel: cmd.channel }
    channels[cmd.channel] = ch
    ;(cmd.changes ?? []).forEach((change, binding) => ch.on('postgres_changes', change, (p) =>
      out({ ...tag, kind: 'change', binding, type: p.eventType, row: p.new.id ?? p.old.id,
            new: p.new, old: p.old })))
    for (const event of cmd.broadcasts ?? []) {
      ch.on('broadcast', { event }, (p) =>
        out({ ...tag, kind: 'broadcast', payload: shown(p.payload) }))
    }
    if (cmd.presence) {
      ch.on('presence', { event: 'sync' }, () =>
        out({ ...tag, kind: 'presence', state: ch.presenceState() }))
    }
    ch.subscribe((status, err) =>
      out({ ...tag, kind: 'status', status, error: err ? err.message : null }))
    return null
  }
  if (cmd.do === 'send') {
    const payload = cmd.hex ? new Uint8Array(Buffer.from(cmd.hex, 'hex')).buffer : cmd.payload
    return await channels[cmd.channel].send({ type: 'broadcast', event: cmd.event, payload })
  }
  if (cmd.do === 'track') return await channels[cmd.channel].track(cmd.payload)
  if (cmd.do === 'httpSend') {
    return await channels[cmd.channel].httpSend(cmd.event, cmd.payload)
      .then(() => 'sent', (e) => `refused: ${e.message}`)
  }
  if (cmd.do === 'auth') return await clients[cmd.client].realtime.setAuth(cmd.token)
}
for await (const line of readline.createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line)
  run(cmd).then((result) => out({ kind: 'done', id: cmd.id, result: result ?? null }),
                (e) => out({ kind: 'done', id: cmd.id, error: String(e) }))
}
await Promise.all(Object.values(clients).map((db) => db.removeAllChannels()))
process.exit(0)
"""


class Node:
    """supabase-js in one Node process: clients (a socket each), their channels, and all they
    hear, in order."""

    def __init__(self, relay: LocalRelay) -> None:
        node = shutil.which("node")
        if node is None or not node_ready():
            pytest.skip("supabase-js is not installed: Node and `make js` are needed")
        env = {**os.environ, "URL": relay.url, "ANON": relay.anon_key}
        pipe = subprocess.PIPE
        self.proc = subprocess.Popen(
            [node, *NODE_FLAGS, "-e", HARNESS],
            cwd=JS_DIR, env=env, stdin=pipe, stdout=pipe, stderr=pipe, text=True,
        )  # fmt: skip
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.kept: list[dict[str, Any]] = []
        self.errors: list[str] = []  # its stderr, drained as it comes
        self.ids = itertools.count(1)
        self.readers = [threading.Thread(target=self._read), threading.Thread(target=self._drain)]
        for reader in self.readers:
            reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout or ():
            self.lines.put(json.loads(line))

    def _drain(self) -> None:
        self.errors.extend(self.proc.stderr or ())

    def do(self, **command: Any) -> Any:
        """Run a command; what it returned (an error fails the test)."""
        assert self.proc.stdin is not None
        command["id"] = next(self.ids)
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        done = self.expect(kind="done", id=command["id"])
        assert "error" not in done, done["error"]
        return done["result"]

    def expect(self, where: Callable[[dict[str, Any]], bool] = bool, **match: Any) -> Any:
        """The first line heard that says all of `match` (and passes `where`), waiting for it."""
        deadline = time.monotonic() + WAIT
        while True:
            for line in self.kept:
                if match.items() <= line.items() and where(line):
                    self.kept.remove(line)
                    return line
            try:
                self.kept.append(self.lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                tail = "".join(self.errors[-20:])
                raise AssertionError(f"nothing like {match}; heard {self.kept}\n{tail}") from None

    def heard(self, **match: Any) -> list[dict[str, Any]]:
        """Every line heard so far that says all of `match` (taken, in order)."""
        while not self.lines.empty():
            self.kept.append(self.lines.get())
        found = [line for line in self.kept if match.items() <= line.items()]
        self.kept = [line for line in self.kept if line not in found]
        return found

    def join(self, client: str, channel: str, topic: str = "t", **subscribe: Any) -> None:
        self.do(do="subscribe", client=client, channel=channel, topic=topic, **subscribe)
        status = self.expect(kind="status", channel=channel)
        assert status["status"] == "SUBSCRIBED", status

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # ends its loop: it leaves its channels and exits
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        for reader, pipe in zip(self.readers, (self.proc.stdout, self.proc.stderr), strict=True):
            reader.join(5)
            if pipe is not None:
                pipe.close()


# --- supabase-py's realtime (vsn 1.0.0) ----------------------------------------------------------


class Py:
    """supabase-py's Realtime on one token: its channels, and all they hear in one queue."""

    def __init__(self, rt: AsyncRealtimeClient) -> None:
        self.rt = rt
        self.heard: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.states: list[tuple[str, str]] = []  # each subscription's outcome, and why

    async def join(
        self, topic: str, *changes: dict[str, str], config: RealtimeChannelConfig | None = None
    ) -> AsyncRealtimeChannel:
        """A channel with `changes` and, with a config, broadcasts of `hi` and presence."""
        channel = self.rt.channel(topic, {"config": config} if config else None)
        for n, change in enumerate(changes):
            channel.on_postgres_changes(
                RealtimePostgresChangesListenEvent(change["event"]), self.hear("change", n),
                table=change.get("table", TABLE["table"]), schema=TABLE["schema"],
                filter=change.get("filter"),
            )  # fmt: skip
        if config:
            channel.on_broadcast("hi", self.hear("broadcast", 0))
            channel.on_presence_sync(lambda: None)
        await channel.subscribe(lambda status, error: self.states.append((status, str(error))))
        return channel

    def hear(self, kind: str, binding: int) -> Callable[[Any], None]:
        return lambda payload: self.heard.put_nowait({**payload, "kind": kind, "n": binding})

    async def next(self) -> dict[str, Any]:
        """What came next: a change's data (with the binding it matched), or a broadcast."""
        heard = await asyncio.wait_for(self.heard.get(), WAIT)
        return {**heard.get("data", heard), "n": heard["n"], "kind": heard["kind"]}


@contextlib.asynccontextmanager
async def py_socket(relay: LocalRelay, token: str) -> AsyncIterator[Py]:
    """supabase-py's async client as an app builds it, its Realtime on `token`."""
    headers = {"Authorization": f"Bearer {token}"}
    client = await acreate_client(relay.url, relay.anon_key, AsyncClientOptions(headers=headers))
    await client.realtime.set_auth(token)
    try:
        yield Py(client.realtime)
    finally:
        await client.realtime.close()
        await client.auth.close()
