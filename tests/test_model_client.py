"""The chat client against fake OpenAI-compatible servers on loopback: one that streams real
server-sent events chunk by chunk, one that answers plain JSON, and their failures.

The fake server lives here and the end-to-end tests of `run-model` import it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bridges.engine.turns import retry_after
from bridges.model.client import (
    Cancelled,
    ChatClient,
    ModelRefused,
    ModelUnavailable,
    base_url,
    error_message,
)
from state.host import Secret

# --- a fake model server ----------------------------------------------------------------------


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


class FakeModel:
    """A chat-completions server on a free loopback port, scripted per request. With `key`,
    a request without `Bearer <key>` gets a 401 that quotes the key it was given."""

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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_calls(self, n: int, timeout: float = 30) -> list[Call]:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.calls) >= n, timeout)
        assert ok, f"the model server got {len(self.calls)} calls, expected {n}"
        return self.calls[:n]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel()
    yield server
    server.close()


HI = [{"role": "user", "content": "hi"}]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- answers ----------------------------------------------------------------------------------


def test_a_stream_arrives_piece_by_piece(fake: FakeModel) -> None:
    seen: list[str] = []
    done = ChatClient(fake.url, "tiny").complete(HI, on_text=seen.append)
    assert (done.text, done.finish, done.streamed) == ("Hello there", "stop", True)
    assert seen == pieces("Hello there") and len(seen) > 1
    (call,) = fake.calls
    assert call.path == "/v1/chat/completions"
    assert call.body == {"model": "tiny", "messages": HI, "stream": True}
    assert "authorization" not in call.headers
    assert "text/event-stream" in call.headers["accept"]


def test_a_plain_answer_when_not_streaming(fake: FakeModel) -> None:
    done = ChatClient(fake.url, "tiny", stream=False).complete(HI, max_tokens=50, temperature=0.2)
    assert (done.text, done.streamed) == ("Hello there", False)
    assert fake.calls[0].body == {
        "model": "tiny",
        "messages": HI,
        "stream": False,
        "max_tokens": 50,
        "temperature": 0.2,
    }


def test_a_server_that_ignores_stream_is_read_plain() -> None:
    server = FakeModel(lambda call: plain("whole"))
    done = ChatClient(server.url, "tiny").complete(HI)
    assert (done.text, done.streamed) == ("whole", False)
    assert server.calls[0].stream
    server.close()


def test_a_server_that_refuses_streams_is_asked_plainly_from_then_on() -> None:
    server = FakeModel(
        lambda call: error(400, "streaming is not supported") if call.stream else plain("ok")
    )
    client = ChatClient(server.url, "tiny")
    assert client.complete(HI).text == "ok"
    assert client.complete(HI).text == "ok"
    assert [c.stream for c in server.calls] == [True, False, False]
    server.close()


def test_a_stream_with_keep_alives_and_no_done_is_complete() -> None:
    server = FakeModel(lambda call: Sse(["a", "b"], then="finish", events=[": ping", "{not json"]))
    assert ChatClient(server.url, "tiny").complete(HI).text == "ab"
    server.close()


def test_the_key_goes_in_a_bearer_header_only() -> None:
    server = FakeModel(key="sk-test-0123456789")
    client = ChatClient(server.url, "tiny", key=Secret("sk-test-0123456789"))
    assert client.complete(HI).text == "Hello there"
    assert server.calls[0].headers["authorization"] == "Bearer sk-test-0123456789"
    assert "sk-test" not in repr(client.__dict__)
    server.close()


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_a_busy_server_is_unavailable_and_its_retry_after_kept(status: int) -> None:
    server = FakeModel(lambda call: error(status, "busy", **{"retry-after": "7"}))
    with pytest.raises(ModelUnavailable) as caught:
        ChatClient(server.url, "tiny").complete(HI)
    assert caught.value.after == 7 and str(status) in caught.value.reason
    server.close()


def test_an_unknown_model_is_refused_with_its_name() -> None:
    server = FakeModel(lambda call: error(404, "model 'nope' not found"))
    with pytest.raises(ModelRefused) as caught:
        ChatClient(server.url, "nope").complete(HI)
    assert caught.value.status == 404
    assert "doesn't know the model nope" in caught.value.reason
    assert "model 'nope' not found" in caught.value.reason
    server.close()


def test_a_context_the_server_refuses_says_so() -> None:
    server = FakeModel(
        lambda call: error(400, "This model's maximum context length is 4096 tokens")
    )
    with pytest.raises(ModelRefused) as caught:
        ChatClient(server.url, "tiny").complete(HI)
    assert "too long for the model's window" in caught.value.reason
    server.close()


def test_a_wrong_key_is_refused_and_never_quoted_back() -> None:
    server = FakeModel(key="sk-right-key-000")
    with pytest.raises(ModelRefused) as caught:
        ChatClient(server.url, "tiny", key=Secret("sk-wrong-key-999")).complete(HI)
    assert "turned the key down" in caught.value.reason
    assert "sk-wrong-key-999" not in caught.value.reason and "[key]" in caught.value.reason
    server.close()


def test_nothing_listening_is_unavailable() -> None:
    with pytest.raises(ModelUnavailable) as caught:
        ChatClient(f"http://127.0.0.1:{free_port()}/v1", "tiny").complete(HI)
    assert "can't reach the model server at 127.0.0.1" in caught.value.reason
    assert "refused" in caught.value.reason.lower()


def test_a_broken_stream_is_unavailable() -> None:
    server = FakeModel(lambda call: Sse(["half an ans"], then="drop"))
    with pytest.raises(ModelUnavailable):
        ChatClient(server.url, "tiny").complete(HI)
    server.close()


def test_an_error_inside_a_stream() -> None:
    busy = FakeModel(lambda call: Sse([], events=['{"error": {"message": "server overloaded"}}']))
    with pytest.raises(ModelUnavailable):
        ChatClient(busy.url, "tiny").complete(HI)
    wrong = FakeModel(lambda call: Sse([], events=['{"error": {"message": "invalid tool"}}']))
    with pytest.raises(ModelRefused):
        ChatClient(wrong.url, "tiny").complete(HI)
    busy.close()
    wrong.close()


def test_an_answer_that_is_not_chat_completions_is_refused() -> None:
    server = FakeModel(lambda call: Json(b"<html>hello</html>"))
    with pytest.raises(ModelRefused, match="check the URL"):
        ChatClient(server.url, "tiny").complete(HI)
    server.close()


# --- silence and Stop -------------------------------------------------------------------------


def test_a_stream_gone_quiet_times_out_and_is_hung_up() -> None:
    server = FakeModel(lambda call: Sse(["a"], then="hold"))
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match=r"no answer from 127.0.0.1:\d+ for 0.5 s"):
        ChatClient(server.url, "tiny", idle=0.5).complete(HI)
    assert time.monotonic() - started < 5
    assert server.calls[0].closed.wait(5)
    server.close()


def test_a_long_answer_is_fine_while_pieces_flow() -> None:
    server = FakeModel(lambda call: Sse(list("abcdefgh"), delay=0.2))
    assert ChatClient(server.url, "tiny", idle=0.5).complete(HI).text == "abcdefgh"
    server.close()


def test_cancel_mid_stream_closes_the_request_at_once() -> None:
    server = FakeModel(lambda call: Sse(["first"], then="hold"))
    cancelled = threading.Event()
    seen: list[str] = []

    def cancel_after_first(piece: str) -> None:
        seen.append(piece)
        threading.Timer(0.3, cancelled.set).start()

    started = time.monotonic()
    with pytest.raises(Cancelled):
        ChatClient(server.url, "tiny").complete(HI, cancelled=cancelled, on_text=cancel_after_first)
    assert seen == ["first"] and time.monotonic() - started < 3
    assert server.calls[0].closed.wait(5), "the server never saw the request closed"
    server.close()


def test_cancel_before_the_first_byte_closes_the_request() -> None:
    server = FakeModel(lambda call: Hold())
    cancelled = threading.Event()
    threading.Timer(0.5, cancelled.set).start()
    with pytest.raises(Cancelled):
        ChatClient(server.url, "tiny", stream=False).complete(HI, cancelled=cancelled)
    assert server.calls[0].closed.wait(5)
    server.close()


def test_an_already_cancelled_turn_asks_nothing(fake: FakeModel) -> None:
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(Cancelled):
        ChatClient(fake.url, "tiny").complete(HI, cancelled=cancelled)
    assert fake.calls == []


# --- helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        (" http://127.0.0.1:11434/v1/ ", "http://127.0.0.1:11434/v1"),
        ("http://h:8000/v1/chat/completions", "http://h:8000/v1"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"),
    ],
)
def test_base_url(given: str, base: str) -> None:
    assert base_url(given) == base


@pytest.mark.parametrize("bad", ["ftp://h/v1", "127.0.0.1:11434", "http://"])
def test_base_url_refuses_what_is_not_http(bad: str) -> None:
    with pytest.raises(ValueError):
        base_url(bad)


def test_retry_after() -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert retry_after("7") == 7 and retry_after("1.5") == 1.5
    assert 25 <= (retry_after(soon) or 0) <= 30
    assert retry_after("99999") == 3600
    assert retry_after("soon") is None and retry_after(None) is None


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"error": {"message": "model not found"}}', "model not found"),
        (b'{"error": "model not found"}', "model not found"),
        (b'{"detail": [{"msg": "field required"}]}', "field required"),
        (b'{"message": "nope"}', "nope"),
        (b'[{"error": {"message": "wrapped"}}]', "wrapped"),
        (b"plain\n  words", "plain words"),
    ],
)
def test_error_message_shapes(raw: bytes, words: str) -> None:
    assert error_message(raw) == words
