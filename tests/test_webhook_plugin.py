"""The webhook plug-in against a real HTTP server on loopback: what it sends, how it signs,
and how each kind of answer (or failure) comes back as replies or a retry."""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import urllib3
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from bridges.client.rows import MAX_BODY, AgentInfo
from bridges.engine.turns import RetryTurn, Turn, turn_key
from bridges.webhook import plugin as webhook
from bridges.webhook.plugin import WebhookAgent
from tests.helpers.http import LoopbackServer, free_port
from tests.helpers.keepalive import KeepAliveServer

GUIDE = {"version": "v10+53ddb59c", "body": "## You are talking to someone in Yui"}
TAP = {"id": "n1", "preset": "choose", "value": {"choice": "Walk"}, "echo": "Walk"}


@dataclass
class Answer:
    """What the fake webhook answers to one POST."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # before answering
    drip: float = 0.0  # between the body's bytes
    length: bool = True  # send content-length; without it the body ends when the server closes


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


class FakeWebhook(LoopbackServer):
    """A webhook on 127.0.0.1 that records each POST and answers from `script`, in order."""

    def __init__(self) -> None:
        self.script: list[Answer] = []
        self.seen: list[Seen] = []
        self.stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                fake.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(Handler)
        self.url = f"{self.origin}/hook?token=t0ken"

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        body = req.rfile.read(int(req.headers.get("content-length") or 0))
        self.seen.append(Seen(req.path, {k.lower(): v for k, v in req.headers.items()}, body))
        answer = self.script.pop(0) if self.script else Answer(status=204)
        if answer.delay:
            self.stop.wait(answer.delay)
        data = answer.body.encode() if isinstance(answer.body, str) else answer.body
        try:
            req.send_response(answer.status)
            for name, value in answer.headers.items():
                req.send_header(name, value)
            if answer.length and "content-length" not in answer.headers:
                req.send_header("content-length", str(len(data)))
            req.end_headers()
            step = 1 if answer.drip else max(len(data), 1)
            for i in range(0, len(data), step):
                req.wfile.write(data[i : i + step])
                req.wfile.flush()
                self.stop.wait(answer.drip)
        except OSError:
            pass  # the client gave up (a timeout test)

    def answers(self, *script: Answer) -> None:
        self.script.extend(script)

    def close(self) -> None:
        """Cut short any delay or drip first: closing waits for every request to finish."""
        self.stop.set()
        super().close()


@pytest.fixture
def hook() -> Iterator[FakeWebhook]:
    with FakeWebhook() as fake:
        yield fake


def row(id: str, body: str, kind: str = "text", meta: Any = None) -> dict[str, Any]:
    return {"id": id, "kind": kind, "body": body, "meta": meta, "created_at": f"2026-11-30T{id}"}


def make_turn(*rows: dict[str, Any]) -> Turn:
    agent = AgentInfo(id="a-1", name="My agent", handle="my-agent", ref="my-agent")
    return Turn(agent=agent, rows=list(rows) or [row("r1", "hi")], guide=GUIDE)


def json_answer(value: Any, status: int = 200) -> Answer:
    return Answer(status, json.dumps(value), {"content-type": "application/json"})


# --- what is sent ---------------------------------------------------------------------------


def test_the_payload_has_the_seeds_shape_and_the_turn_key(hook: FakeWebhook) -> None:
    turn = make_turn(
        row("r1", "hi", meta={"note": "a text row's meta is not an event"}),
        row("r2", "[yui] n1 choose choice=Walk", kind="event", meta=TAP),
    )
    assert WebhookAgent(hook.url).answer(turn) == []  # the default 204: handled, no reply

    [seen] = hook.seen
    assert seen.path == "/hook?token=t0ken"
    assert json.loads(seen.body) == {
        "agent": {"id": "a-1", "name": "My agent", "handle": "my-agent", "ref": "my-agent"},
        "turn": ["r1", "r2"],
        "text": "hi\n[yui] n1 choose choice=Walk",
        "messages": [
            {
                "id": "r1",
                "kind": "text",
                "body": "hi",
                "event": None,
                "created_at": "2026-11-30Tr1",
            },
            {
                "id": "r2",
                "kind": "event",
                "body": "[yui] n1 choose choice=Walk",
                "event": TAP,
                "created_at": "2026-11-30Tr2",
            },
        ],
        "guide": GUIDE,
    }
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["user-agent"] == "yui-bridges/0.1"
    assert seen.headers["x-yui-turn"] == turn_key(["r1", "r2"]) == turn.key
    assert re.fullmatch(r"[0-9a-f]{32}", seen.headers["x-yui-turn"])
    unsigned = {"x-yui-signature", "x-yui-timestamp", "webhook-signature", "webhook-id"}
    assert not unsigned & seen.headers.keys()


def test_user_info_in_the_url_goes_as_basic_auth(hook: FakeWebhook) -> None:
    WebhookAgent(hook.url.replace("//", "//me:p%40ss@", 1)).answer(make_turn())
    [seen] = hook.seen
    assert seen.headers["authorization"] == "Basic " + base64.b64encode(b"me:p@ss").decode()
    assert seen.path == "/hook?token=t0ken"


def test_a_retried_turn_carries_the_same_key(hook: FakeWebhook) -> None:
    hook.answers(Answer(500), json_answer({"reply": "ok"}))
    agent, turn = WebhookAgent(hook.url), make_turn()
    with pytest.raises(RetryTurn):
        agent.answer(turn)
    assert agent.answer(turn) == ["ok"]
    assert [s.headers["x-yui-turn"] for s in hook.seen] == [turn.key, turn.key]


def test_a_cancelled_turn_is_not_posted(hook: FakeWebhook) -> None:
    turn = make_turn()
    turn.cancelled.set()
    with pytest.raises(RetryTurn, match="cancelled"):
        WebhookAgent(hook.url).answer(turn)
    assert hook.seen == []


# --- signatures -----------------------------------------------------------------------------


def test_x_yui_signature_is_the_hmac_of_timestamp_and_raw_body(
    hook: FakeWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cret-" + secrets.token_hex(8)
    hook.answers(Answer(200, "a" * (MAX_BODY + 1), {"content-type": "text/plain"}))
    with caplog.at_level(logging.DEBUG):
        WebhookAgent(hook.url, secret=secret).answer(make_turn())

    [seen] = hook.seen
    ts = seen.headers["x-yui-timestamp"]
    assert re.fullmatch(r"\d+", ts) and abs(int(ts) - time.time()) < 5
    mac = hmac.new(secret.encode(), ts.encode() + b"." + seen.body, hashlib.sha256).hexdigest()
    assert seen.headers["x-yui-signature"] == f"sha256={mac}"
    everything = repr(seen.headers) + seen.body.decode() + caplog.text
    assert secret not in everything


def test_every_post_gets_a_fresh_timestamp(
    hook: FakeWebhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, turn = WebhookAgent(hook.url, secret="s3cret"), make_turn()
    for now in (1_800_000_000.5, 1_800_000_100.5):
        monkeypatch.setattr(webhook.time, "time", lambda now=now: now)
        agent.answer(turn)
    assert [s.headers["x-yui-timestamp"] for s in hook.seen] == ["1800000000", "1800000100"]
    assert [s.headers["webhook-timestamp"] for s in hook.seen] == ["1800000000", "1800000100"]
    first, second = (s.headers["x-yui-signature"] for s in hook.seen)
    assert first != second


def test_standard_webhooks_signature_with_a_whsec_secret(hook: FakeWebhook) -> None:
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    turn = make_turn(row("r1", "hi"), row("r2", "héllo ✓"))
    WebhookAgent(hook.url, secret=secret).answer(turn)

    [seen] = hook.seen
    assert seen.headers["webhook-id"] == turn.key
    assert seen.headers["webhook-timestamp"] == seen.headers["x-yui-timestamp"]
    assert Webhook(secret).verify(seen.body, seen.headers)["turn"] == ["r1", "r2"]
    # x-yui-signature keys with the secret as given, prefix and all.
    ts = seen.headers["x-yui-timestamp"]
    mac = hmac.new(secret.encode(), ts.encode() + b"." + seen.body, hashlib.sha256).hexdigest()
    assert seen.headers["x-yui-signature"] == f"sha256={mac}"


def test_standard_webhooks_signature_with_a_plain_secret(hook: FakeWebhook) -> None:
    secret = "s3cret"  # not whsec_: the key is the secret's UTF-8 bytes
    turn = make_turn()
    WebhookAgent(hook.url, secret=secret).answer(turn)

    [seen] = hook.seen
    ts = seen.headers["webhook-timestamp"]
    signed = f"{turn.key}.{ts}.".encode() + seen.body
    expected = base64.b64encode(hmac.new(b"s3cret", signed, hashlib.sha256).digest()).decode()
    assert seen.headers["webhook-signature"] == f"v1,{expected}"
    # The package takes raw key bytes as bytes; a str without whsec_ it reads as base64,
    # which for a plain secret is another key (or an error): authors must pass the bytes.
    Webhook(secret.encode()).verify(seen.body, seen.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(seen.body, seen.headers)


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_not base64!"])
def test_an_unusable_secret_is_refused_up_front(secret: str) -> None:
    with pytest.raises(ValueError):
        WebhookAgent("http://127.0.0.1:9/", secret=secret)


@pytest.mark.parametrize("url", ["localhost:8787", "ftp://host/", "http:///path", ""])
def test_a_url_that_cannot_work_is_refused_up_front(url: str) -> None:
    with pytest.raises(ValueError, match="webhook URL"):
        WebhookAgent(url)


# --- answers --------------------------------------------------------------------------------

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("answer", "replies"),
    [
        (Answer(204), []),
        (Answer(200, " \n\t", JSON), []),
        (Answer(200, "", {"content-type": "text/plain"}), []),
        (json_answer({"reply": "Hello"}), ["Hello"]),
        (json_answer({"reply": "Created"}, status=201), ["Created"]),
        (json_answer({"replies": ["a", " ", "", 5, None, {"x": 1}, "b"]}), ["a", "b"]),
        (json_answer({"replies": "abc"}), []),  # not a list: no replies (Node's behaviour)
        (json_answer({"replies": None, "reply": "ignored"}), []),
        (json_answer({}), []),
        (json_answer({"reply": None}), []),
        (json_answer({"reply": 5}), []),
        (json_answer({"reply": "  "}), []),
        (json_answer(["x", "y", 3]), ["x", "y"]),
        (json_answer("just a string"), ["just a string"]),
        (json_answer(42), []),
        (json_answer(None), []),
        (Answer(200, '{"reply": "caf\u00e9"}', {"content-type": "text/json"}), ["café"]),
        (
            Answer(200, '\ufeff{"reply": "bom"}', {"content-type": "application/json"}),
            ["bom"],
        ),
        (Answer(200, "plain answer\n", {"content-type": "text/plain"}), ["plain answer\n"]),
        (Answer(200, '{"reply": "x"}', {"content-type": "text/plain"}), ['{"reply": "x"}']),
        (Answer(200, "no content type"), ["no content type"]),
        (
            Answer(200, "café".encode("latin-1"), {"content-type": "text/plain; charset=latin-1"}),
            ["café"],
        ),
        (
            Answer(200, "😀 ok".encode(), {"content-type": "text/plain; charset=nonsense"}),
            ["😀 ok"],
        ),
        (Answer(200, b"caf\xff ok", {"content-type": "text/plain"}), ["caf\ufffd ok"]),
        (
            Answer(200, gzip.compress(b'{"reply": "zipped"}'), JSON | {"content-encoding": "gzip"}),
            ["zipped"],
        ),
    ],
)
def test_answer_forms(hook: FakeWebhook, answer: Answer, replies: list[str]) -> None:
    hook.answers(answer)
    assert WebhookAgent(hook.url).answer(make_turn()) == replies


def test_invalid_utf8_is_replaced_and_logged(
    hook: FakeWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    hook.answers(Answer(200, b'{"reply": "caf\xe9"}', JSON))
    with caplog.at_level(logging.WARNING, logger="yui.webhook"):
        assert WebhookAgent(hook.url).answer(make_turn()) == ["caf\ufffd"]
    assert "not valid utf-8" in caplog.text


@pytest.mark.parametrize("body", ["{not json", '{"reply": "x"', "[" * 100_000])
def test_bad_json_with_a_json_content_type_is_retried(hook: FakeWebhook, body: str) -> None:
    hook.answers(Answer(200, body, {"content-type": "application/json; charset=utf-8"}))
    with pytest.raises(RetryTurn, match="bad JSON") as caught:
        WebhookAgent(hook.url).answer(make_turn())
    assert caught.value.after is None


def test_a_long_reply_is_cut_to_the_relays_limit(
    hook: FakeWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    long = "0123456789" * 4000
    hook.answers(json_answer({"replies": [long, "short"]}))
    with caplog.at_level(logging.WARNING, logger="yui.webhook"):
        replies = WebhookAgent(hook.url).answer(make_turn())
    assert replies == [long[:MAX_BODY], "short"]
    assert len(replies[0]) == 32_000
    assert "40000 characters" in caplog.text


def test_nul_bytes_are_stripped(hook: FakeWebhook, caplog: pytest.LogCaptureFixture) -> None:
    hook.answers(json_answer({"replies": ["a\u0000b\u0000", "\u0000 "]}))
    with caplog.at_level(logging.WARNING, logger="yui.webhook"):
        assert WebhookAgent(hook.url).answer(make_turn()) == ["ab"]
    assert "NUL" in caplog.text


# --- failures become retries ----------------------------------------------------------------


def test_a_500_is_retried_naming_the_status(hook: FakeWebhook) -> None:
    hook.answers(Answer(500, "KeyError: 'text'\n  (traceback)", {"content-type": "text/plain"}))
    with pytest.raises(RetryTurn) as caught:
        WebhookAgent(hook.url).answer(make_turn())
    assert "500" in caught.value.reason
    assert "KeyError: 'text' (traceback)" in caught.value.reason
    assert caught.value.after is None


@pytest.mark.parametrize(
    ("value", "after"),
    [
        ("7", 7.0),
        (" 0 ", 0.0),
        ("99999", 3600.0),
        ("-5", None),
        ("soon", None),
        ("<in 120 s>", 120.0),
        ("Thu, 01 Jan 2015 00:00:00 GMT", 0.0),
    ],
)
def test_retry_after_sets_when_to_ask_again(
    hook: FakeWebhook, value: str, after: float | None
) -> None:
    if value == "<in 120 s>":
        value = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    hook.answers(Answer(503, headers={"retry-after": value}))
    with pytest.raises(RetryTurn, match="503") as caught:
        WebhookAgent(hook.url).answer(make_turn())
    if after is None:
        assert caught.value.after is None
    else:
        assert caught.value.after == pytest.approx(after, abs=3)


def test_a_redirect_is_not_followed(hook: FakeWebhook) -> None:
    hook.answers(Answer(302, headers={"location": "/elsewhere"}), json_answer({"reply": "x"}))
    with pytest.raises(RetryTurn, match="302"):
        WebhookAgent(hook.url).answer(make_turn())
    assert len(hook.seen) == 1


def test_a_slow_webhook_times_out(hook: FakeWebhook) -> None:
    hook.answers(Answer(200, "late", delay=2.0))
    started = time.monotonic()
    with pytest.raises(RetryTurn, match=r"timed out after 0\.2 s"):
        WebhookAgent(hook.url, timeout=0.2).answer(make_turn())
    assert time.monotonic() - started < 1.5


def test_a_dripping_answer_times_out(hook: FakeWebhook) -> None:
    hook.answers(Answer(200, "x" * 40, {"content-type": "text/plain"}, drip=0.05))
    started = time.monotonic()
    with pytest.raises(RetryTurn, match=r"timed out after 0\.3 s"):
        WebhookAgent(hook.url, timeout=0.3).answer(make_turn())
    assert time.monotonic() - started < 1.0


def test_a_refused_connection_is_retried_without_the_urls_secrets() -> None:
    port = free_port()
    url = f"http://user:pw@127.0.0.1:{port}/hook?token=t0ken"
    with pytest.raises(RetryTurn) as caught:
        WebhookAgent(url).answer(make_turn())
    reason = caught.value.reason
    assert "refused" in reason.lower() and f"127.0.0.1:{port}" in reason
    assert "t0ken" not in reason and "pw" not in reason


@pytest.mark.parametrize("hang_up", [False, True])
def test_turns_share_a_connection_and_one_the_webhook_closed_costs_no_turn(hang_up: bool) -> None:
    with KeepAliveServer(b'{"reply": "ok"}', hang_up=hang_up) as hook:
        agent = WebhookAgent(hook.url)
        assert hook.repeat(lambda: agent.answer(make_turn()), 3) == [["ok"]] * 3
        agent.pool.clear()
    assert hook.connections == (3 if hang_up else 1)


def test_a_webhook_writing_head_and_body_apart_costs_no_delayed_ack_each_turn() -> None:
    """http.server writes an answer's head, then its body, and holds the body until the head is
    acknowledged: a client that delays its ACK (Linux does on a kept connection) waits 40 ms a
    call. The plug-in's turns must not; a plain pool on the same server shows the stall."""
    turns = 10
    with KeepAliveServer(b'{"reply": "ok"}') as hook:
        agent = WebhookAgent(hook.url)
        agent.answer(make_turn())  # the connection made
        started = time.perf_counter()
        for _ in range(turns):
            agent.answer(make_turn())
        ours = time.perf_counter() - started
        agent.pool.clear()
        plain = urllib3.PoolManager(maxsize=1)
        plain.request("POST", hook.url, body=b"{}")
        started = time.perf_counter()
        for _ in range(turns):
            plain.request("POST", hook.url, body=b"{}")
        stalled = time.perf_counter() - started
        plain.clear()
    assert stalled >= turns * 0.035  # the stall is there to be avoided (Linux's 40 ms minimum)
    assert ours < stalled / 3


def test_an_unknown_host_is_retried() -> None:
    with pytest.raises(RetryTurn, match=r"call to nowhere\.invalid failed"):
        WebhookAgent("http://nowhere.invalid/hook").answer(make_turn())


@pytest.mark.parametrize("declared", [True, False])
def test_a_huge_answer_is_refused(
    hook: FakeWebhook, monkeypatch: pytest.MonkeyPatch, declared: bool
) -> None:
    monkeypatch.setattr(webhook, "MAX_RESPONSE", 1000)
    hook.answers(Answer(200, "x" * 5000, {"content-type": "text/plain"}, length=declared))
    with pytest.raises(RetryTurn, match="over 1000"):
        WebhookAgent(hook.url).answer(make_turn())
