"""The person's phone, watching: a Realtime socket with the person's token, as the app keeps one,
that notes when each agent reply becomes visible (the moment its row reaches the person)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection, connect

from bridges.client.relay import realtime_url

TOPIC = "realtime:bench-person"
HEARTBEAT_EVERY = 20.0


class ReplyWatch:
    """Records, for every person row, when the first agent reply naming it (`meta.turn`)
    arrived on the person's socket; `on_reply(agent_id)` is called for each reply."""

    def __init__(self, url: str, apikey: str, token: str) -> None:
        self.visible: dict[str, float] = {}  # person row id → epoch seconds
        self.on_reply: Callable[[str], None] | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._subscribed = threading.Event()
        self._socket: ClientConnection = connect(realtime_url(url, apikey), max_size=2**24)
        join = {
            "access_token": token,
            "config": {
                "postgres_changes": [
                    {"event": "INSERT", "schema": "public", "table": "yui_messages"}
                ]
            },
        }
        self._send("phx_join", join, TOPIC)
        self._thread = threading.Thread(target=self._run, name="watch", daemon=True)
        self._thread.start()
        if not self._subscribed.wait(15):
            raise RuntimeError("the person's Realtime subscription did not come up")

    def _send(self, event: str, payload: dict[str, Any], topic: str) -> None:
        frame = {"topic": topic, "event": event, "payload": payload, "ref": "1", "join_ref": "1"}
        self._socket.send(json.dumps(frame))

    def _run(self) -> None:
        beat_at = time.monotonic() + HEARTBEAT_EVERY
        try:
            while not self._stop.is_set():
                if time.monotonic() >= beat_at:
                    self._send("heartbeat", {}, "phoenix")
                    beat_at = time.monotonic() + HEARTBEAT_EVERY
                try:
                    raw = self._socket.recv(timeout=0.5)
                except TimeoutError:
                    continue
                self._handle(json.loads(raw), time.time())
        except (OSError, WebSocketException):
            if not self._stop.is_set():
                raise

    def _handle(self, frame: dict[str, Any], at: float) -> None:
        payload = frame.get("payload") or {}
        if frame.get("event") == "system" and payload.get("status") == "ok":
            self._subscribed.set()
        if frame.get("event") != "postgres_changes":
            return
        record = (payload.get("data") or {}).get("record") or {}
        meta = record.get("meta") or {}
        if record.get("sender") != "agent" or meta.get("status") or not meta.get("turn"):
            return
        with self._changed:
            for row_id in meta["turn"]:
                self.visible.setdefault(row_id, at)
            self._changed.notify_all()
        if self.on_reply is not None:
            self.on_reply(str(record["agent_id"]))

    def wait(self, row_id: str, timeout: float = 30) -> float:
        """When the reply to `row_id` became visible (waiting for it)."""
        with self._changed:
            if not self._changed.wait_for(lambda: row_id in self.visible, timeout):
                raise TimeoutError(f"no reply to {row_id} within {timeout} s")
            return self.visible[row_id]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()
