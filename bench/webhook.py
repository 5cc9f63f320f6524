"""The agent's side: a webhook on loopback that answers at once (or, for one chosen agent, after
a delay) and records when each turn's POST arrived."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = json.dumps({"reply": "ok"}).encode()


class Webhook:
    """Answers `{"reply": "ok"}`; a turn of the agent whose ref is `slow_ref` waits
    `slow_seconds` first (cut short when `slow_ref` is cleared)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}  # row id → epoch seconds the POST arrived
        self.posts = 0
        self.slow_ref: str | None = None
        self.slow_seconds = 10.0
        self.slow_off = threading.Event()
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real agent server would

            def do_POST(self) -> None:
                at = time.time()
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                hook.record(json.loads(raw), at)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(REPLY)))
                self.end_headers()
                self.wfile.write(REPLY)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def record(self, payload: dict[str, Any], at: float) -> None:
        with self._lock:
            self.posts += 1
            for row_id in payload["turn"]:
                self.arrived.setdefault(row_id, at)
        if self.slow_ref is not None and payload["agent"]["ref"] == self.slow_ref:
            self.slow_off.wait(self.slow_seconds)

    def make_slow(self, ref: str | None, seconds: float = 10.0) -> None:
        """Make `ref`'s turns take `seconds`; None ends it (a waiting turn answers at once)."""
        if ref is None:
            self.slow_off.set()
        else:
            self.slow_off.clear()
            self.slow_seconds = seconds
        self.slow_ref = ref

    def close(self) -> None:
        self.make_slow(None)
        self.server.shutdown()
        self.server.server_close()
