"""A raw websocket to a gateway's Realtime, speaking Phoenix (vsn 1.0.0) frame by frame, as a
host does: for tests that look at the protocol itself rather than through a client."""

from __future__ import annotations

import itertools
import json
from typing import Any

from websockets.sync.connection import Connection


class PhoenixSocket:
    """Frames out with their refs, frames in as JSON."""

    def __init__(self, ws: Connection, wait: float) -> None:
        self.ws = ws
        self.wait = wait  # seconds to wait for a frame that should come
        self.refs = itertools.count(1)

    def send(self, topic: str, event: str, payload: dict[str, Any] | None = None) -> str:
        ref = str(next(self.refs))
        frame = {"topic": topic, "event": event, "payload": payload or {}, "ref": ref}
        self.ws.send(json.dumps({**frame, "join_ref": ref if event == "phx_join" else None}))
        return ref

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        return json.loads(self.ws.recv(timeout=self.wait if timeout is None else timeout))
