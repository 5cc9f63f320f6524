"""A fake OpenAI-compatible chat-completions server on loopback, scripted per request: real
HTTP, real server-sent events chunk by chunk, plain JSON, silences and dropped connections.

The chat client's tests and the `run-model` end-to-end tests both talk to it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers.http import LoopbackServer


@dataclass
class Call:
    """One request the fake server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    closed: threading.Event = field(default_factory=threading.Event)  # the client hung up

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body["messages"]

    @property
    def last(self) -> str:
        return self.messages[-1]["content"]


@dataclass
class Sse:
    """An answer as server-sent events, one HTTP chunk per piece. `then` is what follows the
    pieces: `end` (a finish reason and `[DONE]`), `hold` (silence until the client hangs up),
    `drop` (the connection cut) or `finish` (a finish reason, no `[DONE]`)."""

    pieces: list[str]
    delay: float = 0.0
    then: str = "end"
    events: list[str] = field(default_factory=list)  # raw data lines sent before the pieces


@dataclass
class Json:
    """A plain answer: a status, a JSON (or raw) body, headers."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Hold:
    """No answer at all, not even headers, until the client hangs up."""


Reply = Sse | Json | Hold
Script = Callable[[Call], Reply]


def plain(text: str, finish: str = "stop") -> Json:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}}
    return Json(
        {"id": "x", "object": "chat.completion", "choices": [choice | {"finish_reason": finish}]}
    )


def pieces(text: str) -> list[str]:
    """`text` cut into a few pieces, the way a model streams it."""
    step = max(1, len(text) // 3)
    return [text[i : i + step] for i in range(0, len(text), step)]


def says(text: str) -> Script:
    """A server that answers `text`: streamed when asked to stream, else plain."""
    return lambda call: Sse(pieces(text)) if call.stream else plain(text)


def error(status: int, message: str, **headers: str) -> Json:
    return Json({"error": {"message": message, "type": "invalid_request_error"}}, status, headers)


class FakeModel(LoopbackServer):
    """A chat-completions server on a free loopback port, scripted per request. With `key`,
    a request without `Bearer <key>` gets a 401 that quotes the key it was given. Its `url` is
    the API's base (`…/v1`)."""

    def __init__(self, script: Script | None = None, key: str | None = None) -> None:
        self.script = script or says("Hello there")
        self.key = key
        self.calls: list[Call] = []
        self.arrived = threading.Condition()
        self.release = threading.Event()  # ends every hold, so the server can shut down
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                call = Call(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)
                )
                with model.arrived:
                    model.calls.append(call)
                    model.arrived.notify_all()
                if not self.path.endswith("/chat/completions"):
                    reply: Reply = Json({"error": "not found"}, 404)
                elif model.key and call.headers.get("authorization") != f"Bearer {model.key}":
                    given = call.headers.get("authorization", "").removeprefix("Bearer ")
                    reply = error(401, f"Incorrect API key provided: {given}")
                else:
                    reply = model.script(call)
                try:
                    self._send(call, reply)
                except OSError:
                    call.closed.set()
                self.close_connection = True

            def _send(self, call: Call, reply: Reply) -> None:
                if isinstance(reply, Hold):
                    self._wait_for_hangup(call)
                    return
                if isinstance(reply, Json):
                    body = (
                        reply.body
                        if isinstance(reply.body, bytes)
                        else json.dumps(reply.body).encode()
                    )
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for data in reply.events:
                    self._chunk(f"data: {data}\n\n")
                for piece in reply.pieces:
                    self._event({"delta": {"content": piece}, "finish_reason": None})
                    time.sleep(reply.delay)
                if reply.then == "hold":
                    self._wait_for_hangup(call)
                    return
                if reply.then == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self._event({"delta": {}, "finish_reason": "stop"})
                if reply.then == "end":
                    self._chunk("data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")

            def _event(self, choice: dict[str, Any]) -> None:
                chunk = {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, **choice}],
                }
                self._chunk(f"data: {json.dumps(chunk)}\n\n")

            def _chunk(self, text: str) -> None:
                data = text.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _wait_for_hangup(self, call: Call) -> None:
                deadline = time.monotonic() + 60
                while not model.release.is_set() and time.monotonic() < deadline:
                    ready, _, _ = select.select([self.connection], [], [], 0.05)
                    if ready:
                        try:
                            if self.connection.recv(1, socket.MSG_PEEK) == b"":
                                break
                        except OSError:
                            break
                else:
                    return
                call.closed.set()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler, daemon_threads=True)
        self.url = f"{self.origin}/v1"

    def wait_calls(self, n: int, timeout: float = 30) -> list[Call]:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.calls) >= n, timeout)
        assert ok, f"the model server got {len(self.calls)} calls, expected {n}"
        return self.calls[:n]

    def close(self) -> None:
        self.release.set()
        super().close()
