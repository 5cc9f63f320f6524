"""The live feed: a Realtime subscription that wakes the bridge the moment a person writes.

It is only a wake-up: the bridge still reads the rows itself (the socket may miss an insert
while it reconnects), so catch-up reads keep running, every 20 s while the socket is up and every
3 s while it is down. RLS applies to the feed as to REST: a host hears only inserts it could
read. The socket speaks the part of Supabase Realtime's Phoenix protocol hosts use.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from bridges.retry import Backoff, retry_loop

log = logging.getLogger("yui.live")

# Phoenix heartbeats, which also prove the socket is alive; after 2.4 heartbeats without a
# single frame the socket is taken as half-open and replaced. `$YUI_LIVE_HEARTBEAT` tunes it.
HEARTBEAT_EVERY = float(os.environ.get("YUI_LIVE_HEARTBEAT", "25"))
SILENCE_LIMIT = HEARTBEAT_EVERY * 2.4
JOIN_TIMEOUT = 10.0
TOPIC = "realtime:yui-bridge"


class LiveFeed:
    """A subscription kept up by a thread of its own, with reconnects and token refreshes.
    `url` is the relay's Realtime URL (`RelayClient.realtime_url`)."""

    def __init__(
        self,
        url: str,
        token: Callable[[], str],
        on_insert: Callable[[dict], None],
        on_state: Callable[[bool, str], None],
    ) -> None:
        self.url = url
        self.token = token  # the host's current session JWT (renewed by the session)
        self.on_insert = on_insert
        self.on_state = on_state  # (up, why): the bridge reads at once when it comes up
        self.up = False
        self._stop = threading.Event()
        self._refs = itertools.count(1)
        self._backoff = Backoff()
        self._thread = threading.Thread(target=self._run, name="live", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        retry_loop(
            self._connection,
            stop=self._stop,
            backoff=self._backoff,
            retry_on=(OSError, WebSocketException, TimeoutError, ValueError),
            on_retry=lambda exc, wait: self._down(f"{type(exc).__name__}: {exc}"),
        )
        self._down("closed")

    def _connection(self) -> float:
        """One socket, served until it fails (or the feed stops)."""
        with connect(self.url, open_timeout=JOIN_TIMEOUT, close_timeout=1, max_size=2**24) as ws:
            self._serve(ws)
        return 0.0

    def _down(self, reason: str) -> None:
        if self.up:
            self.up = False
            self.on_state(False, reason)

    def _send(self, socket: Connection, topic: str, event: str, payload: dict[str, Any]) -> str:
        ref = str(next(self._refs))
        socket.send(
            json.dumps(
                {
                    "topic": topic,
                    "event": event,
                    "payload": payload,
                    "ref": ref,
                    "join_ref": "1" if topic == TOPIC else None,
                }
            )
        )
        return ref

    def _serve(self, socket: Connection) -> None:
        token = self.token()
        join = self._send(
            socket,
            TOPIC,
            "phx_join",
            {
                "access_token": token,
                "config": {
                    "broadcast": {"self": False},
                    "presence": {"key": ""},
                    "postgres_changes": [
                        {"event": "INSERT", "schema": "public", "table": "yui_messages"}
                    ],
                },
            },
        )
        heard = time.monotonic()
        beat_at = heard + HEARTBEAT_EVERY
        while not self._stop.is_set():
            if time.monotonic() > heard + SILENCE_LIMIT:
                raise TimeoutError("the socket went silent")
            if time.monotonic() >= beat_at:
                self._send(socket, "phoenix", "heartbeat", {})
                beat_at = time.monotonic() + HEARTBEAT_EVERY
            fresh = self.token()
            if self.up and fresh != token:
                token = fresh
                self._send(socket, TOPIC, "access_token", {"access_token": token})
            try:
                frame = json.loads(socket.recv(timeout=1.0))
            except TimeoutError:
                continue
            heard = time.monotonic()
            self._handle(frame, join)

    def _handle(self, frame: dict[str, Any], join: str) -> None:
        event, payload = frame.get("event"), frame.get("payload") or {}
        if event == "phx_reply" and frame.get("ref") == join and payload.get("status") != "ok":
            raise ValueError(f"join refused: {payload.get('response')}")
        if event == "system" and frame.get("topic") == TOPIC:
            if payload.get("status") != "ok":
                raise ValueError(f"subscription failed: {payload.get('message')}")
            if not self.up:
                self.up = True
                self._backoff.reset()  # a socket that worked: the next failure starts afresh
                self.on_state(True, "subscribed")
        elif event in ("phx_error", "phx_close") and frame.get("topic") == TOPIC:
            raise ValueError(f"the channel closed ({event})")
        elif event == "postgres_changes":
            record = (payload.get("data") or {}).get("record")
            if isinstance(record, dict):  # every row: its reader decides what matters
                self.on_insert(record)
