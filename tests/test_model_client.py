"""The chat client against fake OpenAI-compatible servers on loopback: one that streams real
server-sent events chunk by chunk, one that answers plain JSON, and their failures.

The fake server is tests/helpers/model.py; the end-to-end tests of `run-model` use it too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from bridges.model.client import (
    Cancelled,
    ChatClient,
    ModelRefused,
    ModelUnavailable,
    base_url,
    error_message,
)
from bridges.retry import retry_after
from state.host import Secret
from tests.helpers.http import free_port
from tests.helpers.model import (
    FakeModel,
    Hold,
    Json,
    Sse,
    error,
    pieces,
    plain,
)


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel()
    yield server
    server.close()


HI = [{"role": "user", "content": "hi"}]


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
